/**
 * The bench's end to end on every family's engine (src/bench/e2e.ts with src/bench/e2e-model.ts): the tiny presets
 * of the E-series, the MoE and Qwen3.5 run once each through generation-setup's engine and return finite, positive
 * times and whole dispatch and submit counts of the expected shape. No timing assertions (times belong to `npm run
 * bench`). The RecorderTally, which counts for engines without TargetStats, is checked against TargetStats.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import { benchEndToEnd, type E2EResult } from '../../src/bench/e2e.ts';
import { buildE2EModel, type E2EPreset } from '../../src/bench/e2e-model.ts';
import { type RecorderTally, setRecorderTally } from '../../src/gpu/recorder.ts';
import { generationModels } from '../../src/model/generation-setup.ts';
import { TargetModel } from '../../src/model/gemma4/dense/dense-target.ts';
import { formatBench, type BenchReport } from '../../src/bench/run.ts';

const finitePositive = (v: number | undefined) => typeof v === 'number' && Number.isFinite(v) && v > 0;
const whole = (v: number) => Number.isInteger(v) && v > 0;

describe('bench end to end on the family presets', () => {
  let ctx: GpuContext;
  beforeAll(async () => {
    ctx = await testGpu();
  });
  afterAll(() => ctx?.destroy());

  const run = (preset: E2EPreset, layers: number) =>
    benchEndToEnd(ctx, { preset, layers, promptTokens: 5, chainTokens: 2, blocks: 1, block: 3, probe: false });

  function checkShape(e: E2EResult, layers: number) {
    for (const v of [e.prefill.tokensPerSecond, e.chain.msPerToken, e.chain.minMs, e.verify.msPerBlock, e.blockVsChain])
      expect(finitePositive(v), String(v)).toBe(true);
    // every chain token records the same program: whole counts per token, at least one dispatch per layer, a
    // submit for the step and one for the commit
    expect(whole(e.chain.dispatchesPerToken)).toBe(true);
    expect(e.chain.dispatchesPerToken).toBeGreaterThanOrEqual(layers);
    expect(e.chain.submitsPerToken).toBeGreaterThanOrEqual(2);
    expect(whole(e.chain.submitsPerToken)).toBe(true);
    // a verify block runs the same layers over K rows (plus its own head and commit)
    expect(whole(e.verify.dispatchesPerBlock)).toBe(true);
    expect(e.verify.dispatchesPerBlock).toBeGreaterThanOrEqual(layers);
    expect(e.verify.submitsPerBlock).toBeGreaterThanOrEqual(2);
    expect(e.prefill.dispatches).toBeGreaterThanOrEqual(layers);
    expect(e.layerTypes.length).toBe(layers);
    expect(Number.isFinite(e.chain.breakdown.bindGroupsPerToken)).toBe(true);
    expect(e.chain.breakdown.submitMs >= 0 && Number.isFinite(e.chain.breakdown.submitMs)).toBe(true);
    // no dense-Gemma traffic model for these families
    expect(e.chain.bytesPerToken).toBeUndefined();
  }

  it('E-series (e2b-tiny, 10 layers: 6 owners, 4 KV-shared) runs in ETargetModel with its own counters', async () => {
    const e = await run('e2b-tiny', 10);
    expect([e.family, e.engine, e.preset]).toEqual(['gemma4', 'ETargetModel', 'e2b-tiny']);
    checkShape(e, 10);
    expect(e.chain.breakdown.bindGroupsPerToken).toBe(0); // cached after the first token
    for (const v of [e.chain.breakdown.encodeMs, e.chain.breakdown.waitMs]) expect(v! >= 0).toBe(true);
    expect(e.chain.breakdown.phasesNote).toBeUndefined();
  });

  it('MoE (26b-a4b-tiny) runs in MoETargetModel; its dispatches per token grow by a sliding layer per layer', async () => {
    const [one, two, three] = [
      await run('26b-a4b-tiny', 1),
      await run('26b-a4b-tiny', 2),
      await run('26b-a4b-tiny', 3),
    ];
    for (const [e, n] of [
      [one, 1],
      [two, 2],
      [three, 3],
    ] as const) {
      expect(e.engine).toBe('MoETargetModel');
      checkShape(e, n);
      expect(e.chain.breakdown.bindGroupsPerToken).toBe(0);
    }
    // layer types: [full], [sliding, full], [sliding, sliding, full]: the step is affine in the sliding layers
    expect(three.layerTypes).toEqual(['sliding', 'sliding', 'full']);
    const perSliding = two.chain.dispatchesPerToken - one.chain.dispatchesPerToken;
    expect(perSliding).toBeGreaterThan(0);
    expect(three.chain.dispatchesPerToken - two.chain.dispatchesPerToken).toBe(perSliding);
    expect(three.verify.dispatchesPerBlock - two.verify.dispatchesPerBlock).toBe(
      two.verify.dispatchesPerBlock - one.verify.dispatchesPerBlock,
    );
  });

  it('Qwen3.5 (qwen-tiny, 3 layers: 2 linear + 1 full) runs in QwenTargetModel', async () => {
    const e = await run('qwen-tiny', 3);
    expect([e.family, e.engine]).toEqual(['qwen3_5', 'QwenTargetModel']);
    expect(e.layerTypes).toEqual(['linear', 'linear', 'full']);
    checkShape(e, 3);
    const six = await run('qwen-tiny', 6);
    checkShape(six, 6);
    expect(six.chain.dispatchesPerToken).toBeGreaterThan(e.chain.dispatchesPerToken);
    // the text form names the model and the engine, and gives tokens/s in place of the traffic model
    const text = formatBench({
      ...({} as BenchReport),
      version: 1,
      adapter: { description: 'test', vendor: '', architecture: '', device: '', features: [], platform: 'node' },
      timing: 'wall-clock',
      engineKernel: 'lanes',
      prefillKernel: 'tile',
      yardsticks: [],
      kernels: [],
      e2e: e,
      summary: {
        copyGBps: 1,
        fmaF32Gflops: 1,
        msPerChainToken: e.chain.msPerToken,
        chainTokensPerSecond: 1000 / e.chain.msPerToken,
      },
      notes: [],
      seconds: 1,
    } as BenchReport);
    expect(text).toContain('synthetic qwen3_5 qwen-tiny geometry, 3 layers');
    expect(text).toContain('engine QwenTargetModel');
    expect(text).toMatch(/[0-9.]+ chain tokens\/s, verify block \/ chain token [0-9.]+ x/);
    expect(text).not.toContain('chain decode reads');
  });

  it("the RecorderTally counts what a TargetCore engine's own TargetStats count", async () => {
    const m = await buildE2EModel(ctx, 'tiny', 7);
    const tally: RecorderTally = { dispatches: 0, submits: 0, submitMs: 0 };
    const g = generationModels(ctx, m.weights, {
      promptLength: 4,
      maxNew: 8,
      block: 4,
      policy: 'exact',
      precision: 'f32',
    });
    try {
      const t = g.target as TargetModel;
      expect(t).toBeInstanceOf(TargetModel);
      await t.prefill([1, 2, 3, 4], { logits: 'last' });
      const s0 = { ...t.stats };
      setRecorderTally(tally);
      try {
        await t.decode(5); // 7 layers: one submit inside the forward (every 6 layers), the rest, the commit
        await t.step([6, 7, 8]);
        t.commit(2);
      } finally {
        setRecorderTally(undefined);
      }
      expect(tally.dispatches).toBe(t.stats.dispatches - s0.dispatches);
      expect(tally.submits).toBe(t.stats.submits - s0.submits);
      expect(tally.submits).toBeGreaterThanOrEqual(5);
    } finally {
      g.destroy();
      m.destroy();
    }
  });
});
