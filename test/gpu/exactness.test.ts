import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import { tinyModel, tinyWeights, tokens } from './tiny-model.ts';
import {
  expectBlocksEqualChain,
  expectCacheLayersEqual,
  prefilledPair,
  runRollbackSchedule,
  WRAP_SCHEDULE,
} from './helpers/exactness.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import type { GpuWeights } from '../../src/model/gpu-weights.ts';
import type { TargetDescription } from '../../src/format/model-description.ts';

/**
 * The numerics contract under policy `exact`: a verify block's logits rows are byte-identical to
 * one-token-at-a-time decode of the same tokens, for any block width and wherever the ring stands.
 * The tiny-a window is 16: prompts of 5 (< W), 16 (= W) and 40 (wrapped twice) tokens.
 */
const V = 1024;

describe('exact policy: block rows == chain rows, byte for byte', () => {
  let ctx: GpuContext;
  let weights: GpuWeights<TargetDescription>;
  beforeAll(async () => {
    ctx = await testGpu();
    weights = await tinyWeights(ctx);
  });
  afterAll(() => ctx?.destroy());

  for (const precision of ['f32', 'bf16'] as const) {
    for (const P of [5, 16, 40]) {
      it(`${precision}, prompt ${P}: K = 2, 3, 4, 8`, async () => {
        const model = tinyModel(ctx, weights, precision);
        await model.prefill(tokens(P, P), { logits: 'none' });
        await expectBlocksEqualChain(model, tokens, V, `${precision} P=${P}`);
        model.destroy();
      });
    }
  }

  it('after partial acceptance + rollback the caches equal a chain-only run (contents and slot order)', async () => {
    for (const precision of ['f32', 'bf16'] as const) {
      // Blocks of width K accepting 0..K rows, until the ring has wrapped several times.
      const [model, chainModel] = await prefilledPair(() => tinyModel(ctx, weights, precision), tokens(13, 7));
      // The chain model decodes only what was accepted; its rows must equal the verify rows.
      await runRollbackSchedule(model, chainModel, WRAP_SCHEDULE, tokens, V, precision);
      expect(model.cache.state).toEqual(chainModel.cache.state);
      expect(model.cache.state.nextPos).toBeGreaterThan(3 * model.cache.window);
      // Sliding rings are compared whole; full caches up to nextPos (rows past it are dead).
      await expectCacheLayersEqual(ctx, model, chainModel, precision);
      model.destroy();
      chainModel.destroy();
    }
  });

  it('chunked prefill leaves the same ring layout as whole prefill (positions in mlxcel slots)', async () => {
    const whole = tinyModel(ctx, weights, 'f32');
    const chunked = tinyModel(ctx, weights, 'f32', { prefillChunk: 7 });
    const prompt = tokens(40, 3);
    await whole.prefill(prompt, { logits: 'none' });
    await chunked.prefill(prompt, { logits: 'none' });
    expect(whole.cache.state).toEqual({ nextPos: 40, base: 40 });
    expect(chunked.cache.state).toEqual(whole.cache.state);
    // Decoding continues identically in slot order (values may differ in the last bits: chunking is
    // a different reduction, which is what the prefill-chunk-mismatch policy demonstrates).
    expect(whole.cache.slotOf(40)).toBe(0);
    expect(whole.cache.slotOf(39)).toBe(15);
    whole.destroy();
    chunked.destroy();
  });
});
