/**
 * A generation's decode time includes the compiles of the GPU pipelines it uses first (the chain step's kernels),
 * which a driver pays once per machine: on the H200 the first 12B classic run read 31.6 tokens/s, the next ones
 * 86-94, and nothing said why. The timings now count the pipelines the decode created and their creation time
 * (src/gpu/pipeline-creation.ts), and the CLI says so beside tokens/s.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import { tinyTarget } from '../support/fixtures.ts';
import { uploadWeights } from '../../src/model/gpu-weights.ts';
import { TargetModel } from '../../src/model/gemma4/dense/dense-target.ts';
import { generateClassic } from '../../src/model/generate.ts';
import { pipelinesNote } from '../../src/cli/commands/generate.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import type { TargetDescription } from '../../src/format/model-description.ts';

describe('pipelines a decode creates', () => {
  let ctx: GpuContext;
  let model: TargetModel;
  beforeAll(async () => {
    ctx = await testGpu();
    const w = await uploadWeights(ctx.device, (await tinyTarget()).description as TargetDescription);
    model = new TargetModel(ctx, w, { maxContext: 64, maxBlock: 4, prefillChunk: 64, precision: 'f32' });
  });
  afterAll(() => ctx?.destroy());

  it('the first decode counts the pipelines it created and their time; a second one creates none', async () => {
    const first = await generateClassic(model, [2, 3, 4, 5], { maxNew: 6 });
    const p = first.timings.decodePipelines;
    // the prefill's kernels (the prefill tile) are not the chain step's (the matvec, the argmax fed to the next embedding)
    expect(p?.created).toBeGreaterThan(0);
    expect(p!.ms).toBeGreaterThan(0);
    expect(p!.ms).toBeLessThanOrEqual(first.timings.decodeMs);
    expect(p!.tokensPerSecondWithout).toBeGreaterThan(first.timings.tokensPerSecond);
    expect(pipelinesNote(first.timings)).toMatch(
      new RegExp(
        `^ \\(the decode created ${p!.created} GPU pipelines in \\d+ ms, compiled once per machine .*: [\\d.]+ tok/s without them\\)$`,
      ),
    );

    const second = await generateClassic(model, [2, 3, 4, 5], { maxNew: 6 });
    expect(second.tokens).toEqual(first.tokens);
    expect(second.timings.decodePipelines).toBeUndefined();
    expect(pipelinesNote(second.timings)).toBe('');
  });
});
