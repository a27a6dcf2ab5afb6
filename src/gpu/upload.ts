import type { TensorRef } from '../format/safetensors.ts';
import { GpuError } from './errors.ts';
import { storageBuffer, writeBytes } from './buffers.ts';
import type { CancelToken, ProgressFn } from '../util/cancel.ts';

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
}
export interface GpuTensor {
  name: string;
  rows: number;
  parts: RowPart[];
}

const CHUNK_BYTES = 8 << 20;

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

  /** Largest number of rows per part so that every listed tensor's part fits one binding. */
  rowsPerPart(refs: TensorRef[]): number {
    const limit = Math.min(this.device.limits.maxStorageBufferBindingSize, this.device.limits.maxBufferSize);
    const rowBytes = Math.max(...refs.map((r) => r.byteLength / r.shape[0]));
    const rows = Math.floor(limit / rowBytes);
    if (rows < 1) {
      throw new GpuError(
        'limits',
        `One row of ${refs[0].name} (${rowBytes} bytes) exceeds the binding limit of ${limit} bytes.`,
      );
    }
    return rows;
  }

  /** Uploads `ref` split into parts of `rowsPerPart` rows (all rows in one part when it fits). */
  async upload(ref: TensorRef, rowsPerPart = this.rowsPerPart([ref])): Promise<GpuTensor> {
    const rows = ref.shape.length === 0 ? 1 : ref.shape[0];
    const rowBytes = ref.byteLength / rows;
    const parts: RowPart[] = [];
    for (let rowStart = 0; rowStart < rows; rowStart += rowsPerPart) {
      const n = Math.min(rowsPerPart, rows - rowStart);
      const buffer = storageBuffer(this.device, n * rowBytes, `${ref.name}[${rowStart}:${rowStart + n}]`);
      this.buffers.push(buffer);
      await this.stream(ref, rowStart * rowBytes, n * rowBytes, buffer);
      parts.push({ rowStart, rows: n, buffer });
    }
    return { name: ref.name, rows, parts };
  }

  /** Counts a tensor uploaded by other means (e.g. widened on the CPU first) in the progress, and checks for a cancel. */
  countUploaded(bytes: number, what: string): void {
    this.cancel?.throwIfCancelled();
    this.done += bytes;
    this.report(what);
  }

  private async stream(ref: TensorRef, from: number, length: number, buffer: GPUBuffer): Promise<void> {
    for (let off = 0; off < length; off += CHUNK_BYTES) {
      this.cancel?.throwIfCancelled();
      const n = Math.min(CHUNK_BYTES, length - off);
      const bytes = await ref.file.read(ref.offset + from + off, n);
      if (bytes.byteLength !== n) {
        throw new Error(
          `${ref.file.name}: short read of tensor "${ref.name}" (${bytes.byteLength} of ${n} bytes): the file is truncated or changed.`,
        );
      }
      writeBytes(this.device, buffer, off, bytes);
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
