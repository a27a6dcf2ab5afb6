import { describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import { tinyModel, tinyWeights } from './tiny-model.ts';

describe('a lost device', () => {
  it('fails the running call with a device-lost error instead of hanging, and the lost promise says why', async () => {
    const ctx = await testGpu();
    const model = tinyModel(ctx, await tinyWeights(ctx), 'f32');
    await model.prefill([1, 2, 3], { logits: 'none' });
    ctx.device.destroy(); // what a driver reset or a GPU process crash looks like to the page
    const err = await model.decode(4).catch((e) => e);
    expect(err).toBeInstanceOf(Error);
    expect(err.name).toBe('GpuError');
    expect(err.kind).toBe('device-lost');
    expect(err.message).toMatch(/GPU device was lost/);
    const lost = await ctx.lost;
    expect(lost.kind).toBe('device-lost');
  });
});
