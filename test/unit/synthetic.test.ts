import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { isIgnoredTensor } from '../../src/format/tensor-names.ts';
import { readSafetensorsHeader } from '../../src/format/safetensors.ts';
import { openCheckpoint } from '../../src/format/checkpoint.ts';
import { checkCompatibility } from '../../src/format/compat.ts';
import { dequantizeLinear } from '../../src/format/dequant.ts';
import type { AssistantDescription, TargetDescription } from '../../src/format/model-description.ts';
import type { SyntheticFile } from '../../src/format/synthetic-files.ts';
import { synthGeometry, syntheticCheckpoint } from '../../src/format/synthetic.ts';
import { nodeFileSource, openCheckpointDir } from '../../src/node/file-source.ts';
import { writeSynthetic } from '../../src/node/synthetic.ts';
import { loadReferenceWeights, referenceForward } from '../../src/reference/index.ts';
import { TINY_A } from './fixtures.ts';

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'ringside-synth-'));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

const entries = async (file: string) =>
  (await readSafetensorsHeader(await nodeFileSource(file))).tensors
    .map((t) => `${t.name} ${t.dtype} [${t.shape}]`)
    .sort();

describe('synthetic checkpoints', () => {
  it('tiny preset on disk has exactly the tensors, dtypes and shapes of the tiny-a fixture, and opens as a pair', async () => {
    const dir = path.join(tmp, 'tiny');
    const files = await writeSynthetic(dir, synthGeometry('tiny'), { seed: 3 });
    expect(files.map((f) => path.relative(dir, f.path))).toEqual([
      'target/config.json',
      'target/model.safetensors',
      'target/tokenizer.json',
      'target/tokenizer_config.json',
      'target/chat_template.jinja',
      'assistant/config.json',
      'assistant/model.safetensors',
    ]);
    for (const role of ['target', 'assistant']) {
      // the text model's tensors are the fixture's; beside them, as published, a vision tower's (never loaded)
      const all = await entries(path.join(dir, role, 'model.safetensors'));
      const towers = all.filter((e) => isIgnoredTensor(e.split(' ')[0]));
      expect(all.filter((e) => !towers.includes(e))).toEqual(
        await entries(path.join(TINY_A, role, 'model.safetensors')),
      );
      expect([...new Set(towers.map((e) => e.split('.')[0]))].sort()).toEqual(
        role === 'target' ? ['embed_vision', 'vision_tower'] : [],
      );
      const mine = JSON.parse(await readFile(path.join(dir, role, 'config.json'), 'utf8'));
      const fixture = JSON.parse(await readFile(path.join(TINY_A, role, 'config.json'), 'utf8'));
      expect(mine.quantization).toEqual(fixture.quantization);
      expect({ ...mine.text_config, max_position_embeddings: 0 }).toEqual({
        ...fixture.text_config,
        max_position_embeddings: 0,
      });
    }
    const t = await openCheckpointDir(path.join(dir, 'target'));
    const a = await openCheckpointDir(path.join(dir, 'assistant'));
    checkCompatibility(t.description as TargetDescription, a.description as AssistantDescription);
    // the bytes on disk are the virtual file's bytes
    const virtual = syntheticCheckpoint(synthGeometry('tiny'), { seed: 3 }).target.find(
      (f) => f.name === 'model.safetensors',
    )!;
    expect(
      Buffer.compare(await readFile(path.join(dir, 'target/model.safetensors')), await virtual.read(0, virtual.size)),
    ).toBe(0);
    // an occupied folder is not mixed into
    await expect(writeSynthetic(dir, synthGeometry('tiny'))).rejects.toThrow(
      /tiny\/target is not empty \((?=[^)]*config\.json)(?=[^)]*chat_template\.jinja)[^)]*\); use --force/,
    );
    await writeFile(path.join(dir, 'assistant', 'notes.txt'), 'x');
    await expect(writeSynthetic(dir, synthGeometry('tiny'), { force: true })).rejects.toThrow(
      /assistant is not empty .*use an empty folder/,
    );
  });

  it('is deterministic per seed, and any byte range reads the same as the whole file', async () => {
    const file = (seed: number) => syntheticCheckpoint(synthGeometry('tiny'), { seed }).target[1] as SyntheticFile;
    const a = await file(1).read(0, file(1).size);
    expect(Buffer.compare(a, await file(1).read(0, a.byteLength))).toBe(0);
    const b = await file(2).read(0, a.byteLength);
    expect(Buffer.compare(a.subarray(0, 8), b.subarray(0, 8))).toBe(0); // same header
    expect(Buffer.compare(a, b)).not.toBe(0); // different weights
    const f = file(1);
    let x = 12345;
    for (let i = 0; i < 200; i++) {
      x = (x * 1103515245 + 12345) >>> 0;
      const off = x % a.byteLength;
      const len = Math.min(a.byteLength - off, (x >>> 7) % 5000);
      expect(Buffer.compare(await f.read(off, len), a.subarray(off, off + len)), `range ${off}+${len}`).toBe(0);
    }
  });

  it('shards past the size limit with an index, and opens', async () => {
    const pair = syntheticCheckpoint(synthGeometry('tiny'), { shardBytes: 2e6 });
    expect(pair.target.map((f) => f.name)).toEqual([
      'config.json',
      'model.safetensors.index.json',
      'model-00001-of-00004.safetensors',
      'model-00002-of-00004.safetensors',
      'model-00003-of-00004.safetensors',
      'model-00004-of-00004.safetensors',
      'tokenizer.json',
      'tokenizer_config.json',
      'chat_template.jinja',
    ]);
    for (const f of pair.target.filter((x) => x.name.endsWith('.safetensors'))) {
      const h = await readSafetensorsHeader(f);
      expect(f.size - h.dataStart).toBeLessThanOrEqual(2e6);
    }
    const index = JSON.parse(new TextDecoder().decode(await pair.target[1].read(0, pair.target[1].size)));
    // 334 text-model tensors (tiny-a's) and the vision tower's 18
    expect(Object.keys(index.weight_map)).toHaveLength(334 + 18);
    const ck = await openCheckpoint(pair.target);
    expect([ck.tensors.size, ck.ignoredTensors]).toEqual([334, 18]);
  });

  it('12b and 31b presets have the docs/MODEL.md section 1 geometry (opened from headers, no data read)', async () => {
    const open = async (p: '12b' | '31b') => {
      const pair = syntheticCheckpoint(synthGeometry(p));
      const t = await openCheckpoint(pair.target, p);
      const a = await openCheckpoint(pair.assistant!, p);
      checkCompatibility(t.description as TargetDescription, a.description as AssistantDescription);
      for (const f of pair.target.filter((x) => x.name.endsWith('.safetensors')))
        expect(f.size).toBeLessThanOrEqual(5e9);
      return {
        t: t.description as TargetDescription,
        a: a.description as AssistantDescription,
        bytes: t.totalBytes,
        files: pair.target.length,
      };
    };
    const b12 = await open('12b');
    expect(b12.t).toMatchObject({
      modelType: 'gemma4_unified',
      hidden: 3840,
      intermediate: 15360,
      vocab: 262144,
      window: 1024,
      finalSoftcap: 30,
      embedScale: 62,
    });
    expect(b12.t.layers.map((l) => (l.type === 'full' ? 'F' : 'S')).join('')).toBe('SSSSSF'.repeat(8));
    expect(b12.t.layers[0]).toMatchObject({
      numHeads: 16,
      numKvHeads: 8,
      headDim: 256,
      qProj: { bits: 4, groupSize: 64, outFeatures: 4096 },
    });
    expect(b12.t.layers[47]).toMatchObject({
      numKvHeads: 1,
      headDim: 512,
      kEqV: true,
      vProj: null,
      kProj: { outFeatures: 512 },
    });
    expect(b12.t.embed.weight.shape).toEqual([262144, 480]);
    expect(b12.a).toMatchObject({
      modelType: 'gemma4_unified_assistant',
      hidden: 1024,
      intermediate: 8192,
      backboneHidden: 3840,
    });
    // 4-bit with 8-bit MLP projections, as the published 12B
    expect(b12.t.layers[0].down).toMatchObject({ bits: 8, groupSize: 64 });
    expect(b12.bytes / 1e9).toBeCloseTo(10.9, 1);
    expect(b12.files).toBe(8); // config, index, 3 shards, tokenizer.json, tokenizer_config.json, chat_template.jinja
    const b31 = await open('31b');
    expect(b31.t).toMatchObject({ modelType: 'gemma4', hidden: 5376, intermediate: 21504, embedScale: 73.5 });
    expect(b31.t.layers.filter((l) => l.type === 'full')).toHaveLength(10);
    expect(b31.t.layers[59]).toMatchObject({ numHeads: 32, numKvHeads: 4, headDim: 512 });
    expect(b31.t.layers[0]).toMatchObject({ numKvHeads: 16, headDim: 256 });
    expect(b31.a.embed.kind).toBe('dense'); // bf16 assistant, as seen in the wild
    expect(b31.bytes / 1e9).toBeGreaterThan(17);
    const small = await openCheckpoint(
      syntheticCheckpoint(synthGeometry('12b', { layers: 7, mlpBits: 8, assistant: null })).target,
    );
    const d = small.description as TargetDescription;
    expect(d.layers.map((l) => l.type[0]).join('')).toBe('sssssff');
    expect(d.layers[3].down).toMatchObject({ bits: 8 });
  });

  it('weights are numerically sane: mean ~0, std ~1/sqrt(in); the reference forward gives finite, spread logits', async () => {
    const ck = await openCheckpoint(syntheticCheckpoint(synthGeometry('tiny'), { seed: 5 }).target);
    const d = ck.description as TargetDescription;
    for (const lin of [d.embed, d.layers[0].qProj, d.layers[0].down]) {
      const w = await dequantizeLinear(lin);
      let s = 0,
        s2 = 0;
      for (const v of w) {
        s += v;
        s2 += v * v;
      }
      const mean = s / w.length;
      const std = Math.sqrt(s2 / w.length - mean * mean);
      expect(Math.abs(mean), lin.name).toBeLessThan(0.1 * std);
      expect(std * Math.sqrt(lin.inFeatures), lin.name).toBeGreaterThan(0.85);
      expect(std * Math.sqrt(lin.inFeatures), lin.name).toBeLessThan(1.15);
    }
    const r = referenceForward(await loadReferenceWeights(d), [2, 7, 100, 5, 900, 33, 1, 64]);
    let max = 0,
      s2 = 0;
    for (const v of r.logits) {
      expect(Number.isFinite(v)).toBe(true);
      max = Math.max(max, Math.abs(v));
      s2 += v * v;
    }
    expect(max).toBeLessThan(20); // well inside the softcap
    expect(Math.sqrt(s2 / r.logits.length)).toBeGreaterThan(0.3); // not collapsed
  });
});
