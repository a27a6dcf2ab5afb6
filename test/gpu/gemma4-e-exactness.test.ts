/**
 * The exactness contract of the E-series GPU target (src/model/gemma4/e-series/e-target.ts) under policy `exact`, as
 * test/gpu/exactness.test.ts checks it for the dense engine: a verify block's logits rows are byte-identical to
 * one-token-at-a-time decode of the same tokens, for K = 2, 3, 4, 8, wherever the ring stands (gemma4-e-tiny's
 * window is 16: prompts of 5, 16 and 40 tokens), f32 and bf16; and after partial acceptance and rollback every
 * cache owner's K/V equals a chain-only run's (the KV-shared layers have none: they read their donors').
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GpuContext } from '../../src/gpu/device.ts';
import type { TargetDescription } from '../../src/format/model-description.ts';
import { ETargetModel } from '../../src/model/gemma4/e-series/e-target.ts';
import { uploadWeights, type GpuWeights } from '../../src/model/gpu-weights.ts';
import type { Precision } from '../../src/model/target.ts';
import { openCheckpointDir } from '../../src/node/file-source.ts';
import { GEMMA4_E_TINY } from '../support/fixtures.ts';
import { testGpu } from './gpu-context.ts';
import {
  chainRows,
  expectBlocksEqualChain,
  expectCacheLayersEqual,
  prefilledPair,
  runRollbackSchedule,
  WRAP_SCHEDULE,
} from './helpers/exactness.ts';
import { bytesEqual, rowBytes, tokens } from './tiny-model.ts';

const V = 512;
const ids = (n: number, seed: number) => tokens(n, seed, V);

function eModel(ctx: GpuContext, w: GpuWeights<TargetDescription>, precision: Precision, prefillChunk = 64) {
  return new ETargetModel(ctx, w, { maxContext: 160, maxBlock: 8, prefillChunk, precision });
}

describe('E-series exact policy: block rows == chain rows, byte for byte (gemma4-e-tiny)', () => {
  let ctx: GpuContext;
  let weights: GpuWeights<TargetDescription>;
  beforeAll(async () => {
    ctx = await testGpu();
    const ck = await openCheckpointDir(path.join(GEMMA4_E_TINY, 'target'));
    weights = await uploadWeights(ctx.device, ck.description as TargetDescription);
  });
  afterAll(() => {
    weights?.destroy();
    ctx?.destroy();
  });

  for (const precision of ['f32', 'bf16'] as const) {
    for (const P of [5, 16, 40]) {
      it(`${precision}, prompt ${P}: K = 2, 3, 4, 8`, async () => {
        const model = eModel(ctx, weights, precision);
        await model.prefill(ids(P, P), { logits: 'none' });
        await expectBlocksEqualChain(model, ids, V, `${precision} P=${P}`);
        model.destroy();
      });
    }
  }

  it('after partial acceptance + rollback: verify rows equal the chain and every owner cache equals a chain-only run', async () => {
    for (const precision of ['f32', 'bf16'] as const) {
      // Blocks of width K accepting 0..K rows, until the ring has wrapped several times.
      const [model, chainModel] = await prefilledPair(() => eModel(ctx, weights, precision), ids(13, 7));
      await runRollbackSchedule(model, chainModel, WRAP_SCHEDULE, ids, V, precision);
      expect(model.cache.state).toEqual(chainModel.cache.state);
      expect(model.cache.state.nextPos).toBeGreaterThan(3 * model.cache.window);
      expect(model.cache.layers.length).toBe(6); // layers 0..5 own caches; 6..9 read layers 5 and 4
      await expectCacheLayersEqual(ctx, model, chainModel, precision);
      // Both continue identically: the next verify block equals the chain model's steps.
      const block = ids(4, 99);
      const verify = (await model.step(block)).logits!;
      const chain = await chainRows(chainModel, block);
      for (let j = 0; j < 4; j++)
        expect(
          bytesEqual(rowBytes(chain[j], 0, V), rowBytes(verify, j, V)),
          `${precision} after rollbacks row ${j}`,
        ).toBe(true);
      model.destroy();
      chainModel.destroy();
    }
  });
});
