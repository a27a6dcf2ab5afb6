/**
 * Synthetic GPU operands for kernel benchmarks: an MLX-affine linear of any shape filled with
 * pseudo-random codes and plausible bf16 scales/biases, laid out exactly as uploadWeights lays out a
 * real one (row parts that fit one binding), and f32 activation buffers. Browser-safe.
 */
import type { AffineLinear, TensorRef } from '../format/model-description.ts';
import type { AffineBits } from '../format/quantization.ts';
import { bytesSource } from '../format/bytesource.ts';
import type { GpuLinear } from '../model/gpu-linear.ts';
import type { GpuTensor, RowPart } from '../gpu/upload.ts';
import { storageBuffer } from '../gpu/buffers.ts';
import { WeightTransposer, kMajorCols } from '../gpu/weight-layout.ts';

const CHUNK_WORDS = 1 << 20;

/** xorshift32 stream. */
function fillRandom(words: Uint32Array, state: { s: number }): void {
  let s = state.s;
  for (let i = 0; i < words.length; i++) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    words[i] = s >>> 0;
  }
  state.s = s;
}

/** Fills `buffer` (byteSize bytes, a multiple of 4) chunk by chunk with `fill`. */
function fillBuffer(device: GPUDevice, buffer: GPUBuffer, byteSize: number, fill: (w: Uint32Array) => void): void {
  const scratch = new Uint32Array(CHUNK_WORDS);
  for (let off = 0; off < byteSize; off += CHUNK_WORDS * 4) {
    const n = Math.min(CHUNK_WORDS, (byteSize - off) / 4);
    const view = scratch.subarray(0, n);
    fill(view);
    device.queue.writeBuffer(buffer, off, view.buffer, 0, n * 4);
  }
}

function ref(name: string, dtype: 'U32' | 'BF16', shape: number[]): TensorRef {
  const byteLength = shape.reduce((a, d) => a * d, 1) * (dtype === 'U32' ? 4 : 2);
  return {
    name,
    file: bytesSource(`${name} (synthetic, on the GPU only)`, new Uint8Array(0)),
    dtype,
    shape,
    offset: 0,
    byteLength,
  };
}

export interface SyntheticLinear extends GpuLinear {
  /** Bytes the kernel reads for the weights (codes + scales + biases). */
  weightBytes: number;
  destroy(): void;
}

/** An affine linear W [N, K] at `bits` with group size `gs`, split into parts like uploadWeights. */
export function syntheticAffine(
  device: GPUDevice,
  name: string,
  N: number,
  K: number,
  bits: AffineBits,
  gs: number,
  seed = 1,
): SyntheticLinear {
  if (K % gs !== 0 || (K * bits) % 32 !== 0)
    throw new Error(`${name}: K ${K} must be a multiple of the group size ${gs} and of ${32 / bits}`);
  const wordsPerRow = (K * bits) / 32;
  const groups = K / gs;
  const limit = Math.min(device.limits.maxStorageBufferBindingSize, device.limits.maxBufferSize);
  const rowsPerPart = Math.floor(limit / Math.max(wordsPerRow * 4, groups * 2));
  if (rowsPerPart < 1) throw new Error(`${name}: one row exceeds the binding limit`);
  const desc: AffineLinear = {
    kind: 'affine',
    name,
    outFeatures: N,
    inFeatures: K,
    bits,
    groupSize: gs,
    weight: ref(`${name}.weight`, 'U32', [N, wordsPerRow]),
    scales: ref(`${name}.scales`, 'BF16', [N, groups]),
    biases: ref(`${name}.biases`, 'BF16', [N, groups]),
  };
  // Per-group scale around the value that gives weights of std 1/sqrt(K) (as src/format/synthetic.ts).
  const L = 2 ** bits;
  const s0 = Math.sqrt(12 / (L * L - 1)) / Math.sqrt(K);
  const bf16 = (x: number) => new Uint32Array(Float32Array.of(x).buffer)[0] >>> 16;
  const state = { s: (seed * 2654435761) >>> 0 || 1 };
  const buffers: GPUBuffer[] = [];
  const tensor = (t: TensorRef, rowBytes: number, fill: (w: Uint32Array) => void): GpuTensor => {
    const parts: RowPart[] = [];
    for (let rowStart = 0; rowStart < N; rowStart += rowsPerPart) {
      const rows = Math.min(rowsPerPart, N - rowStart);
      const size = Math.ceil((rows * rowBytes) / 4) * 4;
      const buffer = storageBuffer(device, size, `${t.name}[${rowStart}:${rowStart + rows}]`);
      buffers.push(buffer);
      fillBuffer(device, buffer, size, fill);
      parts.push({ rowStart, rows, buffer });
    }
    return { name: t.name, rows: N, parts };
  };
  const weight = tensor(desc.weight, wordsPerRow * 4, (w) => fillRandom(w, state));
  // Scales and biases: word i holds two bf16 values; pick from 16 levels so every (s, b) pair is centred.
  const sb = (bias: boolean) => (w: Uint32Array) => {
    fillRandom(w, state);
    for (let i = 0; i < w.length; i++) {
      const lo = s0 * (0.75 + ((w[i] & 15) / 15) * 0.5);
      const hi = s0 * (0.75 + (((w[i] >>> 4) & 15) / 15) * 0.5);
      const f = (s: number) => bf16(bias ? (-s * (L - 1)) / 2 : s);
      w[i] = (f(lo) | (f(hi) << 16)) >>> 0;
    }
  };
  const scales = tensor(desc.scales, groups * 2, sb(false));
  const biases = tensor(desc.biases, groups * 2, sb(true));
  const weightBytes = N * (wordsPerRow * 4 + groups * 4);
  return { desc, weight, scales, biases, weightBytes, destroy: () => buffers.forEach((b) => b.destroy()) };
}

/** An f32 buffer of `floats` values drawn uniformly from [-1, 1). */
export function randomF32(device: GPUDevice, floats: number, label: string, seed = 7): GPUBuffer {
  const buffer = storageBuffer(device, floats * 4, label);
  const state = { s: (seed * 2246822519) >>> 0 || 1 };
  fillBuffer(device, buffer, floats * 4, (w) => {
    fillRandom(w, state);
    const f = new Float32Array(w.buffer, w.byteOffset, w.length);
    for (let i = 0; i < w.length; i++) f[i] = (w[i] >>> 8) / 8388608 - 1;
  });
  return buffer;
}

/**
 * A copy of a synthetic linear made on the GPU (same values, other memory). The matmul benchmark
 * cycles through copies whose total exceeds the GPU's last-level cache, so that back-to-back replays
 * read the weights from memory, as a decode step does, instead of from a warm cache.
 */
export function copyLinear(device: GPUDevice, lin: SyntheticLinear): SyntheticLinear {
  const buffers: GPUBuffer[] = [];
  const enc = device.createCommandEncoder({ label: 'bench-copy-linear' });
  const copy = (t: GpuTensor): GpuTensor => ({
    ...t,
    parts: t.parts.map((p) => {
      const buffer = storageBuffer(device, p.buffer.size, `${p.buffer.label} (copy)`);
      buffers.push(buffer);
      enc.copyBufferToBuffer(p.buffer, 0, buffer, 0, p.buffer.size);
      return { ...p, buffer };
    }),
  });
  const out: SyntheticLinear = {
    ...lin,
    weight: copy(lin.weight),
    scales: copy(lin.scales!),
    biases: copy(lin.biases!),
    destroy: () => buffers.forEach((b) => b.destroy()),
  };
  device.queue.submit([enc.finish()]);
  return out;
}

/**
 * The linear in the k-major layout (src/gpu/weight-layout.ts, as uploadWeights lays out a real one on GPUs):
 * a new linear with the same values, made on the GPU; `lin` stays as it was.
 */
export function kMajorLinear(device: GPUDevice, lin: SyntheticLinear): SyntheticLinear {
  const d = lin.desc as AffineLinear;
  const transposer = new WeightTransposer(device);
  const buffers: GPUBuffer[] = [];
  const move = (t: GpuTensor, kind: 'codes' | 'groups', cols: number): GpuTensor => ({
    ...t,
    parts: t.parts.map((p) => {
      const buffer = storageBuffer(device, p.buffer.size, `${p.buffer.label} k-major`);
      buffers.push(buffer);
      transposer.transpose(kind, p.buffer, buffer, p.rows, cols);
      return { ...p, buffer };
    }),
  });
  const cols = kMajorCols(d);
  return {
    ...lin,
    weight: move(lin.weight, 'codes', cols.codes),
    scales: move(lin.scales!, 'groups', cols.groups),
    biases: move(lin.biases!, 'groups', cols.groups),
    layout: 'k-major',
    destroy: () => buffers.forEach((b) => b.destroy()),
  };
}
