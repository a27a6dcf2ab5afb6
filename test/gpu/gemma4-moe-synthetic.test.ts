/**
 * The synthetic MoE presets (src/format/synthetic-gemma4-moe.ts): `26b-a4b` opens from its headers alone with the
 * real 26B-A4B geometry (src/format/synthetic-gemma4-moe-presets.ts cites each number's source), 4-bit MLX layout with
 * the 8-bit router override and stacked [E, out, in] experts, and a bf16 dense assistant that fits the target;
 * `26b-a4b-tiny` runs on the GPU: prefill logits and the chosen experts against the CPU float64 reference (same router
 * convention), the assistant's drafts equal the reference's, MTP == classic (SHA-256) over 300 tokens past the window
 * with rejected drafts; the CLI writes `26b-a4b-tiny` and generates from it, and the probe blames moe-grouped on the
 * experts stage.
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
import { synthGeometry, syntheticCheckpoint, type SynthGeometry } from '../../src/format/synthetic.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import { AssistantModel } from '../../src/model/gemma4/assistant.ts';
import { MoETargetModel } from '../../src/model/gemma4/moe/moe-target.ts';
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

const affine = (l: Linear, bits: number) => l.kind === 'affine' && l.bits === bits && l.groupSize === 64;

describe('synthetic MoE presets', () => {
  it('26b-a4b opens from its headers with the real geometry, 4-bit MLX layout, 8-bit router, a fitting assistant', async () => {
    const { pair, t, a } = await open(synthGeometry('26b-a4b'));
    expect([t.layers.length, t.hidden, t.vocab, t.window, t.finalSoftcap, t.intermediate]).toEqual([
      30, 2816, 262144, 1024, 30, 2112,
    ]);
    expect(t.config.moe).toEqual({ numExperts: 128, topK: 8, intermediate: 704 });
    // (5 sliding, 1 full) x 5; full layers: 512-wide heads, 2 KV heads, K = V (no v_proj)
    expect(t.layers.map((l) => l.type === 'full')).toEqual(Array.from({ length: 30 }, (_, i) => (i + 1) % 6 === 0));
    for (const l of t.layers) {
      const full = l.type === 'full';
      expect([l.numHeads, l.numKvHeads, l.headDim]).toEqual([16, full ? 2 : 8, full ? 512 : 256]);
      expect(l.vProj === null).toBe(full);
      expect([l.gate.outFeatures, l.gate.inFeatures]).toEqual([2112, 2816]);
      expect([l.qProj, l.oProj, l.gate, l.up, l.down].every((x) => affine(x, 4))).toBe(true);
    }
    expect(affine(t.embed, 4)).toBe(true);
    expect(t.config.kvSharedLayers).toBe(0);
    expect(t.perLayer).toBeUndefined();
    t.layers.forEach((l, i) => {
      const m = l.moe!;
      expect([m.numExperts, m.topK], `layer ${i}`).toEqual([128, 8]);
      expect(affine(m.routerProj, 8), `layer ${i} router`).toBe(true);
      expect([m.routerProj.outFeatures, m.routerProj.inFeatures]).toEqual([128, 2816]);
      expect(m.routerScale.shape).toEqual([2816]);
      expect(m.perExpertScale.shape).toEqual([128]);
      expect(m.gate.stacked.weight.shape).toEqual([128, 704, (2816 * 4) / 32]);
      const up = m.up.stacked;
      expect(up.kind === 'affine' && up.scales.shape).toEqual([128, 704, 2816 / 64]);
      expect(m.down.stacked.weight.shape).toEqual([128, 2816, (704 * 4) / 32]);
      expect([m.gate.stacked, m.up.stacked, m.down.stacked].every((x) => affine(x, 4))).toBe(true);
      for (const n of [m.preFfNorm2, m.postFfNorm1, m.postFfNorm2]) expect(n.shape).toEqual([2816]);
    });
    // the assistant: bf16, 4 all-shared layers of width 1024 on the 2816-wide backbone, a tied dense head
    expect([a.hidden, a.intermediate, a.backboneHidden, a.layers.length, a.window]).toEqual([
      1024, 8192, 2816, 4, 1024,
    ]);
    expect(a.layers.map((l) => [l.numHeads, l.numKvHeads, l.headDim])).toEqual([
      [16, 8, 256],
      [16, 8, 256],
      [16, 8, 256],
      [16, 2, 512],
    ]);
    expect(a.embed.kind).toBe('dense');
    expect(a.centroidHead).toBeFalsy();
    checkCompatibility(t, a);
    const experts = t.layers.reduce(
      (s, l) => s + [l.moe!.gate, l.moe!.up, l.moe!.down].reduce((x, e) => x + e.stacked.weight.byteLength, 0),
      0,
    );
    console.log(
      `26b-a4b: target ${(bytes(pair.target) / 1e9).toFixed(3)} GB in ${pair.target.length - 2} shards (expert codes ${(experts / 1e9).toFixed(3)} GB), assistant ${(bytes(pair.assistant!) / 1e9).toFixed(3)} GB`,
    );
    expect(pair.target.length).toBeGreaterThan(3); // config, index, and shards under MLX's 5 GB
  });

  it('refuses a MoE geometry whose expert width is not a multiple of the group, or top-k above the experts', () => {
    const moe = synthGeometry('26b-a4b-tiny').moe!;
    expect(() =>
      syntheticCheckpoint(synthGeometry('26b-a4b-tiny', { moe: { ...moe, expertIntermediate: 100 } })),
    ).toThrow(/the expert width 100 is not a multiple of the group size 64/);
    expect(() => syntheticCheckpoint(synthGeometry('26b-a4b-tiny', { moe: { ...moe, topK: 9 } }))).toThrow(
      /top_k_experts 9 must be between 1 and num_experts 8/,
    );
  });
});

describe('26b-a4b-tiny on the GPU', () => {
  let ctx: GpuContext;
  beforeAll(async () => {
    ctx = await testGpu();
  });
  afterAll(() => ctx?.destroy());

  it('logits and experts vs the CPU reference; drafts equal the reference; MTP == classic over 300 tokens', {
    timeout: 600_000,
  }, async () => {
    const { t, a } = await open(synthGeometry('26b-a4b-tiny'));
    const tw = await uploadWeights(ctx.device, t);
    const aw = await uploadWeights(ctx.device, a);
    const target = new MoETargetModel(ctx, tw, { maxContext: 360, maxBlock: 8, prefillChunk: 64, precision: 'f32' });
    const asst = new AssistantModel(ctx, aw, target, 'hf');
    try {
      const T = 20;
      const prompt = Array.from({ length: T }, (_, i) => (i * 37 + 11) % t.vocab);
      const H = t.hidden;
      const pre = await target.prefill(prompt, { logits: 'all', finalHidden: true, captures: 'all' });
      const gpu = await asst.draft(pre.argmax![T - 1], pre.finalHidden!.slice((T - 1) * H, T * H), 3, {
        capture: true,
      });
      const rt = await loadReferenceWeights(t);
      const ra = await loadReferenceWeights(a);
      // the GPU target's default router is MLX's (bf16 scale x root product): the reference's twin convention
      const fwd = referenceForward(rt, prompt, {
        numerics: 'exact',
        captures: true,
        router: { order: 'mlx', scaleProduct: 'mlx-bf16' },
      });
      const logitErr = maxAbsDiff(pre.logits!, fwd.logits);
      expect(logitErr, 'prefill logits vs the CPU reference').toBeLessThanOrEqual(0.05);
      // the same experts on every row of every layer
      const k = t.config.moe!.topK;
      let rows = 0;
      for (let i = 0; i < t.layers.length; i++) {
        const c = pre.captures.get(`router_ids.${i}`)!;
        const ids = new Uint32Array(c.buffer, c.byteOffset, c.length);
        const want = fwd.acts!.get(`act.router_experts.${i}`)!;
        for (let r = 0; r < T; r++, rows++)
          expect([...ids.subarray(r * k, r * k + k)].sort(), `layer ${i} row ${r}`).toEqual(
            [...want.subarray(r * k, r * k + k)].sort(),
          );
      }
      const ref = referenceDraft(rt, ra, {
        bonusToken: pre.argmax![T - 1],
        seedHidden: fwd.finalHidden.slice((T - 1) * H, T * H),
        positionId: T,
        sharedKv: fwd.sharedKv,
        steps: 3,
        numerics: 'exact',
      });
      const draftErr = maxAbsDiff(gpu.logits!, ref.logits);
      expect(draftErr, 'draft logits vs the CPU reference').toBeLessThanOrEqual(0.05);
      expect(gpu.tokens).toEqual(ref.tokens);
      const classic = await generateClassic(target, prompt, { maxNew: 300 });
      const mtp = await generateMtp(target, assistantSource(asst), prompt, 4, { maxNew: 300 });
      expect(mtp.sha256).toBe(classic.sha256);
      expect(
        mtp.rounds!.some((r) => r.pos > 16 * 10 && r.accepted < 3),
        'a late rejection',
      ).toBe(true);
      console.log(
        `26b-a4b-tiny: prefill logits max abs ${logitErr.toExponential(2)} vs the reference, same experts on ${rows} rows; drafts ${gpu.tokens.join(',')} (reference ${ref.tokens.join(',')}, logits ${draftErr.toExponential(2)}); MTP == classic over 300 tokens, ${mtp.counters!.rounds} rounds, histogram ${mtp.counters!.acceptedHistogram.join('/')}`,
      );
    } finally {
      asst.destroy();
      target.destroy();
      aw.destroy();
      tw.destroy();
    }
  });

  it('the CLI writes 26b-a4b-tiny, generates from it (MTP == classic) and probes it', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-moesynth-'));
    const w = await cli('synth', '--preset', '26b-a4b-tiny', '--out', dir);
    const written = JSON.parse(w.stdout);
    expect(written.preset).toBe('26b-a4b-tiny');
    const config = JSON.parse(readFileSync(path.join(dir, 'target', 'config.json'), 'utf8'));
    expect(config.text_config).toMatchObject({
      enable_moe_block: true,
      num_experts: 8,
      top_k_experts: 4,
      moe_intermediate_size: 64,
    });
    expect(config.quantization['language_model.model.layers.5.router.proj']).toEqual({ group_size: 64, bits: 8 });
    const target = path.join(dir, 'target');
    const base = ['generate', '--target', target, '--tokens', '3,14,15,92,65,35,89,79,32,38', '--max-new', '40'];
    const out = (name: string) => path.join(dir, `${name}.json`);
    await cli(...base, '--mode', 'classic', '--json', out('classic'));
    await cli(...base, '--mode', 'mtp', '--draft', path.join(dir, 'assistant'), '--block', '4', '--json', out('mtp'));
    const [c, m] = ['classic', 'mtp'].map((n) => JSON.parse(readFileSync(out(n), 'utf8')));
    expect(m.sha256).toBe(c.sha256);
    expect(m.rounds.length).toBeGreaterThan(0);
    const bad = await cli(
      'probe',
      '--target',
      target,
      '--lengths',
      '8,48',
      '--block',
      '8',
      '--policy',
      'moe-grouped',
      '--report',
      out('probe'),
    ).catch((e) => e);
    expect(bad.code).toBe(3);
    expect(
      JSON.parse(readFileSync(out('probe'), 'utf8')).draws.find((d: { verdict: string }) => d.verdict === 'diverges')
        .firstDivergence.stage,
    ).toBe('experts');
  });
});
