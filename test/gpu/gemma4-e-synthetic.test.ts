/**
 * The synthetic E-series presets (src/format/synthetic-gemma4-family.ts): `e2b` and `e4b` open from their headers
 * alone with the real geometry (src/format/synthetic-gemma4-family-presets.ts cites each number's source), 4-bit MLX
 * layout for the target (the per-layer table and projections included) and a bf16 centroid-head assistant that fits
 * the target; `e2b-tiny` and an E4B-structured tiny variant run on the GPU: the assistant's drafts equal the CPU
 * reference's, MTP == classic (SHA-256) past the window; the CLI writes `e2b-tiny` and generates from it, and refuses
 * an E-series geometry that would have no cache owner.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ByteSource } from '../../src/format/bytesource.ts';
import { openCheckpoint } from '../../src/format/checkpoint.ts';
import { checkCompatibility } from '../../src/format/compat.ts';
import type { AssistantDescription, Linear, TargetDescription } from '../../src/format/model-description.ts';
import { tokenOrdering } from '../../src/format/synthetic-gemma4-family.ts';
import { synthGeometry, syntheticCheckpoint, type SynthGeometry } from '../../src/format/synthetic.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import { AssistantModel } from '../../src/model/gemma4/assistant.ts';
import { ETargetModel } from '../../src/model/gemma4/e-series/e-target.ts';
import { assistantSource, generateClassic, generateMtp } from '../../src/model/generate.ts';
import { uploadWeights } from '../../src/model/gpu-weights.ts';
import { loadReferenceWeights, referenceDraft, referenceForward } from '../../src/reference/index.ts';
import { maxAbsDiff } from '../support/fixtures.ts';
import { testGpu } from './gpu-context.ts';

const run = promisify(execFile);
const cli = (...args: string[]) => run('npm', ['run', '-s', 'cli', '--', ...args], { timeout: 240_000 });
const bytes = (fs: ByteSource[]) => fs.reduce((a, f) => a + f.size, 0);

async function open(g: SynthGeometry) {
  const pair = syntheticCheckpoint(g);
  const t = (await openCheckpoint(pair.target, 'synthetic target')).description as TargetDescription;
  const a = (await openCheckpoint(pair.assistant!, 'synthetic assistant')).description as AssistantDescription;
  return { pair, t, a };
}

const q4 = (l: Linear) => l.kind === 'affine' && l.bits === 4 && l.groupSize === 64;

describe('synthetic E-series presets', () => {
  it.each([
    {
      preset: 'e2b' as const,
      layers: 35,
      hidden: 1536,
      period: 5,
      kv: 1,
      shared: 20,
      donors: [13, 14],
      widths: [6144, 12288],
      backbone: 1536,
    },
    {
      preset: 'e4b' as const,
      layers: 42,
      hidden: 2560,
      period: 6,
      kv: 2,
      shared: 18,
      donors: [22, 23],
      widths: [10240],
      backbone: 2560,
    },
  ])(
    '$preset opens from its headers with the real geometry, 4-bit MLX layout, and a fitting centroid-head assistant',
    async (c) => {
      const { pair, t, a } = await open(synthGeometry(c.preset));
      expect([t.layers.length, t.hidden, t.vocab, t.window, t.finalSoftcap]).toEqual([
        c.layers,
        c.hidden,
        262144,
        512,
        30,
      ]);
      expect(t.layers.map((l) => l.type === 'full')).toEqual(
        Array.from({ length: c.layers }, (_, i) => (i + 1) % c.period === 0),
      );
      expect(t.layers.every((l) => l.numHeads === 8 && l.numKvHeads === c.kv)).toBe(true);
      expect(t.layers.map((l) => l.headDim)).toEqual(t.layers.map((l) => (l.type === 'full' ? 512 : 256)));
      // per-layer inputs: a [262144, L x 256] table, quantized like every linear
      const ple = t.perLayer!;
      expect([ple.width, ple.table.outFeatures, ple.table.inFeatures]).toEqual([256, 262144, c.layers * 256]);
      expect([ple.modelProjection.outFeatures, ple.modelProjection.inFeatures]).toEqual([c.layers * 256, c.hidden]);
      expect([ple.table, ple.modelProjection, t.embed].every(q4)).toBe(true);
      expect(t.layers.every((l) => l.perLayerInput && q4(l.perLayerInput.gate) && q4(l.perLayerInput.projection))).toBe(
        true,
      );
      // KV sharing: the last N layers read the last owner of their type and carry no k/v projections
      const first = c.layers - c.shared;
      expect(t.config.kvSharedLayers).toBe(c.shared);
      t.layers.forEach((l, i) => {
        expect(l.kvDonor, `layer ${i}`).toBe(i < first ? undefined : c.donors[l.type === 'sliding' ? 0 : 1]);
        expect(l.kProj === null, `layer ${i} k_proj`).toBe(i >= first);
      });
      expect([...new Set(t.layers.map((l) => l.gate.outFeatures))]).toEqual(c.widths);
      // the assistant: bf16, 4 all-shared layers of width 256 reading the donors, a 2048-centroid head, top 32
      expect([a.hidden, a.intermediate, a.backboneHidden, a.layers.length]).toEqual([256, 2048, c.backbone, 4]);
      expect(a.layers.every((l) => l.numHeads === 4 && l.numKvHeads === c.kv && l.kProj === null)).toBe(true);
      expect(a.embed.kind).toBe('dense');
      expect(a.centroidHead).toMatchObject({ numCentroids: 2048, topK: 32 });
      expect(a.centroidHead!.tokenOrdering).toMatchObject({ dtype: 'I32', shape: [262144] });
      checkCompatibility(t, a);
      console.log(
        `${c.preset}: target ${(bytes(pair.target) / 1e9).toFixed(3)} GB (per-layer table ${(ple.table.weight.byteLength / 1e9).toFixed(3)} GB of codes), assistant ${(bytes(pair.assistant!) / 1e6).toFixed(1)} MB`,
      );
    },
  );

  it('token_ordering is a permutation of the vocabulary', () => {
    for (const [V, seed] of [
      [262144, 0],
      [512, 7],
      [1000, 3],
    ]) {
      const t = tokenOrdering(V, seed);
      const seen = new Uint8Array(V);
      for (const x of t) seen[x]++;
      expect(
        seen.every((n) => n === 1),
        `V=${V}`,
      ).toBe(true);
      expect(t.slice(0, 4)).not.toEqual(Int32Array.from([0, 1, 2, 3]));
    }
  });

  it('refuses an E-series geometry with no cache owner (synth --layers below the shared layers)', () => {
    expect(() => syntheticCheckpoint(synthGeometry('e2b', { layers: 12 }))).toThrow(
      /20 KV-shared layers of 12 leave no layer that owns a cache/,
    );
  });
});

describe('tiny E-series synthetic checkpoints on the GPU', () => {
  let ctx: GpuContext;
  beforeAll(async () => {
    ctx = await testGpu();
  });
  afterAll(() => ctx?.destroy());

  /** E4B's structure (5 : 1 layers, no double-wide MLP, 2 KV heads) at e2b-tiny's sizes. */
  const e4bTiny = () => {
    const t = synthGeometry('e2b-tiny');
    return synthGeometry('e4b', {
      vocab: t.vocab,
      hidden: t.hidden,
      intermediate: t.intermediate,
      layers: 12,
      heads: 4,
      kvHeads: 2,
      globalKvHeads: 2,
      headDim: t.headDim,
      globalHeadDim: t.globalHeadDim,
      window: t.window,
      assistant: t.assistant,
      eSeries: {
        ...synthGeometry('e4b').eSeries!,
        perLayerInput: 64,
        kvSharedLayers: 5,
        centroids: { count: 16, topK: 4 },
      },
    });
  };

  it.each([
    { name: 'e2b-tiny', g: () => synthGeometry('e2b-tiny') },
    { name: 'e4b-structured tiny', g: e4bTiny },
  ])('$name: drafts equal the CPU reference, MTP == classic over 60 tokens past the window', async ({ g }) => {
    const { t, a } = await open(g());
    const tw = await uploadWeights(ctx.device, t);
    const aw = await uploadWeights(ctx.device, a);
    const target = new ETargetModel(ctx, tw, { maxContext: 128, maxBlock: 8, prefillChunk: 64, precision: 'f32' });
    const asst = new AssistantModel(ctx, aw, target, 'hf');
    try {
      const prompt = Array.from({ length: 20 }, (_, i) => (i * 37 + 11) % t.vocab);
      const H = t.hidden;
      const pre = await target.prefill(prompt, { logits: 'last', finalHidden: true });
      const gpu = await asst.draft(pre.argmax![0], pre.finalHidden!.slice(19 * H, 20 * H), 3, { capture: true });
      const rt = await loadReferenceWeights(t);
      const ra = await loadReferenceWeights(a);
      const fwd = referenceForward(rt, prompt, { numerics: 'exact' });
      const ref = referenceDraft(rt, ra, {
        bonusToken: pre.argmax![0],
        seedHidden: fwd.finalHidden.slice(19 * H, 20 * H),
        positionId: prompt.length,
        sharedKv: fwd.sharedKv,
        steps: 3,
        numerics: 'exact',
      });
      const err = maxAbsDiff(gpu.logits!, ref.logits);
      expect(err, 'draft logits vs the CPU reference').toBeLessThanOrEqual(0.05);
      expect(gpu.tokens).toEqual(ref.tokens);
      const classic = await generateClassic(target, prompt, { maxNew: 60 });
      const mtp = await generateMtp(target, assistantSource(asst), prompt, 4, { maxNew: 60 });
      expect(mtp.sha256).toBe(classic.sha256);
      console.log(
        `${t.layers.length} layers, donors ${target.donors.join(',')}: drafts ${gpu.tokens.join(',')} (reference ${ref.tokens.join(',')}), logits max abs ${err.toExponential(2)}; MTP == classic over 60 tokens, ${mtp.counters!.rounds} rounds`,
      );
    } finally {
      asst.destroy();
      target.destroy();
      aw.destroy();
      tw.destroy();
    }
  });

  it('the CLI writes e2b-tiny and generates from it: MTP == classic (SHA-256)', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-esynth-'));
    const w = await cli('synth', '--preset', 'e2b-tiny', '--out', dir);
    expect(JSON.parse(w.stdout).preset).toBe('e2b-tiny');
    const base = ['generate', '--target', path.join(dir, 'target'), '--tokens', '3,14,15,92,65,35,89,79,32,38'];
    const out = (name: string) => path.join(dir, `${name}.json`);
    await cli(...base, '--max-new', '40', '--mode', 'classic', '--json', out('classic'));
    await cli(
      ...base,
      '--max-new',
      '40',
      '--mode',
      'mtp',
      '--draft',
      path.join(dir, 'assistant'),
      '--block',
      '4',
      '--json',
      out('mtp'),
    );
    const [c, m] = ['classic', 'mtp'].map((n) => JSON.parse(readFileSync(out(n), 'utf8')));
    expect(m.sha256).toBe(c.sha256);
    expect(m.rounds.length).toBeGreaterThan(0);
    const bad = await cli('synth', '--preset', 'e2b', '--layers', '12', '--out', path.join(dir, 'bad')).catch((e) => e);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/20 KV-shared layers of 12 leave no layer that owns a cache/);
  });
});
