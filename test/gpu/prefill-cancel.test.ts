/**
 * Cancel stops a long prefill within a chunk. A prefill without logits only queues its chunks, so without a check
 * between them the probe's Cancel would take effect only after the whole prefill had run on the GPU (90 s for a
 * 3000-token draw on SwiftShader). With a cancel token, the prefill waits for each chunk and checks the token before
 * the next; without one it is unchanged.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TargetDescription } from '../../src/format/model-description.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import { uploadWeights, type GpuWeights } from '../../src/model/gpu-weights.ts';
import { TargetModel } from '../../src/model/gemma4/dense/dense-target.ts';
import { openCheckpointDir } from '../../src/node/file-source.ts';
import { CancelToken } from '../../src/util/cancel.ts';
import { TINY_A } from '../support/fixtures.ts';
import { testGpu } from './gpu-context.ts';

describe('prefill with a cancel token', () => {
  let ctx: GpuContext;
  let weights: GpuWeights<TargetDescription>;
  beforeAll(async () => {
    ctx = await testGpu();
    const ck = await openCheckpointDir(path.join(TINY_A, 'target'));
    weights = await uploadWeights(ctx.device, ck.description as TargetDescription);
  });
  afterAll(() => {
    weights?.destroy();
    ctx?.destroy();
  });

  it('stops after the chunk in flight when cancelled, and runs to the end when not', async () => {
    const model = new TargetModel(ctx, weights, { maxContext: 64, maxBlock: 4, prefillChunk: 8, precision: 'f32' });
    try {
      const tokens = Array.from({ length: 40 }, (_, i) => (i * 37 + 2) % weights.desc.vocab);
      const token = new CancelToken();
      let chunks = 0;
      // the token is set while the first chunk runs: the second must not start
      const run = model.prefill(tokens, { logits: 'none', cancel: token });
      const idle = model.idle.bind(model);
      model.idle = async () => {
        chunks++;
        token.cancel();
        return idle();
      };
      await expect(run).rejects.toThrow(expect.objectContaining({ name: 'CancelledError' }));
      expect(chunks).toBe(1);
      model.idle = idle;
      model.reset();
      const done = await model.prefill(tokens, { logits: 'last', cancel: new CancelToken() });
      expect(done.argmax?.length).toBe(1);
    } finally {
      model.destroy();
    }
  });
});
