/**
 * runProbe on the MoE GPU target (gemma4-moe-tiny): `exact` passes past the window (block rows equal the chain byte for
 * byte), and `moe-grouped` (verify blocks reduce each expert matvec in as many K ranges as the block has rows on that
 * expert) diverges and is localized to a layer's `experts` stage: every stage before it (q, k, v, attention, the dense
 * MLP and the router scores) is byte-equal there, so the blame is the grouping alone. The MoE stage list puts router
 * and experts between the MLP and the layer output.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TargetDescription } from '../../src/format/model-description.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import { uploadWeights } from '../../src/model/gpu-weights.ts';
import { openCheckpointDir } from '../../src/node/file-source.ts';
import { runProbe, type ProbeEnv } from '../../src/parity/probe.ts';
import { validateReport } from '../../src/parity/report.ts';
import { checkpointInfo } from '../../src/parity/summary.ts';
import { GEMMA4_MOE_TINY } from '../support/fixtures.ts';
import { testGpu } from './gpu-context.ts';

describe('runProbe on gemma4-moe-tiny (MoETargetModel)', () => {
  let ctx: GpuContext;
  let env: ProbeEnv;
  beforeAll(async () => {
    ctx = await testGpu();
    const ck = await openCheckpointDir(path.join(GEMMA4_MOE_TINY, 'target'));
    env = {
      ctx,
      weights: await uploadWeights(ctx.device, ck.description as TargetDescription),
      target: checkpointInfo(ck),
      platform: 'test',
    };
  });
  afterAll(() => {
    env?.weights.destroy();
    ctx?.destroy();
  });

  for (const precision of ['f32', 'bf16'] as const) {
    it(`exact passes at K = 4 past the window (${precision})`, async () => {
      const r = await runProbe(env, { block: 4, policy: 'exact', precision, localize: true });
      expect(validateReport(r)).toEqual([]);
      expect(r.verdict).toBe('equal');
      expect(r.draws.at(-1)!.promptLength).toBeGreaterThan(16);
      expect(r.draws.at(-1)!.ring?.window).toBe(16);
    });
  }

  it('moe-grouped diverges and the first divergence is an experts stage, with everything before it equal', async () => {
    const r = await runProbe(env, { block: 8, policy: 'moe-grouped', precision: 'f32', localize: true });
    expect(validateReport(r)).toEqual([]);
    expect(r.verdict).toBe('diverges');
    expect(r.provenance.policy).toBe('moe-grouped');
    const d = r.draws.find((x) => x.verdict === 'diverges')!;
    expect(d.firstDivergence?.stage).toBe('experts');
    expect(d.firstDivergence?.text).toMatch(
      /first divergence: layer \d+ \((sliding|full)\) experts output \(weighted sum, before post_feedforward_layernorm_2\) at position \d+/,
    );
    const L = d.firstDivergence!.layer!;
    const layerStages = d.stages!.filter((s) => s.layer === L).map((s) => s.stage);
    expect(layerStages).toEqual(['q', 'k', 'v', 'attn', 'mlp', 'router', 'experts', 'layer']);
    // every stage before it, in every layer up to it, equal in every row
    const at = d.stages!.findIndex((s) => s.layer === L && s.stage === 'experts');
    for (const s of d.stages!.slice(0, at))
      expect(
        s.rows.every((x) => x.bytesDiffering === 0),
        `${s.layer} ${s.stage}`,
      ).toBe(true);
    console.log(`moe-grouped: ${r.summary}`);
  });

  it('moe-grouped is refused for a target without experts', async () => {
    const dense = await openCheckpointDir(path.resolve(process.cwd(), 'test/fixtures/gemma4-e-tiny/target'));
    const w = await uploadWeights(ctx.device, dense.description as TargetDescription);
    await expect(
      runProbe(
        { ...env, weights: w, target: checkpointInfo(dense) },
        { block: 4, policy: 'moe-grouped', precision: 'f32', localize: false },
      ),
    ).rejects.toThrow(/policy moe-grouped applies to Gemma 4 mixture-of-experts targets only/);
    w.destroy();
  });
});
