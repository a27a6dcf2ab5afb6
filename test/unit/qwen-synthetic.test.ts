import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ByteSource } from '../../src/format/bytesource.ts';
import { openQwen35Checkpoint } from '../../src/format/qwen3_5/index.ts';
import {
  QWEN_SYNTH_PRESETS,
  type QwenSynthGeometry,
  type QwenSynthPreset,
  qwenSynthGeometry,
  syntheticQwen,
} from '../../src/format/qwen3_5/synthetic.ts';
import { isIgnoredTensor } from '../../src/format/tensor-names.ts';
import { readSafetensorsHeader } from '../../src/format/safetensors.ts';
import { nodeFileSource, nodeFolderSources } from '../../src/node/file-source.ts';
import { writeSynthetic } from '../../src/node/synthetic.ts';
import {
  loadQwenWeights,
  newQwenMtpState,
  newQwenState,
  qwenForward,
  qwenMtpForward,
} from '../../src/reference/qwen3_5/index.ts';

/**
 * Synthetic Qwen3.5 checkpoints (src/format/qwen3_5/synthetic.ts): the real-shape presets open in the Qwen
 * loader from their headers alone (no tensor data is made), with the geometry they claim; tiny variants with
 * each real preset's ratios (GQA groups, value heads per key head, layer interval, untied head, MTP) open with
 * their data and run the float64 reference to finite, spread logits; qwen-tiny matches the fixture's tensor
 * list and writes to disk.
 */
let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'ringside-qsynth-'));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

const entries = async (files: ByteSource[]) =>
  (await Promise.all(files.filter((f) => f.name.endsWith('.safetensors')).map((f) => readSafetensorsHeader(f))))
    .flatMap((h) => h.tensors.map((t) => `${t.name} ${t.dtype} [${t.shape}]`))
    .sort();

/** A preset scaled down to test size, keeping its structure: the ratios the loader and kernels care about. */
function tinyVariant(p: QwenSynthPreset): QwenSynthGeometry {
  const g = QWEN_SYNTH_PRESETS[p];
  return qwenSynthGeometry(p, {
    vocab: 512,
    hidden: 128,
    intermediate: 192,
    layers: 2 * g.interval,
    heads: 2 * (g.heads / g.kvHeads),
    kvHeads: 2,
    headDim: 64,
    linearKeyHeads: 2,
    linearValueHeads: 2 * (g.linearValueHeads / g.linearKeyHeads),
    linearKeyDim: 32,
    linearValueDim: 32,
  });
}

describe('synthetic Qwen3.5 checkpoints', () => {
  it('qwen36-27b opens from headers with the Qwen3.6-27B geometry, its MTP head, 4-bit MLX layout', async () => {
    const { target } = syntheticQwen(qwenSynthGeometry('qwen36-27b'));
    const ck = await openQwen35Checkpoint(target, 'qwen36-27b');
    const d = ck.description;
    expect(d.config).toMatchObject({
      hidden: 5120,
      intermediate: 17408,
      numLayers: 64,
      vocab: 248320,
      tieWordEmbeddings: false,
      attention: { numHeads: 24, numKvHeads: 4, headDim: 256, rope: { theta: 1e7, rotaryDim: 64 } },
      linear: { numKeyHeads: 16, numValueHeads: 48, keyHeadDim: 128, valueHeadDim: 128, convKernel: 4 },
      mtp: { numLayers: 1, dedicatedEmbeddings: false },
    });
    expect(d.layers.map((l) => (l.type === 'full' ? 'F' : 'L')).join('')).toBe('LLLF'.repeat(16));
    expect(d.mtp).not.toBeNull();
    expect(d.mtpUnavailable).toBeNull();
    const l0 = d.layers[0];
    if (l0.type !== 'linear') throw new Error('layer 0 should be Gated DeltaNet');
    expect(l0.inProjQkv).toMatchObject({ bits: 4, groupSize: 64, outFeatures: 2 * 16 * 128 + 48 * 128 });
    expect(l0.conv.shape).toEqual([10240, 4, 1]);
    expect(l0.aLog.dtype).toBe('F32');
    expect(d.mtp!.fc).toMatchObject({ bits: 4, outFeatures: 5120, inFeatures: 10240 });
    expect(d.embed.weight.shape).toEqual([248320, 640]);
    for (const f of target.filter((x) => x.name.endsWith('.safetensors'))) expect(f.size).toBeLessThanOrEqual(5e9);
    // 4-bit weights (+ bf16 scales and biases) of a 27B-class model with an untied head and the MTP layer
    expect(ck.totalBytes / 1e9).toBeGreaterThan(14);
    expect(ck.totalBytes / 1e9).toBeLessThan(17);
  });

  it('qwen35-9b opens from headers with the Qwen3.5-9B geometry', async () => {
    const ck = await openQwen35Checkpoint(syntheticQwen(qwenSynthGeometry('qwen35-9b')).target, 'qwen35-9b');
    const d = ck.description;
    expect(d.config).toMatchObject({
      hidden: 4096,
      intermediate: 12288,
      numLayers: 32,
      vocab: 248320,
      attention: { numHeads: 16, numKvHeads: 4, headDim: 256 },
      linear: { numKeyHeads: 16, numValueHeads: 32, keyHeadDim: 128, valueHeadDim: 128, convKernel: 4 },
    });
    expect(d.layers.filter((l) => l.type === 'full').map((l) => l.index)).toEqual([3, 7, 11, 15, 19, 23, 27, 31]);
    expect(d.mtp).not.toBeNull();
  });

  it('--no-mtp: the target still opens, and says why MTP drafting is unavailable', async () => {
    const ck = await openQwen35Checkpoint(syntheticQwen(qwenSynthGeometry('qwen-tiny', { mtp: false })).target);
    expect(ck.description.mtp).toBeNull();
    expect(ck.description.mtpUnavailable).toMatch(/no mtp\.\* tensors/);
  });

  it('refuses a geometry the loader could not take, before making any file', () => {
    expect(() => qwenSynthGeometry('qwen36-27b', { linearKeyHeads: 5 })).toThrow(
      /linearValueHeads 48 not a multiple of linearKeyHeads 5/,
    );
    expect(() => qwenSynthGeometry('qwen-tiny', { hidden: 100 })).toThrow(
      /hidden 100 not a multiple of the group size 64/,
    );
  });

  for (const p of ['qwen36-27b', 'qwen35-9b'] as const) {
    it(`a tiny variant of ${p} loads with its data and the float64 reference runs to finite, spread logits`, async () => {
      const g = tinyVariant(p);
      const ck = await openQwen35Checkpoint(syntheticQwen(g, { seed: 3 }).target, `${p}-tiny`);
      const d = ck.description;
      expect(d.layers.filter((l) => l.type === 'full')).toHaveLength(2);
      const w = await loadQwenWeights(d);
      const r = qwenForward(w, newQwenState(d.config), [2, 7, 100, 5, 300, 33, 1, 64]);
      let max = 0;
      let s2 = 0;
      for (const v of r.logits) {
        expect(Number.isFinite(v)).toBe(true);
        max = Math.max(max, Math.abs(v));
        s2 += v * v;
      }
      expect(Math.sqrt(s2 / r.logits.length)).toBeGreaterThan(0.1); // not collapsed
      expect(max).toBeLessThan(100);
      // the MTP head reads the target's hidden rows and gives finite logits too
      const m = qwenMtpForward(w, newQwenMtpState(), [7, 100, 5], r.hidden.subarray(0, 3 * d.hidden), 0);
      expect(m.logits.every(Number.isFinite)).toBe(true);
    });
  }

  it('qwen-tiny has the qwen-tiny fixture tensors (names, dtypes, shapes) and writes to disk as a target folder', async () => {
    const fixture = await nodeFolderSources(path.resolve('test/fixtures/qwen-tiny/target'));
    const mine = syntheticQwen(qwenSynthGeometry('qwen-tiny')).target;
    // the text model's tensors are the fixture's; beside them, as published, the vision tower's (never loaded)
    const all = await entries(mine);
    const towers = all.filter((e) => isIgnoredTensor(e.split(' ')[0]));
    expect(all.filter((e) => !towers.includes(e))).toEqual(await entries(fixture));
    expect(towers.length).toBeGreaterThan(0);
    expect(towers.every((e) => e.startsWith('vision_tower.'))).toBe(true);
    const dir = path.join(tmp, 'qt');
    const written = await writeSynthetic(dir, qwenSynthGeometry('qwen-tiny'), { seed: 1 });
    expect(written.map((f) => path.relative(dir, f.path))).toEqual([
      'target/config.json',
      'target/model.safetensors',
      'target/tokenizer.json',
      'target/tokenizer_config.json',
      'target/chat_template.jinja',
    ]);
    const ck = await openQwen35Checkpoint(await nodeFolderSources(path.join(dir, 'target')));
    expect(ck.description.mtp).not.toBeNull();
    expect(ck.ignoredTensors).toBe(towers.length);
    const onDisk = await readFile(path.join(dir, 'target/model.safetensors'));
    const virtual = syntheticQwen(qwenSynthGeometry('qwen-tiny'), { seed: 1 }).target[1];
    expect(Buffer.compare(onDisk, await virtual.read(0, virtual.size))).toBe(0);
    expect(
      (await readSafetensorsHeader(await nodeFileSource(path.join(dir, 'target/model.safetensors')))).tensors.length,
    ).toBe(ck.tensors.size + ck.ignoredTensors);
  });
});
