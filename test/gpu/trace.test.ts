import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import { tinyWeights } from './tiny-model.ts';
import { runTrace, traceMetrics, type TraceEnv, type TracePosition } from '../../src/parity/trace.ts';
import { POLICIES } from '../../src/model/policy.ts';
import { checkpointInfo } from '../../src/parity/summary.ts';
import { tinyTarget } from '../support/fixtures.ts';
import type { GpuContext } from '../../src/gpu/device.ts';

describe('teacher-forced trace (chain vs block)', () => {
  let ctx: GpuContext;
  let env: TraceEnv;
  beforeAll(async () => {
    ctx = await testGpu();
    env = { ctx, weights: await tinyWeights(ctx), target: checkpointInfo(await tinyTarget()), platform: 'test' };
  });
  afterAll(() => ctx?.destroy());

  it('exact: every traced row byte-identical, zero disagreements', async () => {
    const r = await runTrace(env, { block: 4, prefix: 40, traced: 48, policy: 'exact', precision: 'f32' });
    expect(r.verdict).toBe('equal');
    expect(r.metrics.rowsByteEqual).toBe(48);
    expect(r.metrics.top1Disagreements).toBe(0);
    expect(r.metrics.deltaLogit.max).toBe(0);
    expect(r.metrics.perplexity.chain).toBe(r.metrics.perplexity.block);
    expect(r.positions[0].position).toBe(40);
  });

  it('metrics for each inexact policy (rows differ; numbers go in the closing note)', async () => {
    const lines: string[] = [];
    for (const p of POLICIES.filter((x) => x.name !== 'exact')) {
      const r = await runTrace(env, { block: 4, prefix: 40, traced: 48, policy: p.name, precision: 'f32' });
      expect(r.metrics.rowsByteEqual, p.name).toBeLessThan(48);
      const m = r.metrics;
      lines.push(`${p.name}: rows differing ${48 - m.rowsByteEqual}/48, top-1 disagreements ${m.top1Disagreements}, decided ${m.decidedDisagreements}/${m.decidedPositions}, |dlogit| p50 ${m.deltaLogit.p50.toExponential(2)} p99 ${m.deltaLogit.p99.toExponential(2)} max ${m.deltaLogit.max.toExponential(2)}, ppl ${m.perplexity.chain.toFixed(3)} vs ${m.perplexity.block.toFixed(3)}`);
    }
    console.log(lines.join('\n'));
  });

  it('buckets and decided positions follow the chain gap', () => {
    const mk = (gap: number, agree: boolean): TracePosition => ({ position: 0, next: 0, chainTop: [], blockTop: [], nllChain: 1, nllBlock: 1, gap, deltaChosen: gap / 10, agree, bytesDiffering: agree ? 0 : 4 });
    const m = traceMetrics([mk(0.1, false), mk(0.7, true), mk(1.5, false), mk(2.0, false), mk(7, true), mk(12, true)]);
    expect(m.buckets.map((b) => [b.positions, b.disagreements])).toEqual([[1, 1], [1, 0], [1, 1], [1, 1], [1, 0], [1, 0]]);
    expect(m.decidedPositions).toBe(3);
    expect(m.decidedDisagreements).toBe(1);
    expect(m.top1Disagreements).toBe(3);
    expect(m.perplexity.chain).toBeCloseTo(Math.E);
  });
});
