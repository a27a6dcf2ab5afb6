/**
 * The CPU side of recording a dispatch (src/gpu/recorder.ts, src/gpu/kernels.ts), which bounds classic
 * decode on a fast GPU: the parameter-block check (a block packed with another shader's struct Params is
 * refused unless the layouts agree) and the bind group cache (one bind group per pipeline and bound ranges,
 * built on a miss only, with the ranges it was asked for, and decided by the ranges themselves, not by their
 * hash) and the pipeline cache (one pipeline per shader, entry point and set of override constants).
 */
import { describe, expect, it } from 'vitest';
import { checkParams, tagParams } from '../../src/gpu/recorder.ts';
import { BindGroupCache, KernelCache, type Binding } from '../../src/gpu/kernels.ts';

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

  it('tells bindings apart by what they bind, even when every hash collides', () => {
    // With Math.imul returning 0 the cache's hash keeps only the last binding's size: every lookup below
    // lands in a shared bucket, so hits and misses are decided by the full comparison alone.
    const imul = Math.imul;
    Math.imul = () => 0;
    try {
      const cache = new BindGroupCache();
      const p = pipeline('L');
      const [a, b] = [{} as GPUBuffer, {} as GPUBuffer];
      const sets: (Binding | undefined)[][] = [
        [a, b],
        [b, a],
        [a, undefined, b],
        [{ buffer: a, offset: 256 }, b],
        [{ buffer: a, offset: 0, size: 64 }, b],
        [a],
      ];
      const groups = sets.map((s) => cache.get(device, p, s));
      expect(new Set(groups).size).toBe(sets.length);
      // each is found again, and a whole buffer binds what a range from 0 without a size does
      sets.forEach((s, i) => expect(cache.get(device, p, s)).toBe(groups[i]));
      expect(cache.get(device, p, [{ buffer: a }, b])).toBe(groups[0]);
      expect(cache.created).toBe(sets.length);
    } finally {
      Math.imul = imul;
    }
  });
});

describe('pipeline cache', () => {
  it('compiles one pipeline per shader, entry point and set of constants, whatever their order', () => {
    const made: GPUComputePipelineDescriptor[] = [];
    const device = {
      features: new Set<string>(),
      limits: {},
      createShaderModule: (d: GPUShaderModuleDescriptor) => ({ label: d.label }),
      createComputePipeline: (d: GPUComputePipelineDescriptor) => {
        made.push(d);
        return { n: made.length } as unknown as GPUComputePipeline;
      },
    } as unknown as GPUDevice;
    const kernels = new KernelCache(device);
    const p = kernels.pipeline('rmsnorm.wgsl', { WG: 64, ROWS: 2 }, 'rows_wg');
    expect(kernels.pipeline('rmsnorm.wgsl', { ROWS: 2, WG: 64 }, 'rows_wg')).toBe(p);
    const others = [
      kernels.pipeline('rmsnorm.wgsl', { WG: 64, ROWS: 4 }, 'rows_wg'),
      kernels.pipeline('rmsnorm.wgsl', { WG: 64 }, 'rows_wg'),
      kernels.pipeline('rmsnorm.wgsl', { WG: 64, ROWS: 2, X: 1 }, 'rows_wg'),
      kernels.pipeline('rmsnorm.wgsl', { WG: 64, ROWS: 2 }, 'main'),
      kernels.pipeline('attention.wgsl', { WG: 64, ROWS: 2 }, 'rows_wg'),
    ];
    expect(new Set([p, ...others]).size).toBe(6);
    expect(kernels.size).toBe(6);
    expect(made[0].compute.constants).toEqual({ WG: 64, ROWS: 2 });
    expect(made[0].compute.entryPoint).toBe('rows_wg');
    // a caller's constants object changed after the call does not change what was cached
    const c = { WG: 32 };
    const q = kernels.pipeline('rmsnorm.wgsl', c, 'main');
    c.WG = 16;
    expect(kernels.pipeline('rmsnorm.wgsl', { WG: 32 }, 'main')).toBe(q);
  });
});
