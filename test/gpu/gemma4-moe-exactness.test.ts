/**
 * The exactness contract of the MoE GPU target (src/model/gemma4/moe/moe-target.ts) under policy `exact`, as
 * test/gpu/exactness.test.ts checks it for the dense engine: a verify block's logits rows are byte-identical to
 * one-token-at-a-time decode of the same tokens, for K = 2, 3, 4, 8, wherever the ring stands (gemma4-moe-tiny's
 * window is 16: prompts of 5, 16 and 40 tokens), f32 and bf16, with both router conventions; after partial
 * acceptance and rollback every layer's K/V equals a chain-only run's. The experts run per (row, slot): in a block of
 * 8 rows at top-4 of 8 experts, rows share experts, and nothing of that may reach a row's arithmetic.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TargetDescription } from '../../src/format/model-description.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import { MoETargetModel, type MoeTargetOptions } from '../../src/model/gemma4/moe/moe-target.ts';
import { uploadWeights, type GpuWeights } from '../../src/model/gpu-weights.ts';
import type { Precision } from '../../src/model/target.ts';
import { openCheckpointDir } from '../../src/node/file-source.ts';
import { GEMMA4_MOE_TINY } from '../support/fixtures.ts';
import { testGpu } from './gpu-context.ts';
import {
  expectBlocksEqualChain,
  expectCacheLayersEqual,
  prefilledPair,
  runRollbackSchedule,
} from './helpers/exactness.ts';
import { tokens } from './tiny-model.ts';

const V = 512;
const ids = (n: number, seed: number) => tokens(n, seed, V);

function moeModel(
  ctx: GpuContext,
  w: GpuWeights<TargetDescription>,
  precision: Precision,
  router: MoeTargetOptions['router'] = 'mlx',
) {
  return new MoETargetModel(ctx, w, { maxContext: 160, maxBlock: 8, prefillChunk: 64, precision, router });
}

describe('MoE exact policy: block rows == chain rows, byte for byte (gemma4-moe-tiny)', () => {
  let ctx: GpuContext;
  let weights: GpuWeights<TargetDescription>;
  beforeAll(async () => {
    ctx = await testGpu();
    const ck = await openCheckpointDir(path.join(GEMMA4_MOE_TINY, 'target'));
    weights = await uploadWeights(ctx.device, ck.description as TargetDescription);
  });
  afterAll(() => {
    weights?.destroy();
    ctx?.destroy();
  });

  for (const precision of ['f32', 'bf16'] as const) {
    for (const router of ['mlx', 'transformers'] as const) {
      it(`${precision}, ${router} router, prompts 5 / 16 / 40: K = 2, 3, 4, 8`, async () => {
        const model = moeModel(ctx, weights, precision, router);
        let shared = 0;
        for (const P of [5, 16, 40]) {
          model.reset();
          await model.prefill(ids(P, P), { logits: 'none' });
          await expectBlocksEqualChain(model, ids, V, `${precision} ${router} P=${P}`, {
            stepOptions: { captures: new Set(['router_ids.0']) },
            onVerify: (r) => {
              // rows of the block that share an expert in layer 0 (the case grouping kernels would merge)
              const c = r.captures.get('router_ids.0')!;
              const used = new Uint32Array(c.buffer, c.byteOffset, c.length);
              shared += used.length - new Set(used).size;
            },
          });
        }
        expect(shared).toBeGreaterThan(0);
        model.destroy();
      });
    }
  }

  it('after partial acceptance + rollback: verify rows equal the chain and every cache equals a chain-only run', async () => {
    for (const precision of ['f32', 'bf16'] as const) {
      const [model, chainModel] = await prefilledPair(() => moeModel(ctx, weights, precision), ids(13, 7));
      const schedule = [
        [4, 0],
        [4, 1],
        [8, 3],
        [2, 2],
        [3, 1],
        [8, 8],
        [4, 2],
        [8, 5],
        [2, 0],
        [8, 7],
        [4, 3],
        [8, 6],
      ];
      await runRollbackSchedule(model, chainModel, schedule, ids, V, precision);
      expect(model.cache.state).toEqual(chainModel.cache.state);
      expect(model.cache.state.nextPos).toBeGreaterThan(2 * model.cache.window);
      await expectCacheLayersEqual(ctx, model, chainModel, precision);
      model.destroy();
      chainModel.destroy();
    }
  });
});
