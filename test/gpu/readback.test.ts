/**
 * readMany refuses what WebGPU refuses: a read of a buffer without COPY_SRC once handed back the staging
 * buffer's zeros, which made the fused-ops test's group-sum comparisons compare zeros with zeros (the
 * matmuls' scratch buffers, which it reads, now have COPY_SRC).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import { readBytes, uploadBuffer } from '../../src/gpu/buffers.ts';

describe('reading GPU buffers back', () => {
  let ctx: GpuContext;
  beforeAll(async () => {
    ctx = await testGpu();
  });
  afterAll(() => ctx?.destroy());

  it('a buffer without COPY_SRC is an error, not zeros', async () => {
    const b = ctx.device.createBuffer({ size: 16, usage: GPUBufferUsage.STORAGE });
    await expect(readBytes(ctx.device, b, 16)).rejects.toThrow(/Reading results back failed: .*CopySrc/);
    b.destroy();
  });

  it('values come back', async () => {
    const src = uploadBuffer(ctx.device, Float32Array.of(1.5, -2, 3, 4), 'values');
    expect([...new Float32Array((await readBytes(ctx.device, src, 16)).slice().buffer)]).toEqual([1.5, -2, 3, 4]);
    src.destroy();
  });
});
