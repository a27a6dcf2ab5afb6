/**
 * The CPU side of recording a dispatch (src/gpu/recorder.ts, src/gpu/kernels.ts), which bounds classic
 * decode on a fast GPU: the parameter-block check (a block packed with another shader's struct Params is
 * refused unless the layouts agree) and the bind group cache (one bind group per pipeline and bound ranges,
 * built on a miss only, with the ranges it was asked for).
 */
import { describe, expect, it } from 'vitest';
import { checkParams, tagParams } from '../../src/gpu/recorder.ts';
import { BindGroupCache, type Binding } from '../../src/gpu/kernels.ts';

describe('parameter blocks', () => {
  it('pass for their own shader or one with the same struct Params, and are refused for another', () => {
    const block = tagParams({ buffer: {} as GPUBuffer, offset: 256, size: 48 }, 'rmsnorm.wgsl');
    expect(() => checkParams('rmsnorm.wgsl', block)).not.toThrow();
    expect(() => checkParams('attention.wgsl', block)).toThrow(/packed with the struct Params of rmsnorm\.wgsl/);
    // a whole buffer as a block (the benchmark's), and an untagged binding (nothing to check)
    const whole = tagParams({} as GPUBuffer, 'attention.wgsl');
    expect(() => checkParams('rmsnorm.wgsl', whole)).toThrow(/attention\.wgsl/);
    expect(() => checkParams('rmsnorm.wgsl', { buffer: {} as GPUBuffer })).not.toThrow();
    expect(() => checkParams('rmsnorm.wgsl', undefined)).not.toThrow();
  });
});

describe('bind group cache', () => {
  // A device and pipeline that record what createBindGroup was given.
  const made: GPUBindGroupDescriptor[] = [];
  const device = {
    createBindGroup: (d: GPUBindGroupDescriptor) => {
      made.push(d);
      return { n: made.length } as unknown as GPUBindGroup;
    },
  } as unknown as GPUDevice;
  const pipeline = (layout: string) => ({ getBindGroupLayout: () => layout }) as unknown as GPUComputePipeline;

  it('reuses a bind group for the same pipeline and ranges, and builds one per distinct range', () => {
    const cache = new BindGroupCache();
    const p = pipeline('L');
    const [a, b, u] = [{} as GPUBuffer, {} as GPUBuffer, {} as GPUBuffer];
    const at = (offset: number, size?: number): (Binding | undefined)[] => [
      { buffer: u, offset, size },
      a,
      undefined,
      b,
    ];
    const g1 = cache.get(device, p, at(0, 48));
    expect(cache.get(device, p, at(0, 48))).toBe(g1);
    expect(cache.created).toBe(1);
    expect(made[0].entries).toEqual([
      { binding: 0, resource: { buffer: u, offset: 0, size: 48 } },
      { binding: 1, resource: { buffer: a, offset: 0 } },
      { binding: 3, resource: { buffer: b, offset: 0 } },
    ]);
    expect(made[0].layout).toBe('L');
    // another offset, another size, another pipeline, another buffer in a slot: each its own group
    const others = [
      cache.get(device, p, at(256, 48)),
      cache.get(device, p, at(0)),
      cache.get(device, pipeline('L2'), at(0, 48)),
      cache.get(device, p, [{ buffer: u, offset: 0, size: 48 }, b, undefined, a]),
    ];
    expect(new Set([g1, ...others]).size).toBe(5);
    expect(cache.created).toBe(5);
    expect(made[2].entries).toEqual([
      { binding: 0, resource: { buffer: u, offset: 0 } },
      { binding: 1, resource: { buffer: a, offset: 0 } },
      { binding: 3, resource: { buffer: b, offset: 0 } },
    ]);
  });
});
