/**
 * The teacher-forced trace (src/parity/trace.ts runTrace): chain and block arms over the same token stream,
 * per position top-k, gap, agreement, nll and bytes differing. Checked against a second computation: the
 * CPU float64 reference's logits for the same stream (src/reference referenceForward), with the f32
 * yardstick of the fixtures (how far transformers' own float32 run lands from float64 on this model) as the
 * distance an f32 arm may be from it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import { tinyWeights } from './tiny-model.ts';
import {
  DECIDED_GAP,
  defaultStream,
  runTrace,
  traceMetrics,
  type TraceEnv,
  type TracePosition,
  type TraceReport,
} from '../../src/parity/trace.ts';
import { policiesFor } from '../../src/model/policy-registry.ts';
import { checkpointInfo } from '../../src/parity/summary.ts';
import { TINY_A_F64, loadGolden, loadTransformersF32, maxAbsDiff, tinyTarget } from '../support/fixtures.ts';
import { loadReferenceWeights, referenceForward, type TargetWeights } from '../../src/reference/index.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import { validateReport } from '../../src/parity/report.ts';

/** A report as its JSON file gives it back. */
const asFile = (r: unknown): unknown => JSON.parse(JSON.stringify(r));
import { wgslFuzzSpec } from '../../src/gpu/wgsl-fuzz/config.ts';

const PREFIX = 40;
const TRACED = 48;
const BLOCK = 4;

describe('teacher-forced trace (chain vs block)', () => {
  let ctx: GpuContext;
  let env: TraceEnv;
  let V: number;
  let refLogits: Float64Array;
  /**
   * How far an f32 arm's logits may be from the float64 reference: the largest distance of transformers'
   * f32 logits from the float64 goldens over the fixture's 64 positions (logits_full: prompt + greedy).
   */
  let yard: number;
  let exact: TraceReport;
  beforeAll(async () => {
    ctx = await testGpu();
    const ck = await tinyTarget();
    env = { ctx, weights: await tinyWeights(ctx), target: checkpointInfo(ck), platform: 'test' };
    V = env.weights.desc.vocab;
    // runTrace's default stream; the reference runs it as one forward: row t is the logits after token t
    const stream = defaultStream(PREFIX + TRACED + 1, V);
    refLogits = referenceForward(
      (await loadReferenceWeights(ck.description)) as TargetWeights,
      stream.slice(0, PREFIX + TRACED),
      { numerics: 'exact' },
    ).logits;
    const g64 = await loadGolden(TINY_A_F64);
    const tf32 = await loadTransformersF32();
    yard = maxAbsDiff((await tf32.tensor('logits_full')).data, (await g64.tensor('logits_full')).data);
    exact = await runTrace(env, { block: BLOCK, prefix: PREFIX, traced: TRACED, policy: 'exact', precision: 'f32' });
  });
  afterAll(() => ctx?.destroy());

  const refRow = (position: number) => refLogits.subarray(position * V, (position + 1) * V);
  const top2 = (row: ArrayLike<number>) => {
    let a = 0,
      b = -1;
    for (let i = 1; i < row.length; i++) {
      if (row[i] > row[a]) [a, b] = [i, a];
      else if (b < 0 || row[i] > row[b]) b = i;
    }
    return { id: a, gap: row[a] - row[b] };
  };
  const nll = (row: ArrayLike<number>, target: number) => {
    let mx = -Infinity;
    for (let i = 0; i < row.length; i++) mx = Math.max(mx, row[i]);
    let sum = 0;
    for (let i = 0; i < row.length; i++) sum += Math.exp(row[i] - mx);
    return Math.log(sum) + mx - row[target];
  };

  /**
   * One arm's top-k against the float64 reference at every position: each listed logit within `yard` of the
   * reference's; the top-1 the reference's wherever the reference's gap exceeds 2 yard (no logit can move
   * by more than yard); the chain's gap within 2 yard of the reference's, so the decided positions (gap >=
   * DECIDED_GAP) are the reference's except within 2 yard of the threshold; nll within 2 yard.
   */
  function expectNearReference(r: TraceReport, arm: 'chain' | 'block'): void {
    r.positions.forEach((p, i) => {
      const at = `${r.provenance.policy} ${arm} position ${p.position}`;
      expect(p.position, at).toBe(PREFIX + i);
      const ref = refRow(p.position);
      const want = top2(ref);
      const top = arm === 'chain' ? p.chainTop : p.blockTop;
      for (const t of top) expect(Math.abs(t.logit - ref[t.id]), `${at}, token ${t.id}`).toBeLessThanOrEqual(yard);
      if (want.gap > 2 * yard) expect(top[0].id, at).toBe(want.id);
      expect(Math.abs((arm === 'chain' ? p.nllChain : p.nllBlock) - nll(ref, p.next)), `${at} nll`).toBeLessThanOrEqual(
        2 * yard,
      );
      if (arm === 'chain') {
        expect(Math.abs(p.gap - want.gap), `${at} gap`).toBeLessThanOrEqual(2 * yard);
        if (Math.abs(want.gap - DECIDED_GAP) > 2 * yard)
          expect(p.gap >= DECIDED_GAP, `${at} decided`).toBe(want.gap >= DECIDED_GAP);
      }
    });
  }

  it("exact: every traced row byte-identical, the two arms' top-k identical, both as the float64 reference ranks them", () => {
    const r = exact;
    expect(r.verdict).toBe('equal');
    expect(validateReport(asFile(r))).toEqual([]);
    expect(r.metrics.rowsByteEqual).toBe(TRACED);
    expect(r.metrics.top1Disagreements).toBe(0);
    expect(r.metrics.deltaLogit.max).toBe(0);
    expect(r.metrics.perplexity.chain).toBe(r.metrics.perplexity.block);
    for (const p of r.positions) {
      expect(p.blockTop, `position ${p.position}`).toEqual(p.chainTop);
      expect([p.agree, p.bytesDiffering, p.nllBlock], `position ${p.position}`).toEqual([true, 0, p.nllChain]);
    }
    // Under the compiler fuzzer (scripts/test.sh's fuzz pass) the engine is compiled as a relaxed-math compiler may
    // compile it, compensation terms dropped included: the rows must still be exact, not as close to the reference.
    const fuzz = wgslFuzzSpec();
    if (!fuzz) expectNearReference(r, 'chain');
    expect(r.provenance.wgslFuzz).toEqual(fuzz ? { ...fuzz, sites: expect.any(Number) } : undefined);
    const decided = r.positions.filter((p) => p.gap >= DECIDED_GAP).length;
    expect(r.metrics.decidedPositions).toBe(decided);
    console.log(`exact trace: ${decided} of ${TRACED} positions decided; f32 yardstick ${yard.toExponential(2)}`);
  });

  it("each inexact policy: block rows differ, by rounding only (within the f32 yardstick of the reference); the chain arm is exact's where its prefill is", async () => {
    const lines: string[] = [];
    // The MLX policies change both arms (the chain runs MLX's one-row kernel): tested below.
    for (const p of policiesFor('gemma4').filter((x) => x.name !== 'exact' && !x.mlx)) {
      const r = await runTrace(env, { block: BLOCK, prefix: PREFIX, traced: TRACED, policy: p.name, precision: 'f32' });
      const m = r.metrics;
      expect(r.verdict, p.name).toBe('diverges');
      // a real diverging trace agrees with itself: its counters, buckets and verdict are its positions'
      expect(validateReport(asFile(r)), p.name).toEqual([]);
      expect(m.rowsByteEqual, p.name).toBeLessThan(TRACED);
      // The chain arm (M = 1) runs the exact kernels (src/model/policy.ts); from the same prefill it is exact's,
      // row for row. prefill-chunk-mismatch prefills its chain arm differently (whole prompt, split-K GEMM).
      if (!p.prefillChunks)
        r.positions.forEach((q, i) =>
          expect(q.chainTop, `${p.name} chain position ${q.position}`).toEqual(exact.positions[i].chainTop),
        );
      expectNearReference(r, 'chain');
      expectNearReference(r, 'block');
      // Both arms within yard of the reference: the chosen token's logits within 2 yard of each other, and
      // no disagreement where the chain's gap exceeds 4 yard (every decided position: DECIDED_GAP >> yard).
      expect(m.deltaLogit.max, p.name).toBeLessThanOrEqual(2 * yard);
      for (const q of r.positions) {
        expect(q.agree, `${p.name} position ${q.position}`).toBe(q.blockTop[0].id === q.chainTop[0].id);
        if (q.gap > 4 * yard) expect(q.agree, `${p.name} position ${q.position} (gap ${q.gap})`).toBe(true);
      }
      expect(m.decidedDisagreements, p.name).toBe(0);
      lines.push(
        `${p.name}: rows differing ${TRACED - m.rowsByteEqual}/${TRACED}, top-1 disagreements ${m.top1Disagreements}, decided ${m.decidedDisagreements}/${m.decidedPositions}, |dlogit| p50 ${m.deltaLogit.p50.toExponential(2)} p99 ${m.deltaLogit.p99.toExponential(2)} max ${m.deltaLogit.max.toExponential(2)}, ppl ${m.perplexity.chain.toFixed(3)} vs ${m.perplexity.block.toFixed(3)}`,
      );
    }
    console.log(lines.join('\n'));
  });

  // One policy per kind of prediction (one kernel for every M; qmv_wide from M = 2; the narrow pin; a fused
  // qmv_wide chip): the other chip classes differ from these only in their batch limits, which this block
  // stays under, and test/gpu/mlx-policies.test.ts probes each of them.
  it('the MLX policies: mlx-m3plus and mlx-m5+fma diverge (qmv vs qmv_wide); mlx-m1 and the narrow pin keep parity', async () => {
    const verdicts: Record<string, string> = {};
    for (const name of ['mlx-m1', 'mlx-m3plus', 'mlx-m3plus-narrow', 'mlx-m5+fma']) {
      const r = await runTrace(env, { block: BLOCK, prefix: PREFIX, traced: TRACED, policy: name, precision: 'f32' });
      verdicts[name] = r.verdict;
      expect(validateReport(asFile(r)), name).toEqual([]);
      // Both arms run MLX's own kernels, within the f32 yardstick of the reference.
      expectNearReference(r, 'chain');
      expectNearReference(r, 'block');
    }
    expect(verdicts).toEqual({
      'mlx-m1': 'equal',
      'mlx-m3plus': 'diverges',
      'mlx-m3plus-narrow': 'equal',
      'mlx-m5+fma': 'diverges',
    });
  });

  it('buckets and decided positions follow the chain gap', () => {
    const mk = (gap: number, agree: boolean): TracePosition => ({
      position: 0,
      next: 0,
      chainTop: [],
      blockTop: [],
      nllChain: 1,
      nllBlock: 1,
      gap,
      deltaChosen: gap / 10,
      agree,
      bytesDiffering: agree ? 0 : 4,
    });
    const m = traceMetrics([mk(0.1, false), mk(0.7, true), mk(1.5, false), mk(2.0, false), mk(7, true), mk(12, true)]);
    expect(m.buckets.map((b) => [b.positions, b.disagreements])).toEqual([
      [1, 1],
      [1, 0],
      [1, 1],
      [1, 1],
      [1, 0],
      [1, 0],
    ]);
    expect(m.decidedPositions).toBe(3);
    expect(m.decidedDisagreements).toBe(1);
    expect(m.top1Disagreements).toBe(3);
    expect(m.perplexity.chain).toBeCloseTo(Math.E);
  });
});
