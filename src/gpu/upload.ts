import type { TensorRef } from '../format/safetensors.ts';
import { GpuError } from './errors.ts';
import { storageBuffer, writeBytes } from './buffers.ts';
import type { CancelToken, ProgressFn } from '../util/cancel.ts';
import type { WeightTransposer } from './weight-layout.ts';

/**
 * Streams tensors from their files into GPU buffers in bounded chunks (the JS heap never holds more
 * than one chunk per tensor), with progress and cancellation. A 2-D tensor larger than the device's
 * maxStorageBufferBindingSize is split by rows into parts; kernels are dispatched once per part with
 * the part's first row as an offset, which leaves each row's arithmetic unchanged.
 */
export interface RowPart {
  rowStart: number;
  rows: number;
  buffer: GPUBuffer;
  /**
   * Where the part lies in `buffer` when it shares it with other tensors (TensorUploader.uploadStacked):
   * byte offset and size. Absent: the part is the whole buffer.
   */
  view?: { offset: number; size: number };
}

/** A part as a binding: the whole buffer, or its view of a shared one. */
export function partBinding(p: RowPart): GPUBuffer | { buffer: GPUBuffer; offset: number; size: number } {
  return p.view ? { buffer: p.buffer, ...p.view } : p.buffer;
}
export interface GpuTensor {
  name: string;
  rows: number;
  parts: RowPart[];
}

/** How TensorUploader.upload rewrites a tensor into the k-major layout: units of `kind`, `cols` to a row. */
export interface KMajorUpload {
  kind: 'codes' | 'groups';
  cols: number;
  transposer: WeightTransposer;
}

const CHUNK_BYTES = 8 << 20;

/** The limits a buffer that is bound whole as storage must fit: both. */
export type BindingLimits = Pick<GPUSupportedLimits, 'maxStorageBufferBindingSize' | 'maxBufferSize'>;

/** The most bytes one bound buffer may hold. */
export function bindingLimit(limits: BindingLimits): number {
  return Math.min(limits.maxStorageBufferBindingSize, limits.maxBufferSize);
}

/** The bytes of the widest row among `refs` (a scalar is one row). */
export function widestRowBytes(refs: TensorRef[]): number {
  return Math.max(...refs.map((r) => r.byteLength / (r.shape.length === 0 ? 1 : r.shape[0])));
}

/**
 * The rule by which tensors are split by rows (TensorUploader.upload; the memory plan and the k-major rewrite's
 * extra part count with it): tensors that share one row partition (a linear's codes, scales and biases) take the
 * most rows whose part of the widest of them fits one binding. 0 when one row does not fit.
 */
export function rowsPerBinding(refs: TensorRef[], limits: BindingLimits): number {
  return Math.floor(bindingLimit(limits) / widestRowBytes(refs));
}

export class TensorUploader {
  private done = 0;
  private readonly t0 = performance.now();
  readonly buffers: GPUBuffer[] = [];

  constructor(
    private readonly device: GPUDevice,
    private readonly totalBytes: number,
    private readonly onProgress?: ProgressFn,
    private readonly cancel?: CancelToken,
  ) {}

  get bytesDone(): number {
    return this.done;
  }

  /** Largest number of rows per part so that every listed tensor's part fits one binding (rowsPerBinding). */
  rowsPerPart(refs: TensorRef[]): number {
    const rows = rowsPerBinding(refs, this.device.limits);
    if (rows < 1) {
      throw new GpuError(
        'limits',
        `One row of ${refs[0].name} (${widestRowBytes(refs)} bytes) exceeds the binding limit of ${bindingLimit(this.device.limits)} bytes.`,
        'This checkpoint needs a larger buffer than this adapter allows.',
      );
    }
    return rows;
  }

  /**
   * Uploads `ref` split into parts of `rowsPerPart` rows (all rows in one part when it fits); with `kMajor`,
   * each part is then rewritten into the k-major layout (src/gpu/weight-layout.ts: one part's memory more,
   * for the time of the copy).
   */
  async upload(ref: TensorRef, rowsPerPart = this.rowsPerPart([ref]), kMajor?: KMajorUpload): Promise<GpuTensor> {
    const rows = ref.shape.length === 0 ? 1 : ref.shape[0];
    const rowBytes = ref.byteLength / rows;
    const parts: RowPart[] = [];
    for (let rowStart = 0; rowStart < rows; rowStart += rowsPerPart) {
      const n = Math.min(rowsPerPart, rows - rowStart);
      const label = `${ref.name}[${rowStart}:${rowStart + n}]`;
      let buffer = storageBuffer(this.device, n * rowBytes, label);
      this.buffers.push(buffer);
      await this.stream(ref, rowStart * rowBytes, n * rowBytes, buffer);
      if (kMajor) {
        const moved = storageBuffer(this.device, n * rowBytes, `${label} k-major`);
        this.buffers.push(moved);
        kMajor.transposer.transpose(kMajor.kind, buffer, moved, n, kMajor.cols);
        this.buffers.splice(this.buffers.indexOf(buffer), 1);
        buffer.destroy();
        buffer = moved;
      }
      parts.push({ rowStart, rows: n, buffer });
    }
    return { name: ref.name, rows, parts };
  }

  /**
   * Whether uploadStacked can stack these tensors: 2-D, rows of equal length, each but the last a whole
   * number of the device's storage binding offset alignment (so that each can be bound on its own), and
   * all of them within one binding.
   */
  canStack(refs: TensorRef[]): boolean {
    const lim = this.device.limits;
    const rowBytes = refs[0].byteLength / refs[0].shape[0];
    return (
      refs.every((r) => r.shape.length === 2 && r.byteLength / r.shape[0] === rowBytes) &&
      refs.slice(0, -1).every((r) => r.byteLength % lim.minStorageBufferOffsetAlignment === 0) &&
      refs.reduce((a, r) => a + r.byteLength, 0) <= Math.min(lim.maxStorageBufferBindingSize, lim.maxBufferSize)
    );
  }

  /**
   * Uploads tensors with rows of equal length into ONE buffer, one after the other (canStack must hold):
   * `whole`, their rows stacked as one tensor, and `each` tensor as a view of it. The memory is that of the
   * tensors alone; kernels bind either.
   */
  async uploadStacked(refs: TensorRef[], name: string): Promise<{ whole: GpuTensor; each: GpuTensor[] }> {
    if (!this.canStack(refs)) throw new Error(`${name}: these tensors cannot share one buffer`);
    const bytes = refs.reduce((a, r) => a + r.byteLength, 0);
    const rows = refs.reduce((a, r) => a + r.shape[0], 0);
    const buffer = storageBuffer(this.device, bytes, name);
    this.buffers.push(buffer);
    const each: GpuTensor[] = [];
    let offset = 0;
    for (const r of refs) {
      await this.stream(r, 0, r.byteLength, buffer, offset);
      each.push({
        name: r.name,
        rows: r.shape[0],
        parts: [{ rowStart: 0, rows: r.shape[0], buffer, view: { offset, size: r.byteLength } }],
      });
      offset += r.byteLength;
    }
    return { whole: { name, rows, parts: [{ rowStart: 0, rows, buffer }] }, each };
  }

  /** Counts a tensor uploaded by other means (e.g. widened on the CPU first) in the progress, and checks for a cancel. */
  countUploaded(bytes: number, what: string): void {
    this.cancel?.throwIfCancelled();
    this.done += bytes;
    this.report(what);
  }

  private async stream(ref: TensorRef, from: number, length: number, buffer: GPUBuffer, at = 0): Promise<void> {
    for (let off = 0; off < length; off += CHUNK_BYTES) {
      this.cancel?.throwIfCancelled();
      const n = Math.min(CHUNK_BYTES, length - off);
      const bytes = await ref.file.read(ref.offset + from + off, n);
      if (bytes.byteLength !== n) {
        throw new Error(
          `${ref.file.name}: short read of tensor "${ref.name}" (${bytes.byteLength} of ${n} bytes): the file is truncated or changed.`,
        );
      }
      writeBytes(this.device, buffer, at + off, bytes);
      this.done += n;
      this.report(ref.name);
    }
  }

  private report(what: string): void {
    if (!this.onProgress) return;
    const s = (performance.now() - this.t0) / 1000;
    const rate = this.done / Math.max(s, 1e-3);
    const eta = (this.totalBytes - this.done) / Math.max(rate, 1);
    const mb = (b: number) => (b / 1e6).toFixed(b < 1e8 ? 1 : 0);
    this.onProgress({
      phase: 'upload',
      done: this.done,
      total: this.totalBytes,
      detail: `${mb(this.done)} of ${mb(this.totalBytes)} MB, ${mb(rate)} MB/s, ETA ${eta.toFixed(0)} s (${what})`,
    });
  }
}
