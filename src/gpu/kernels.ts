import { shaderSource } from './shaders.ts';
import { GpuError } from './errors.ts';
import { detectKernelClass, type KernelClass } from './kernel-class.ts';

/**
 * Compute pipelines, compiled once per (shader, entry point, override constants) and cached per
 * device. Exactness relies on this: a row is always computed by the very same compiled pipeline,
 * whatever the dispatch size, so two code paths never share arithmetic by accident.
 */
export class KernelCache {
  private readonly modules = new Map<string, GPUShaderModule>();
  private readonly pipelines = new Map<string, GPUComputePipeline>();
  readonly bindGroups = new BindGroupCache();
  /** Uniform parameter arenas not checked out by a Recorder (see Recorder.params). */
  readonly freeArenas: GPUBuffer[] = [];
  private readonly scratchBuffers = new Map<string, GPUBuffer>();

  /**
   * Kernels may share values across a subgroup (matmul_lanes_subgroupx.wgsl) when the device has
   * subgroups of at least 8 invocations. A property of the device, fixed for the cache's lifetime,
   * so every forward of one engine runs the same pipelines.
   */
  readonly subgroupsOf8: boolean;
  /** Software adapter or hardware GPU (src/gpu/kernel-class.ts): picks the matvec family. */
  readonly kernelClass: KernelClass;

  constructor(readonly device: GPUDevice) {
    const info = (
      device as GPUDevice & { adapterInfo?: GPUAdapterInfo & { subgroupMinSize?: number; isFallbackAdapter?: boolean } }
    ).adapterInfo;
    this.subgroupsOf8 = device.features.has('subgroups') && (info?.subgroupMinSize ?? 0) >= 8;
    this.kernelClass = detectKernelClass(info, device.limits);
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
    // Called for every dispatch of every step: the key is built by hand (JSON.stringify cost more).
    let key = `${shader}#${entryPoint}#`;
    for (const k in constants) key += `${k}=${constants[k]},`;
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

  /**
   * A storage buffer of at least `bytes` kept for the device's lifetime, for intermediate values that
   * live within one dispatch sequence (the matmuls' x group sums): one buffer instead of one per call
   * keeps bind groups reusable. Consecutive users in one pass are ordered by WebGPU's per-dispatch
   * synchronisation.
   */
  scratch(name: string, bytes: number): GPUBuffer {
    const have = this.scratchBuffers.get(name);
    if (have && have.size >= bytes) return have;
    // The old buffer is dropped, not destroyed: dispatches recorded but not yet submitted may bind it,
    // and WebGPU keeps a buffer alive while submitted work uses it.
    const size = Math.max(256, 2 ** Math.ceil(Math.log2(Math.max(bytes, 1))));
    // COPY_SRC: captures and tests read scratch values back.
    const buf = this.device.createBuffer({
      label: `scratch.${name}`,
      size,
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC,
    });
    this.scratchBuffers.set(name, buf);
    return buf;
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
 * Bind groups created once and reused: a decode step binds the same weights, workspace and parameter
 * slots in the same order every time, and creating ~25 bind groups per layer per token costs more CPU
 * time than a GPU takes to run them. Keyed by pipeline and the identity, offset and size of every
 * bound buffer. Entries that bind short-lived buffers (captures) are never hit again; the cache is
 * emptied when it grows past MAX_ENTRIES so they cannot accumulate.
 */
export class BindGroupCache {
  private static readonly MAX_ENTRIES = 16384;
  private readonly groups = new Map<string, GPUBindGroup>();
  private readonly ids = new WeakMap<object, number>();
  private nextId = 1;
  /** Bind groups created so far (the bench reports them per token). */
  created = 0;

  private id(o: object): number {
    let i = this.ids.get(o);
    if (i === undefined) {
      i = this.nextId++;
      this.ids.set(o, i);
    }
    return i;
  }

  get(device: GPUDevice, pipeline: GPUComputePipeline, bindings: (Binding | undefined)[]): GPUBindGroup {
    // The key alone on a hit (every dispatch of a decode step after its first token): recording a step is
    // what bounds classic decode on a fast GPU (the 12B on an H200: ~760 dispatches and ~12 ms of CPU
    // per token against ~0.2 ms of waiting), so the hit path allocates nothing but the key.
    let key = String(this.id(pipeline));
    for (let binding = 0; binding < bindings.length; binding++) {
      const b = bindings[binding];
      if (!b) continue;
      key +=
        'buffer' in b
          ? `|${binding}:${this.id(b.buffer)}:${b.offset ?? 0}:${b.size ?? ''}`
          : `|${binding}:${this.id(b)}:0:`;
    }
    let g = this.groups.get(key);
    if (!g) {
      if (this.groups.size >= BindGroupCache.MAX_ENTRIES) this.groups.clear();
      g = createBindGroup(device, pipeline, bindings);
      this.groups.set(key, g);
      this.created++;
    }
    return g;
  }
}

/** A bind group of `pipeline`'s layout 0 with `bindings[i]` at @binding(i) (holes left out). */
function createBindGroup(
  device: GPUDevice,
  pipeline: GPUComputePipeline,
  bindings: (Binding | undefined)[],
): GPUBindGroup {
  const entries: GPUBindGroupEntry[] = [];
  bindings.forEach((b, binding) => {
    if (!b) return;
    const resource =
      'buffer' in b
        ? b.size === undefined
          ? { buffer: b.buffer, offset: b.offset ?? 0 }
          : { buffer: b.buffer, offset: b.offset ?? 0, size: b.size }
        : { buffer: b, offset: 0 };
    entries.push({ binding, resource });
  });
  return device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries });
}

/**
 * Records one compute dispatch into `pass`. `bindings[i]` goes to @binding(i) of group 0; holes
 * (undefined) are bindings the entry point does not use (layout 'auto' leaves them out). With a
 * cache, the bind group is reused when the same pipeline binds the same buffer ranges again.
 */
export function dispatch(
  device: GPUDevice,
  pass: GPUComputePassEncoder,
  pipeline: GPUComputePipeline,
  bindings: (Binding | undefined)[],
  workgroups: number,
  cache?: BindGroupCache,
  /** `pipeline` is already the pass's pipeline (set by the previous dispatch of this pass). */
  pipelineSet = false,
): void {
  const bindGroup = cache ? cache.get(device, pipeline, bindings) : createBindGroup(device, pipeline, bindings);
  if (!pipelineSet) pass.setPipeline(pipeline);
  pass.setBindGroup(0, bindGroup);
  const [x, y] = foldWorkgroups(workgroups, device.limits.maxComputeWorkgroupsPerDimension);
  if (x > 0) pass.dispatchWorkgroups(x, y);
}
