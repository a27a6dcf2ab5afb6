import { describe, expect, it } from 'vitest';
import { nodeGpu, nodeGpuContext } from '../../src/cli/node-gpu.ts';
import { limitsToRecord } from '../../src/gpu/device.ts';
import { KernelCache } from '../../src/gpu/kernels.ts';
import { LIMIT_PROFILES, limitProfile } from '../../src/gpu/limit-profiles.ts';
import { planLimitsOf } from '../../src/model/memory-budget.ts';

/**
 * Browser limit profiles on Dawn (src/gpu/limit-profiles.ts): the device is requested with the browser's caps, so
 * Dawn itself enforces them, and reports them to the engine (kernel choice, memory plans); features the browser
 * does not offer are not requested.
 */
async function theAdapter(): Promise<{ limits: Record<string, number>; features: Set<string> }> {
  const adapter = await nodeGpu().requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) throw new Error('no adapter');
  return { limits: limitsToRecord(adapter.limits), features: new Set(adapter.features) };
}

async function validationError(device: GPUDevice, fn: () => void): Promise<string | undefined> {
  device.pushErrorScope('validation');
  fn();
  return (await device.popErrorScope())?.message;
}

/** A compute pipeline layout binding `n` storage buffers in one stage. */
function storageLayout(device: GPUDevice, n: number): GPUPipelineLayout {
  return device.createPipelineLayout({
    bindGroupLayouts: [
      device.createBindGroupLayout({
        entries: Array.from({ length: n }, (_, i) => ({
          binding: i,
          visibility: GPUShaderStage.COMPUTE,
          buffer: { type: 'storage' as const },
        })),
      }),
    ],
  });
}

const CAPPED = [
  'maxBufferSize',
  'maxStorageBufferBindingSize',
  'maxStorageBuffersPerShaderStage',
  'maxComputeWorkgroupStorageSize',
  'maxComputeInvocationsPerWorkgroup',
] as const;

describe('browser limit profiles on Dawn', () => {
  for (const name of LIMIT_PROFILES) {
    it(`${name}: the device has the browser's limits (Dawn enforces them) and only its features`, async () => {
      const { limits: adapter, features } = await theAdapter();
      const ctx = await nodeGpuContext({ limits: name });
      try {
        const caps = limitProfile(name).caps(adapter);
        const seen = limitsToRecord(ctx.device.limits);
        for (const k of CAPPED) {
          // never above the browser's cap, never above the adapter: the two are what the device was asked for
          expect(seen[k], k).toBe(Math.min(adapter[k], caps[k]));
        }
        expect(ctx.report.limits).toEqual(seen);
        expect(ctx.report.limitProfile).toBe(name);
        expect(planLimitsOf(ctx)).toEqual({
          maxBufferSize: seen.maxBufferSize,
          maxStorageBufferBindingSize: seen.maxStorageBufferBindingSize,
          profile: name,
        });
        const offered = limitProfile(name).features;
        for (const f of ctx.device.features) if (f !== 'core-features-and-limits') expect(offered).toContain(f);
        // Safari's releases offer no subgroups: the kernels take their paths without them
        const subgroups = features.has('subgroups') && name !== 'safari';
        expect(ctx.has('subgroups')).toBe(subgroups);
        expect(new KernelCache(ctx.device).subgroupsOf8).toBe(subgroups && (ctx.report.subgroupMinSize ?? 0) >= 8);
        // Dawn enforces what it was asked for: a buffer one step over the browser's maxBufferSize is refused before
        // anything is allocated, and a stage binds as many storage buffers as the profile allows and no more
        const device = ctx.device;
        const over = await validationError(device, () =>
          device.createBuffer({ size: seen.maxBufferSize + 4, usage: GPUBufferUsage.STORAGE }),
        );
        expect(over).toMatch(/size|exceeds|maxBufferSize/i);
        const perStage = seen.maxStorageBuffersPerShaderStage;
        expect(await validationError(device, () => storageLayout(device, perStage))).toBeUndefined();
        expect(await validationError(device, () => storageLayout(device, perStage + 1))).toMatch(/storage/i);
      } finally {
        ctx.destroy();
      }
    });
  }

  it('chrome-mac: a stage binds exactly 10 storage buffers, what the fused qkv_rows needs', async () => {
    const ctx = await nodeGpuContext({ limits: 'chrome-mac' });
    try {
      const device = ctx.device;
      expect(device.limits.maxStorageBuffersPerShaderStage).toBe(10);
      // rmsnorm.wgsl `qkv_rows` (ops.qkvNorm; WG as NORM_WG) compiles within the tenth binding
      const kernels = new KernelCache(device);
      expect(
        await validationError(device, () => kernels.pipeline('rmsnorm.wgsl', { WG: 256 }, 'qkv_rows')),
      ).toBeUndefined();
    } finally {
      ctx.destroy();
    }
  });

  it('an unknown RINGSIDE_LIMITS is refused before any device is made, naming the variable and the profiles', async () => {
    const before = process.env.RINGSIDE_LIMITS;
    process.env.RINGSIDE_LIMITS = 'firefox';
    try {
      await expect(nodeGpuContext()).rejects.toThrow(
        '"firefox" (RINGSIDE_LIMITS) is not a browser limit profile; use one of safari, safari-subgroups, chrome-mac',
      );
    } finally {
      if (before === undefined) delete process.env.RINGSIDE_LIMITS;
      else process.env.RINGSIDE_LIMITS = before;
    }
  });
});
