/**
 * GPU timing for the benchmark (browser-safe: plain WebGPU).
 *
 * A measurement records the engine's own dispatches (through src/model/ops.ts and the engine's
 * Recorder) once, then replays them `iters` times inside ONE compute pass of ONE command buffer, so
 * that per-submit overhead is amortised. The pass carries timestamp writes when the device has
 * 'timestamp-query'; the wall clock around queue.submit -> queue.onSubmittedWorkDone() is always
 * taken too. The method reported says which one a figure comes from.
 */
import { KernelCache, dispatch } from '../gpu/kernels.ts';
import { CaptureRecorder, type Dispatch } from '../gpu/capture-recorder.ts';
import type { Recorder } from '../gpu/recorder.ts';

export { CaptureRecorder, type Dispatch } from '../gpu/capture-recorder.ts';

export type TimingMethod = 'timestamp-query' | 'wall-clock';

export interface Timing {
  /** Seconds per iteration by the method in `method`. */
  seconds: number;
  method: TimingMethod;
  /** Seconds per iteration by the wall clock (submit to onSubmittedWorkDone), always measured. */
  wallSeconds: number;
  iters: number;
  /** Dispatches per iteration. */
  dispatches: number;
}

export interface TimerOptions {
  /** Aim for about this many seconds of GPU work per measurement (after one warm-up run). */
  targetSeconds: number;
  /** Cap on iterations per measurement. */
  maxIters: number;
  /** Use timestamps when the device has them (false: wall clock only). */
  timestamps: boolean;
  /**
   * Timed runs per measurement; the fastest counts (default 3). Shared and virtual machines slow down
   * for seconds at a time; the fastest run is the adapter's own speed, for kernels and yardsticks alike.
   */
  repeats?: number;
}

export class GpuTimer {
  readonly kernels: KernelCache;
  private readonly querySet?: GPUQuerySet;
  private readonly resolve?: GPUBuffer;
  /** Set when timestamp results looked unusable once: later measurements use the wall clock. */
  timestampProblem?: string;

  constructor(
    readonly device: GPUDevice,
    readonly opts: TimerOptions,
    kernels?: KernelCache,
  ) {
    this.kernels = kernels ?? new KernelCache(device);
    if (opts.timestamps && device.features.has('timestamp-query')) {
      this.querySet = device.createQuerySet({ type: 'timestamp', count: 2 });
      this.resolve = device.createBuffer({
        label: 'bench-timestamps',
        size: 16,
        usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC,
      });
    }
  }

  get method(): TimingMethod {
    return this.querySet && !this.timestampProblem ? 'timestamp-query' : 'wall-clock';
  }

  /** Times the dispatches that `record` makes on a Recorder (ops.ts calls), replayed as measureDispatches does. */
  async measure(record: (rec: Recorder) => void): Promise<Timing> {
    const rec = new CaptureRecorder(this.device, this.kernels, 'bench');
    try {
      record(rec);
      return await this.measureDispatches(rec.captured);
    } finally {
      rec.release();
    }
  }

  /**
   * A warm-up run (first touch of memory; its wall time gives a first iteration count); when that
   * run is short, a second warm-up of about half the target (GPUs run fresh buffers and idle clocks
   * slowly for a while), timed where timestamps exist: the iteration count for opts.targetSeconds
   * comes from its GPU time per iteration (a single submit's wall time is mostly the submit and the
   * wait, ~1 ms on a GPU, which made a 20 us kernel run only a few iterations, a burst too short for
   * the GPU's clocks and too coarse for its timestamps); then one timed submit of `iters` replays in one
   * pass, repeated opts.repeats times (the fastest counts). When the first run alone exceeds the target,
   * single-iteration timed runs follow it.
   */
  async measureDispatches(ops: Dispatch[]): Promise<Timing> {
    const warm = await this.runOnce(ops, 1, false);
    let per = Math.max(warm.wallSeconds, 1e-6);
    const fit = (seconds: number) => Math.max(1, Math.min(this.opts.maxIters, Math.round(seconds / per)));
    if (per < this.opts.targetSeconds / 4) {
      const second = await this.runOnce(ops, fit(this.opts.targetSeconds / 2), true);
      if (second.method === 'timestamp-query') per = Math.max(second.seconds, 1e-9);
    }
    const iters = fit(this.opts.targetSeconds);
    let t = await this.runOnce(ops, iters, true);
    for (let r = 1; r < (this.opts.repeats ?? 3); r++) {
      const again = await this.runOnce(ops, iters, true);
      if (again.seconds < t.seconds) t = again;
    }
    return { ...t, iters, dispatches: ops.length };
  }

  private async runOnce(ops: Dispatch[], iters: number, timed: boolean): Promise<Omit<Timing, 'iters' | 'dispatches'>> {
    const device = this.device;
    const useTs = timed && this.method === 'timestamp-query';
    const enc = device.createCommandEncoder({ label: 'bench' });
    const pass = enc.beginComputePass(
      useTs
        ? { timestampWrites: { querySet: this.querySet!, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 } }
        : {},
    );
    for (let it = 0; it < iters; it++) {
      for (const c of ops) dispatch(device, pass, c.pipeline, c.bindings, c.workgroups);
    }
    pass.end();
    let readback: GPUBuffer | undefined;
    if (useTs) {
      readback = device.createBuffer({
        label: 'bench-ts-read',
        size: 16,
        usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.MAP_READ,
      });
      enc.resolveQuerySet(this.querySet!, 0, 2, this.resolve!, 0);
      enc.copyBufferToBuffer(this.resolve!, 0, readback, 0, 16);
    }
    device.pushErrorScope('validation');
    const t0 = performance.now();
    device.queue.submit([enc.finish()]);
    await device.queue.onSubmittedWorkDone();
    const wall = (performance.now() - t0) / 1000 / iters;
    const err = await device.popErrorScope();
    if (err) throw new Error(`benchmark dispatch failed: ${err.message}`);
    if (!readback) return { seconds: wall, wallSeconds: wall, method: 'wall-clock' };
    await readback.mapAsync(GPUMapMode.READ);
    const ts = new BigUint64Array(readback.getMappedRange().slice(0));
    readback.unmap();
    readback.destroy();
    const gpu = Number(ts[1] - ts[0]) / 1e9 / iters;
    // Sanity: a timestamp interval must be positive and cannot exceed the wall clock by much.
    if (!(gpu > 0) || gpu > wall * 1.5 + 1e-3) {
      this.timestampProblem = `timestamp interval ${gpu.toExponential(3)} s vs wall clock ${wall.toExponential(3)} s per iteration`;
      return { seconds: wall, wallSeconds: wall, method: 'wall-clock' };
    }
    return { seconds: gpu, wallSeconds: wall, method: 'timestamp-query' };
  }

  destroy(): void {
    this.querySet?.destroy();
    this.resolve?.destroy();
  }
}
