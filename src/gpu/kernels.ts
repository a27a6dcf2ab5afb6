import { shaderSource } from './shaders.ts';
import { GpuError } from './errors.ts';

/**
 * Compute pipelines, compiled once per (shader, entry point, override constants) and cached per
 * device. Exactness relies on this: a row is always computed by the very same compiled pipeline,
 * whatever the dispatch size, so two code paths never share arithmetic by accident.
 */
export class KernelCache {
  private readonly modules = new Map<string, GPUShaderModule>();
  private readonly pipelines = new Map<string, GPUComputePipeline>();

  /**
   * Kernels may share values across a subgroup (matmul_lanes_subgroupx.wgsl) when the device has
   * subgroups of at least 8 invocations. A property of the device, fixed for the cache's lifetime,
   * so every forward of one engine runs the same pipelines.
   */
  readonly subgroupsOf8: boolean;

  constructor(readonly device: GPUDevice) {
    const info = (device as GPUDevice & { adapterInfo?: { subgroupMinSize?: number } }).adapterInfo;
    this.subgroupsOf8 = device.features.has('subgroups') && (info?.subgroupMinSize ?? 0) >= 8;
  }

  module(shader: string): GPUShaderModule {
    let m = this.modules.get(shader);
    if (!m) {
      m = this.device.createShaderModule({ label: shader, code: shaderSource(shader) });
      this.modules.set(shader, m);
    }
    return m;
  }

  pipeline(shader: string, constants: Record<string, number> = {}, entryPoint = 'main'): GPUComputePipeline {
    const key = `${shader}#${entryPoint}#${JSON.stringify(constants)}`;
    let p = this.pipelines.get(key);
    if (!p) {
      p = this.device.createComputePipeline({
        label: key,
        layout: 'auto',
        compute: { module: this.module(shader), entryPoint, constants },
      });
      this.pipelines.set(key, p);
    }
    return p;
  }

  get size(): number {
    return this.pipelines.size;
  }
}

/**
 * Folds a 1-D count of workgroups into 2-D when it exceeds maxComputeWorkgroupsPerDimension
 * (65535 by default: a 262144-row LM head needs more). Kernels recover the linear index with
 * `linear_workgroup(wid, nwg)` (shaders/common.wgsl) and must bounds-check, since x*y may exceed n.
 */
export function foldWorkgroups(n: number, maxPerDim: number): [number, number] {
  if (n <= 0) return [0, 1];
  if (n <= maxPerDim) return [n, 1];
  const y = Math.ceil(n / maxPerDim);
  if (y > maxPerDim) throw new GpuError('limits', `A dispatch of ${n} workgroups exceeds ${maxPerDim}^2.`);
  return [Math.ceil(n / y), y];
}

export type Binding = GPUBuffer | { buffer: GPUBuffer; offset?: number; size?: number };

/**
 * Records one compute dispatch into `pass`. `bindings[i]` goes to @binding(i) of group 0; holes
 * (undefined) are bindings the entry point does not use (layout 'auto' leaves them out).
 */
export function dispatch(
  device: GPUDevice,
  pass: GPUComputePassEncoder,
  pipeline: GPUComputePipeline,
  bindings: (Binding | undefined)[],
  workgroups: number,
): void {
  const entries: GPUBindGroupEntry[] = [];
  bindings.forEach((b, binding) => {
    if (!b) return;
    entries.push({
      binding,
      resource: 'buffer' in b ? { buffer: b.buffer, offset: b.offset ?? 0, size: b.size } : { buffer: b },
    });
  });
  const bindGroup = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries });
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, bindGroup);
  const [x, y] = foldWorkgroups(workgroups, device.limits.maxComputeWorkgroupsPerDimension);
  if (x > 0) pass.dispatchWorkgroups(x, y);
}
