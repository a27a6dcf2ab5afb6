import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import { qwenTinyEnv } from './helpers/qwen-tiny.ts';
import { runProbe, type ProbeEnv } from '../../src/parity/probe.ts';
import { validateReport } from '../../src/parity/report.ts';
import type { GpuContext } from '../../src/gpu/device.ts';

/**
 * The block-versus-chain probe on qwen-tiny through the probe's model contract, with localization over the
 * model's own stage list (Gated DeltaNet layers: projections, conv, recurrence, gated norm, output) and the
 * logit lens; no ring view (the family has no sliding ring). Default draws 8, 8, 8, 96: the long one reads two key
 * segments in the full-attention layers and passes the conv window many times.
 */
describe('block-versus-chain probe on a Qwen3.5 target (qwen-tiny)', () => {
  let ctx: GpuContext;
  let env: ProbeEnv;
  beforeAll(async () => {
    ctx = await testGpu();
    env = await qwenTinyEnv(ctx);
  });
  afterAll(() => {
    env?.weights.destroy();
    ctx?.destroy();
  });

  for (const precision of ['f32', 'bf16'] as const) {
    it(`exact passes every draw for K = 2, 3, 4, 8 in ${precision}`, async () => {
      for (const K of [2, 3, 4, 8]) {
        const r = await runProbe(env, { block: K, policy: 'exact', precision, localize: true });
        expect(validateReport(r)).toEqual([]);
        expect(r.provenance.drawLengths).toEqual([8, 8, 8, 96]);
        expect(r.verdict, `K=${K}`).toBe('equal');
      }
    });
  }

  // Where each policy's mechanism first shows: the state rounding in layer 0's recurrence from block row 1 (row 0
  // starts from the same stored state), the M-split matmuls in layer 0's projections, the attention plan in the
  // first full layer (2), a prefill chunk mismatch in layer 0's conv (its window holds different prompt rows).
  const FIRST: Record<string, { layer: number; kind: 'linear' | 'full'; stage: string; position: number }> = {
    'matmul-m-split': { layer: 0, kind: 'linear', stage: 'proj', position: 0 },
    'attention-m-split': { layer: 2, kind: 'full', stage: 'attn', position: 0 },
    'prefill-chunk-mismatch': { layer: 0, kind: 'linear', stage: 'conv', position: 0 },
    'gdn-state-bf16': { layer: 0, kind: 'linear', stage: 'recurrence', position: 1 },
  };
  for (const [policy, want] of Object.entries(FIRST)) {
    it(`${policy} diverges on every draw, first at layer ${want.layer} ${want.stage}`, async () => {
      const r = await runProbe(env, { block: 4, policy, precision: 'f32', localize: true });
      expect(validateReport(r)).toEqual([]);
      expect(r.draws.map((d) => d.verdict)).toEqual(['diverges', 'diverges', 'diverges', 'diverges']);
      for (const d of r.draws) {
        const fd = d.firstDivergence!;
        expect(fd, `draw ${d.index}`).not.toBeNull();
        expect([fd.layer, fd.layerKind, fd.stage, fd.position]).toEqual([
          want.layer,
          want.kind,
          want.stage,
          want.position,
        ]);
        expect(d.ring).toBeUndefined();
        // every layer's stages in execution order, then the final norm and logits; a lens row per layer
        const layers = d.stages!.filter((s) => s.layer !== null);
        expect(
          layers
            .filter((s) => s.layerKind === 'linear')
            .map((s) => s.stage)
            .slice(0, 7),
        ).toEqual(['proj', 'conv', 'recurrence', 'gated_norm', 'out', 'mlp', 'layer']);
        expect(layers.filter((s) => s.layer === 2).map((s) => s.stage)).toEqual([
          'q',
          'k',
          'v',
          'attn',
          'mlp',
          'layer',
        ]);
        expect(d.stages!.length).toBe(4 * 7 + 2 * 6 + 2);
        expect(d.lens!.length).toBe(6);
      }
      expect(r.draws[0].firstDivergence!.text).toMatch(
        new RegExp(`^first divergence: layer ${want.layer} \\(${want.kind}\\) `),
      );
    });
  }

  it('gdn-state-bf16 is blamed on the recurrence in words', async () => {
    const r = await runProbe(env, {
      block: 4,
      policy: 'gdn-state-bf16',
      precision: 'f32',
      localize: true,
      lengths: [8],
    });
    expect(r.draws[0].firstDivergence!.text).toBe(
      'first divergence: layer 0 (linear) recurrence (o = S q) at position 1',
    );
    // the stages before the recurrence are equal in every row, the recurrence differs from row 1 on
    const s = r.draws[0].stages!;
    expect(s.slice(0, 2).every((x) => x.rows.every((row) => row.bytesDiffering === 0))).toBe(true);
    expect(s[2].rows.map((row) => row.bytesDiffering > 0)).toEqual([false, true, true, true]);
  });

  it('refuses a policy whose mechanism the family lacks (the sliding ring)', async () => {
    await expect(
      runProbe(env, { block: 4, policy: 'ring-chronological', precision: 'f32', localize: true }),
    ).rejects.toThrow(/^policy ring-chronological applies to Gemma 4 targets only; Qwen3.5 targets take exact, /);
  });
});
