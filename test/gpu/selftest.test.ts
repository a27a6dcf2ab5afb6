import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import { runSelfTest } from '../../src/gpu/selftest.ts';
import { foldWorkgroups } from '../../src/gpu/kernels.ts';
import type { GpuContext } from '../../src/gpu/device.ts';

describe('WGSL in Node on Dawn', () => {
  let ctx: GpuContext;
  beforeAll(async () => {
    ctx = await testGpu();
  });
  afterAll(() => ctx?.destroy());

  it('gets the adapter real limits, not the WebGPU defaults', () => {
    // The defaults are 256 MiB / 128 MiB; lavapipe offers 4 GiB buffers.
    expect(ctx.report.limits.maxBufferSize).toBeGreaterThan(256 * 2 ** 20);
    expect(ctx.report.limits.maxStorageBufferBindingSize).toBeGreaterThanOrEqual(128 * 2 ** 20);
  });

  it('detects and exercises shader-f16 and subgroups on lavapipe', async () => {
    expect(ctx.report.description).toMatch(/llvmpipe|lavapipe|Metal|Apple|NVIDIA|AMD|Intel/i);
    expect(ctx.has('shader-f16')).toBe(true);
    expect(ctx.has('subgroups')).toBe(true);
    const r = await runSelfTest(ctx);
    for (const c of r.checks) {
      expect(c.skipped, c.name).toBeUndefined();
      expect(c.ok, `${c.name}: ${c.detail}`).toBe(true);
    }
    expect(r.checks.map((c) => c.name)).toEqual(['f32 fma, 2-D dispatch', 'shader-f16', 'subgroups']);
  });

  it('falls back cleanly when optional features are turned off', async () => {
    const { nodeGpuContext } = await import('../../src/cli/node-gpu.ts');
    const bare = await nodeGpuContext({ disableFeatures: ['shader-f16', 'subgroups'] });
    const r = await runSelfTest(bare);
    expect(r.ok).toBe(true);
    expect(r.checks.filter((c) => c.skipped).map((c) => c.name)).toEqual(['shader-f16', 'subgroups']);
    bare.destroy();
  });
});

describe('foldWorkgroups', () => {
  it('keeps 1-D dispatches up to the limit and folds larger ones into 2-D covering every index', () => {
    expect(foldWorkgroups(65535, 65535)).toEqual([65535, 1]);
    for (const n of [65536, 262144, 1_000_003]) {
      const [x, y] = foldWorkgroups(n, 65535);
      expect(x).toBeLessThanOrEqual(65535);
      expect(x * y).toBeGreaterThanOrEqual(n);
      expect(x * (y - 1)).toBeLessThan(n);
    }
    expect(() => foldWorkgroups(65536 * 65536, 65535)).toThrow(/exceeds/);
  });
});
