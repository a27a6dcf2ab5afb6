import { type KernelCache, dispatch, type Binding } from './kernels.ts';
import type { ParamArena } from './param-arena.ts';
import type { KernelProfiler } from './profiler.ts';
import { boundSize, packParams, paramsLayout, type ParamValues } from './params-layout.ts';

/**
 * The shader each parameter block was packed for (Recorder.params), checked when it is bound: a property of
 * the binding, since a WeakMap entry per dispatch made work for the garbage collector on the path that
 * bounds classic decode (see BindGroupCache.get).
 */
const PACKED_FOR = Symbol('packedFor');
type Tagged = { [PACKED_FOR]?: string };

/** Records that `binding` holds a parameter block packed with `shader`'s layout; returns it. */
export function tagParams<B extends Binding>(binding: B, shader: string): B {
  (binding as Tagged)[PACKED_FOR] = shader;
  return binding;
}

/** Throws when `binding` is a parameter block packed for a shader whose struct Params differs from `shader`'s. */
export function checkParams(shader: string, binding: Binding | undefined): void {
  const packed = binding && (binding as Tagged)[PACKED_FOR];
  if (packed === undefined || packed === shader) return;
  const want = paramsLayout(shader).signature;
  if (paramsLayout(packed).signature !== want) {
    throw new Error(
      `${shader}: its parameter block was packed with the struct Params of ${packed}, which differs (${shader}: ${want})`,
    );
  }
}

/**
 * Dispatches and queue submits of every Recorder while a tally is open, and a profiler every new Recorder takes:
 * how the bench (src/bench/e2e.ts) measures an engine that keeps no TargetStats of its own (the Qwen3.5
 * target). Process-wide, so opened only around a measurement and closed after it.
 */
export interface RecorderTally {
  dispatches: number;
  submits: number;
  /** Wall time inside submit() (parameter writes, finish, queue.submit). */
  submitMs: number;
  profiler?: KernelProfiler;
}

let tally: RecorderTally | undefined;

/** Opens (or with undefined closes) the process-wide RecorderTally. */
export function setRecorderTally(t: RecorderTally | undefined): void {
  tally = t;
}

const SLOT = 256; // >= minUniformBufferOffsetAlignment on every adapter we know (the spec maximum)
const SLOTS_PER_ARENA = 256;

/**
 * Records a sequence of kernel dispatches and buffer copies into one command buffer (one submit
 * per forward). Uniform parameters of all dispatches are packed into shared uniform buffers at
 * 256-byte offsets and written once, just before the submit.
 *
 * Why the parameter arenas and bind groups persist: a decode step dispatches the same kernels on the
 * same buffers every time, so the KernelCache keeps the arenas (handed out in the same order to every
 * recorder) and the bind groups that bind them; a step then creates no GPU objects at all. Reusing an
 * arena right after a submit is safe because queue.writeBuffer is ordered with submits on the queue:
 * the next step's parameters land after the previous step's dispatches have read theirs.
 */
export class Recorder {
  private encoder: GPUCommandEncoder;
  private pass: GPUComputePassEncoder | undefined;
  /** The pipeline last set on `pass`. */
  private passPipeline: GPUComputePipeline | undefined;
  private readonly arenas: ParamArena[] = [];
  readonly temporaries: GPUBuffer[] = [];
  dispatches = 0;
  /** When set, every dispatch runs in its own pass with timestamps (src/gpu/profiler.ts). */
  profiler?: KernelProfiler;
  /** Dispatches since the last submit, for the tally (owners may reset `dispatches` themselves). */
  private unsubmitted = 0;

  constructor(
    readonly device: GPUDevice,
    readonly kernels: KernelCache,
    label = 'forward',
  ) {
    this.encoder = device.createCommandEncoder({ label });
    this.profiler = tally?.profiler;
  }

  /**
   * Packs the parameter block of `shader` by field name: the layout is that shader's
   * `struct Params` (src/gpu/params-layout.ts), so a missing or unknown field throws here. The
   * binding must go to a dispatch of a shader with the same struct (run() checks it).
   */
  params(shader: string, values: ParamValues): Binding {
    const layout = paramsLayout(shader);
    const size = boundSize(layout);
    if (size > SLOT) throw new Error(`${shader}: parameter block of ${size} bytes is larger than ${SLOT}`);
    let arena = this.arenas[this.arenas.length - 1];
    if (!arena || arena.used === SLOTS_PER_ARENA) {
      arena = this.kernels.freeArenas.shift() ?? this.newArena();
      arena.used = 0;
      this.arenas.push(arena);
    }
    const offset = arena.used * SLOT;
    packParams(layout, values, arena.view, offset);
    arena.used++;
    return tagParams({ buffer: arena.buffer, offset, size }, shader);
  }

  private newArena(): ParamArena {
    const buffer = this.device.createBuffer({
      label: 'params',
      size: SLOT * SLOTS_PER_ARENA,
      usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST,
    });
    const data = new ArrayBuffer(SLOT * SLOTS_PER_ARENA);
    return { buffer, data, view: new DataView(data), used: 0 };
  }

  /** One compute dispatch: `bindings[0]` is normally the params block. */
  run(
    shader: string,
    entry: string,
    constants: Record<string, number>,
    bindings: (Binding | undefined)[],
    workgroups: number,
  ): void {
    checkParams(shader, bindings[0]);
    const pipeline = this.kernels.pipeline(shader, constants, entry);
    if (this.profiler) {
      this.endPass();
      const pass = this.encoder.beginComputePass({
        timestampWrites: this.profiler.slot(`${shader.replace(/\.wgsl$/, '')}.${entry}`, workgroups),
      });
      dispatch(this.device, pass, pipeline, bindings, workgroups, this.kernels.bindGroups);
      pass.end();
    } else {
      if (!this.pass) {
        this.pass = this.encoder.beginComputePass();
        this.passPipeline = undefined;
      }
      // A pass keeps its pipeline between dispatches: setting it again is a call into WebGPU for nothing
      // (q, k and v norms, or projections of one shape, run one pipeline in a row).
      const same = pipeline === this.passPipeline;
      dispatch(this.device, this.pass, pipeline, bindings, workgroups, this.kernels.bindGroups, same);
      this.passPipeline = pipeline;
    }
    this.dispatches++;
    this.unsubmitted++;
  }

  copy(src: GPUBuffer, srcOffset: number, dst: GPUBuffer, dstOffset: number, size: number): void {
    if (size === 0) return;
    this.endPass();
    this.encoder.copyBufferToBuffer(src, srcOffset, dst, dstOffset, size);
  }

  private endPass(): void {
    this.pass?.end();
    this.pass = undefined;
  }

  /** Writes the parameter arenas, submits, and starts a fresh encoder for further recording. */
  submit(): void {
    const t0 = tally ? performance.now() : 0;
    this.endPass();
    this.profiler?.resolve(this.encoder);
    for (const a of this.arenas) this.device.queue.writeBuffer(a.buffer, 0, a.data, 0, a.used * SLOT);
    this.device.queue.submit([this.encoder.finish()]);
    // Back to the pool in the order they were taken, so the next recorder binds the same slots.
    this.kernels.freeArenas.unshift(...this.arenas);
    this.arenas.length = 0;
    const done = this.temporaries.splice(0);
    if (done.length) void this.device.queue.onSubmittedWorkDone().then(() => done.forEach((b) => b.destroy()));
    this.encoder = this.device.createCommandEncoder({ label: 'forward' });
    if (tally) {
      tally.dispatches += this.unsubmitted;
      tally.submits++;
      tally.submitMs += performance.now() - t0;
    }
    this.unsubmitted = 0;
  }
}
