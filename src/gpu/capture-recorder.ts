/**
 * A Recorder that captures dispatches for replay instead of encoding them: the benchmark's timer
 * (src/bench/timer.ts) replays the engine's own dispatches many times in one pass.
 */
import type { Binding } from './kernels.ts';
import { Recorder, checkParams, tagParams } from './recorder.ts';
import { paramsBytes, paramsLayout, type ParamValues } from './params-layout.ts';

/** One dispatch to replay: the very pipeline the engine's kernel cache gives for it. */
export interface Dispatch {
  pipeline: GPUComputePipeline;
  /** What the pipeline is (shader#entry#constants), for reports. */
  key?: string;
  bindings: (Binding | undefined)[];
  workgroups: number;
}

/**
 * A Recorder that captures the dispatches ops.ts makes instead of encoding them, so they can be
 * replayed. Parameter blocks are packed exactly as Recorder.params packs them, but into uniform
 * buffers this class owns (alive until release()), since a replay outlives a Recorder's submit.
 * It is never submitted.
 */
export class CaptureRecorder extends Recorder {
  readonly captured: Dispatch[] = [];
  private readonly owned: GPUBuffer[] = [];

  override params(shader: string, values: ParamValues): Binding {
    const data = paramsBytes(paramsLayout(shader), values);
    const buffer = this.device.createBuffer({
      label: 'bench-params',
      size: data.byteLength,
      usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST,
    });
    this.device.queue.writeBuffer(buffer, 0, data);
    this.owned.push(buffer);
    return tagParams(buffer, shader);
  }

  override submit(): void {
    throw new Error('CaptureRecorder is replayed by GpuTimer, never submitted');
  }

  release(): void {
    this.owned.splice(0).forEach((b) => b.destroy());
    this.temporaries.splice(0).forEach((b) => b.destroy());
  }

  override run(
    shader: string,
    entry: string,
    constants: Record<string, number>,
    bindings: (Binding | undefined)[],
    workgroups: number,
  ): void {
    checkParams(shader, bindings[0]);
    this.captured.push({
      pipeline: this.kernels.pipeline(shader, constants, entry),
      key: `${shader}#${entry}#${JSON.stringify(constants)}`,
      bindings,
      workgroups,
    });
    this.dispatches++;
  }

  override copy(): void {
    throw new Error('CaptureRecorder: buffer copies are not benchmarked');
  }
}
