import { shaderSource } from './shaders.ts';
import { GpuError } from './errors.ts';
import { checkCoopTuning, type CoopTuning } from './coop-tuning.ts';
import { detectKernelClass, type KernelClass } from './kernel-class.ts';
import { faultedSource, faultShaders, type KernelFault } from './kernel-fault.ts';
import type { ParamArena } from './param-arena.ts';
import { pipelineCreation } from './pipeline-creation.ts';
import { formatWgslFuzz, fuzzedPipelineSource, wgslFuzzSpec } from './wgsl-fuzz/config.ts';

/**
 * Compute pipelines, compiled once per (shader, entry point, override constants) and cached per
 * device. Exactness relies on this: a row is always computed by the very same compiled pipeline,
 * whatever the dispatch size, so two code paths never share arithmetic by accident.
 */
export class KernelCache {
  private readonly modules = new Map<string, GPUShaderModule>();
  /** Pipelines by shader, entry point, then override constants (one entry per distinct set). */
  private readonly pipelines = new Map<
    string,
    Map<string, { constants: Record<string, number>; pipeline: GPUComputePipeline }[]>
  >();
  private count = 0;
  readonly bindGroups = new BindGroupCache();
  /** Uniform parameter arenas not checked out by a Recorder (see Recorder.params). */
  readonly freeArenas: ParamArena[] = [];
  private readonly scratchBuffers = new Map<string, GPUBuffer>();

  /**
   * Kernels may share values across a subgroup (matmul_lanes_subgroupx.wgsl) when the device has
   * subgroups of at least 8 invocations. A property of the device, fixed for the cache's lifetime,
   * so every forward of one engine runs the same pipelines.
   */
  readonly subgroupsOf8: boolean;
  /** Software adapter or hardware GPU (src/gpu/kernel-class.ts): picks the matvec family. */
  readonly kernelClass: KernelClass;

  /** A fault injected into this cache's kernels (src/gpu/kernel-fault.ts; the exactness self-test's proof only). */
  readonly fault: KernelFault | undefined;
  /** The pool this cache shares modules and pipelines through (KernelCacheOptions.pool), if any. */
  readonly pool: PipelinePool | undefined;
  /** Overrides of matmul_coop.wgsl's shape (KernelCacheOptions.coop); empty: the rules of coop-shape.ts. */
  readonly coop: Readonly<CoopTuning>;

  constructor(
    readonly device: GPUDevice,
    opts: KernelCacheOptions = {},
  ) {
    const info = (
      device as GPUDevice & { adapterInfo?: GPUAdapterInfo & { subgroupMinSize?: number; isFallbackAdapter?: boolean } }
    ).adapterInfo;
    this.subgroupsOf8 = device.features.has('subgroups') && (info?.subgroupMinSize ?? 0) >= 8;
    this.kernelClass = opts.kernelClass ?? detectKernelClass(info, device.limits);
    this.fault = opts.fault;
    this.pool = opts.pool;
    if (opts.coop) checkCoopTuning(opts.coop);
    this.coop = { ...opts.coop };
  }

  /** The shader's module's name in a pool: the file, and the fault where it rewrites that file. */
  private moduleKey(shader: string): string {
    return this.fault && faultShaders(this.fault).includes(shader) ? `${shader} (fault ${this.fault})` : shader;
  }

  module(shader: string): GPUShaderModule {
    let m = this.modules.get(shader);
    if (!m) {
      const key = this.moduleKey(shader);
      m = this.pool?.modules.get(key);
      if (!m) {
        const source = shaderSource(shader);
        const code = this.fault ? faultedSource(this.fault, shader, source) : source;
        m = this.device.createShaderModule({ label: key, code });
        this.pool?.modules.set(key, m);
      }
      this.modules.set(shader, m);
    }
    return m;
  }

  /**
   * The module a pipeline is made from: the shader's (one per shader), or under the compiler fuzzer
   * (src/gpu/wgsl-fuzz/config.ts) one of its own, rewritten for this entry point and these constants.
   */
  private pipelineModule(shader: string, entryPoint: string, constants: Record<string, number>): GPUShaderModule {
    if (!wgslFuzzSpec()) return this.module(shader);
    const source = this.fault ? faultedSource(this.fault, shader, shaderSource(shader)) : shaderSource(shader);
    const code = fuzzedPipelineSource(shader, source, entryPoint, constants);
    return this.device.createShaderModule({ label: `${shader}#${entryPoint} (fuzzed)`, code });
  }

  pipeline(shader: string, constants: Record<string, number> = {}, entryPoint = 'main'): GPUComputePipeline {
    // Called for every dispatch of every step: looked up without building a key string (building one cost
    // ~0.5 us of the ~10 us a dispatch takes to record on a 2-core host; scripts/record-microbench.ts).
    let byEntry = this.pipelines.get(shader);
    if (!byEntry) this.pipelines.set(shader, (byEntry = new Map()));
    let variants = byEntry.get(entryPoint);
    if (!variants) byEntry.set(entryPoint, (variants = []));
    for (const v of variants) if (sameConstants(v.constants, constants)) return v.pipeline;
    // The label names what the pipeline is (the profiler shows it); it is the pool's key too, so it names the
    // compiler fuzzer's setting: a pool outlives a change of it (setWgslFuzz), and its rewrites are other code.
    const fuzz = wgslFuzzSpec();
    const label = `${this.moduleKey(shader)}#${entryPoint}#${Object.entries(constants)
      .map(([k, n]) => `${k}=${n}`)
      .join(',')}${fuzz ? ` (fuzzed ${formatWgslFuzz(fuzz)})` : ''}`;
    let pipeline = this.pool?.pipelines.get(label);
    if (!pipeline) {
      const t0 = performance.now();
      pipeline = this.device.createComputePipeline({
        label,
        layout: 'auto',
        compute: { module: this.pipelineModule(shader, entryPoint, constants), entryPoint, constants },
      });
      this.count++;
      pipelineCreation.created++;
      pipelineCreation.ms += performance.now() - t0;
      this.pool?.pipelines.set(label, pipeline);
    }
    variants.push({ constants: { ...constants }, pipeline });
    return pipeline;
  }

  /** Pipelines compiled so far. */
  get size(): number {
    return this.count;
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
 * What a cache may be told instead of reading it from the device: the kernel class (the exactness self-test runs
 * both classes on one device), and a fault to inject (kernel-fault.ts). Engines leave both unset.
 */
export interface KernelCacheOptions {
  kernelClass?: KernelClass;
  fault?: KernelFault;
  /** Modules and pipelines shared with other caches of the same device that are given the same pool. */
  pool?: PipelinePool;
  /** matmul_coop.wgsl's shape for every coop linear this cache dispatches, instead of the rules (tuning, tests). */
  coop?: CoopTuning;
}

/**
 * Shader modules and pipelines several KernelCaches of one device share, by name (the file, the fault where it
 * rewrites that file, the entry point and the override constants). The exactness self-test's models share one, so
 * that a run with a fault compiles only the kernels the fault rewrites (llvmpipe takes minutes for the GPU class's
 * pipelines). Engines keep their own: what a decode reports of its pipeline compiles stays its own.
 */
export interface PipelinePool {
  modules: Map<string, GPUShaderModule>;
  pipelines: Map<string, GPUComputePipeline>;
}

/** Whether two sets of override constants name the same values (the same keys, whatever their order). */
function sameConstants(a: Record<string, number>, b: Record<string, number>): boolean {
  let n = 0;
  for (const k in b) {
    if (a[k] !== b[k]) return false;
    n++;
  }
  for (const _ in a) n--;
  return n === 0;
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
  /** Entries by a hash of what they bind; each entry keeps that in full (`key`), which decides a hit. */
  private readonly groups = new Map<number, { key: number[]; group: GPUBindGroup }[]>();
  private entries = 0;
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
    // A hit (every dispatch of a decode step after its first token) allocates nothing: the identity is
    // hashed and then compared field by field with the entry's. Recording a step is what bounds classic
    // decode on a fast GPU (the 12B on an H200: ~500 dispatches per token, 8-17 us of host time each), and a
    // string key per dispatch cost ~1 us of that (scripts/record-microbench.ts).
    let h = Math.imul(this.id(pipeline), 0x9e3779b1);
    for (let binding = 0; binding < bindings.length; binding++) {
      const b = bindings[binding];
      if (!b) continue;
      h = Math.imul(h ^ binding, 0x85ebca6b) ^ this.id(bufferOf(b));
      h = Math.imul(h ^ offsetOf(b), 0xc2b2ae35) ^ sizeOf(b);
    }
    const bucket = this.groups.get(h);
    if (bucket) for (const e of bucket) if (this.sameKey(e.key, pipeline, bindings)) return e.group;
    if (this.entries >= BindGroupCache.MAX_ENTRIES) {
      this.groups.clear();
      this.entries = 0;
    }
    const group = createBindGroup(device, pipeline, bindings);
    const entry = { key: this.keyOf(pipeline, bindings), group };
    const list = this.groups.get(h);
    if (list) list.push(entry);
    else this.groups.set(h, [entry]);
    this.entries++;
    this.created++;
    return group;
  }

  /** What a bind group binds, as numbers: the pipeline, then (binding, buffer, offset, size) per binding. */
  private keyOf(pipeline: GPUComputePipeline, bindings: (Binding | undefined)[]): number[] {
    const key = [this.id(pipeline)];
    bindings.forEach((b, binding) => {
      if (b) key.push(binding, this.id(bufferOf(b)), offsetOf(b), sizeOf(b));
    });
    return key;
  }

  /** Whether `key` (keyOf) describes these bindings of `pipeline`, compared without allocating. */
  private sameKey(key: number[], pipeline: GPUComputePipeline, bindings: (Binding | undefined)[]): boolean {
    if (key[0] !== this.id(pipeline)) return false;
    let i = 1;
    for (let binding = 0; binding < bindings.length; binding++) {
      const b = bindings[binding];
      if (!b) continue;
      if (
        i + 4 > key.length ||
        key[i] !== binding ||
        key[i + 1] !== this.id(bufferOf(b)) ||
        key[i + 2] !== offsetOf(b) ||
        key[i + 3] !== sizeOf(b)
      )
        return false;
      i += 4;
    }
    return i === key.length;
  }
}

// A binding's buffer, offset and size as the cache keys them: a whole buffer binds what a range of it from
// offset 0 without a size does (size -1: to the end).
const bufferOf = (b: Binding): GPUBuffer => ('buffer' in b ? b.buffer : b);
const offsetOf = (b: Binding): number => ('buffer' in b ? (b.offset ?? 0) : 0);
const sizeOf = (b: Binding): number => ('buffer' in b ? (b.size ?? -1) : -1);

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
