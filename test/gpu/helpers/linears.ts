/**
 * Random linears for the kernel tests, uploaded the way uploadWeights does (safetensors bytes ->
 * TensorRefs -> TensorUploader, split into row parts where asked), their float64 products, and the
 * error bound of each matmul kernel (see helpers/kernel-lab.ts on how bounds are counted).
 */
import { expect } from 'vitest';
import { TensorUploader } from '../../../src/gpu/upload.ts';
import type { Recorder } from '../../../src/gpu/recorder.ts';
import * as op from '../../../src/model/ops.ts';
import type { GpuLinear } from '../../../src/model/gpu-linear.ts';
import type { AffineLinear, DenseLinear } from '../../../src/format/model-description.ts';
import { writeSafetensors, type TensorToWrite } from '../../../src/format/safetensors-writer.ts';
import { readSafetensorsHeader } from '../../../src/format/safetensors.ts';
import { bytesSource } from '../../../src/format/bytesource.ts';
import { bf16ToNumber, f16ToNumber } from '../../../src/format/dtype.ts';
import { matvec } from '../../../src/reference/ops.ts';
import {
  affineMatmul,
  affineMatrix,
  affineMatvec,
  type AffineMatrix,
} from '../../../src/reference/quantized-matmul.ts';
import { bf16Trunc, bytesOf, expectSameBytes, randomF16Bits, range, U, type Lab, type Rand } from './kernel-lab.ts';

/** Uploads tensors the way uploadWeights does: safetensors bytes -> TensorRefs -> TensorUploader (row parts). */
export async function uploadTensors(lab: Lab, tensors: TensorToWrite[], rowsPerPart?: number) {
  const file = writeSafetensors(tensors);
  const header = await readSafetensorsHeader(bytesSource('synthetic.safetensors', file));
  const refs = tensors.map((t) => header.tensors.find((h) => h.name === t.name)!);
  const up = new TensorUploader(lab.device, file.byteLength);
  const rows = rowsPerPart ?? up.rowsPerPart(refs);
  const gpu = [];
  for (const r of refs) gpu.push(await up.upload(r, rows));
  up.buffers.forEach((b) => lab.own(b));
  return { refs, gpu };
}

export interface AffineCase {
  N: number; // out features (rows of W)
  K: number; // in features
  bits: 2 | 4 | 8;
  gs: number;
  rowsPerPart?: number;
}
/** A linear on the GPU and its CPU twin (src/reference/quantized-matmul.ts: codes, scales, biases, dequantized w). */
export interface AffineWeights extends AffineMatrix {
  lin: GpuLinear;
}

/** A random MLX-affine linear (bf16 scales and biases centring the codes), uploaded in row parts. */
export async function affineLinear(lab: Lab, r: Rand, c: AffineCase): Promise<AffineWeights> {
  const { N, K, bits, gs } = c;
  const perWord = 32 / bits;
  const groups = K / gs;
  const codes = Uint32Array.from({ length: N * K }, () => r.int(1 << bits));
  const words = new Uint32Array((N * K) / perWord);
  for (let n = 0; n < N; n++) {
    for (let k = 0; k < K; k++) words[((n * K + k) / perWord) | 0] |= codes[n * K + k] << (bits * (k % perWord));
  }
  const sBits = new Uint16Array(N * groups);
  const bBits = new Uint16Array(N * groups);
  for (let i = 0; i < N * groups; i++) {
    const s = r.uniform(0.5, 1.5) * (0.1 / (1 << bits));
    sBits[i] = bf16Trunc(s);
    bBits[i] = bf16Trunc(-s * (1 << (bits - 1)) + r.normal(0.01));
  }
  const scales = Float64Array.from(sBits, bf16ToNumber);
  const biases = Float64Array.from(bBits, bf16ToNumber);
  const { refs, gpu } = await uploadTensors(
    lab,
    [
      { name: 'w.weight', dtype: 'U32', shape: [N, K / perWord], data: bytesOf(words) },
      { name: 'w.scales', dtype: 'BF16', shape: [N, groups], data: bytesOf(sBits) },
      { name: 'w.biases', dtype: 'BF16', shape: [N, groups], data: bytesOf(bBits) },
    ],
    c.rowsPerPart,
  );
  const desc: AffineLinear = {
    kind: 'affine',
    name: 'w',
    outFeatures: N,
    inFeatures: K,
    bits,
    groupSize: gs,
    weight: refs[0],
    scales: refs[1],
    biases: refs[2],
  };
  if (c.rowsPerPart !== undefined && c.rowsPerPart < N) expect(gpu[0].parts.length).toBe(Math.ceil(N / c.rowsPerPart));
  const cpu = affineMatrix(words, scales, biases, N, K, bits, gs);
  expect(cpu.codes).toEqual(codes);
  return { lin: { desc, weight: gpu[0], scales: gpu[1], biases: gpu[2] }, ...cpu };
}

export type DenseDtype = 'BF16' | 'F16' | 'F32';
/** A random dense linear [N, K] in `dtype`, uploaded in row parts; returns the exact values too. */
export async function denseLinear(
  lab: Lab,
  r: Rand,
  N: number,
  K: number,
  dtype: DenseDtype,
  rowsPerPart?: number,
): Promise<{ lin: GpuLinear; w: Float64Array }> {
  let data: Uint8Array;
  let w: Float64Array;
  if (dtype === 'F32') {
    const f = Float32Array.from({ length: N * K }, () => r.normal(0.2));
    w = Float64Array.from(f);
    data = bytesOf(f);
  } else {
    const bits = Uint16Array.from({ length: N * K }, () =>
      dtype === 'BF16' ? bf16Trunc(r.normal(0.2)) : randomF16Bits(r),
    );
    w = Float64Array.from(bits, dtype === 'BF16' ? bf16ToNumber : f16ToNumber);
    data = bytesOf(bits);
  }
  const { refs, gpu } = await uploadTensors(lab, [{ name: 'w.weight', dtype, shape: [N, K], data }], rowsPerPart);
  if (rowsPerPart !== undefined && rowsPerPart < N) expect(gpu[0].parts.length).toBe(Math.ceil(N / rowsPerPart));
  const desc: DenseLinear = { kind: 'dense', name: 'w', outFeatures: N, inFeatures: K, weight: refs[0] };
  return { lin: { desc, weight: gpu[0] }, w };
}

/**
 * y = W x for one row of x (at xOff) by the CPU twin (src/reference/quantized-matmul.ts affineMatvec),
 * with the magnitudes of what the kernels add up: `mag` for codes as stored (matmul.wgsl affine) and
 * `magC` for centred codes (the exact kernels lanes, tile and coop).
 */
export function affineReference(
  A: AffineWeights,
  _c: AffineCase,
  x: Float64Array,
  xOff: number,
): { ref: Float64Array; mag: Float64Array; magC: Float64Array } {
  const o = affineMatvec(A, x, xOff);
  return { ref: o.y, mag: o.mag, magC: o.magCentred };
}

/** M rows of x (row m at m * xStride) through an affine linear on the CPU (affineMatmul): the reference and both magnitudes. */
export function affineRows(
  A: AffineWeights,
  c: AffineCase,
  x: Float64Array,
  M: number,
  xStride = c.K,
): { ref: Float64Array; mag: Float64Array; magC: Float64Array } {
  const o = affineMatmul(A, x, M, xStride);
  return { ref: o.y, mag: o.mag, magC: o.magCentred };
}

/**
 * Error bound of the quantized matmul kernels, per output, as a magnitude (`mag` or `magC`) times a
 * rounding count times U. Counted from each shader's arithmetic:
 * - affine (matmul.wgsl): stored codes; per group sum(q x) and sum(x) are Neumaier sums of rounded
 *   products (2U), scale * . and bias * . round once, the total over groups is a Neumaier sum (1U, its
 *   final s + c): 4U, plus 1U for the second-order terms of the compensated sums (n U^2): 5U of `mag`.
 * - lanes (matmul_lanes.wgsl main): centred codes; per chunk of 32 weights the products (1) and their
 *   fixed tree of depth 3 (3), the group's gs/32 chunks added in order (gs/32 - 1), the vec4's
 *   components added as (c0 + c1) + (c2 + c3) (2): gs/32 + 5 roundings on sum|q x|;
 * - tile (matmul_lanes.wgsl tile): per 8 weights two vec4 dot products (product 1, dot's adds up to 3)
 *   added (1), then added in order over the group's gs/8 blocks (gs/8): gs/8 + 5;
 * - coop (matmul_coop.wgsl): four position sums, each a chain of gs/4 fma (gs/4), combined as
 *   (a0 + a1/16) + (a2/256 + a3/4096) (2): gs/4 + 2;
 * then, for the three exact kernels, scale * D (1), the adjusted bias' rounding and bias' * sx with sx
 * a Neumaier sum (3, on |bias'| sum|x|, covered by the larger count), the Neumaier totals over groups
 * and (coop) over slices (1) and second-order terms (1): the group count + 3, of `magC`.
 * A linear a kernel cannot run (2-bit, group size 128 for coop, odd x strides) falls back to affine,
 * so a forced kernel's bound is the larger of its own and affine's.
 */
export function quantizedTol(kernel: op.AffineKernel, gs: number): number {
  const chain = { affine: 0, lanes: gs / 32 + 5, tile: gs / 8 + 5, coop: gs / 4 + 2 }[kernel];
  return (chain + 3) * U;
}
export const AFFINE_TOL = 5 * U;
/** The bound of `kernel` (undefined: whichever the engine picks, lanes or coop for steps) for one output. */
export function quantizedBound(kernel: op.AffineKernel | undefined, gs: number, mag: number, magC: number): number {
  const own =
    kernel === undefined
      ? Math.max(quantizedTol('lanes', gs), quantizedTol('coop', gs))
      : kernel === 'affine'
        ? 0
        : quantizedTol(kernel, gs);
  return Math.max(own * magC, AFFINE_TOL * mag);
}
/** quantizedBound for every output, as the `mag` argument of expectClose (tol 1). */
export function quantizedBounds(
  kernel: op.AffineKernel | undefined,
  gs: number,
  o: { mag: Float64Array; magC: Float64Array },
): Float64Array {
  return o.mag.map((m, i) => quantizedBound(kernel, gs, m, o.magC[i]));
}

/**
 * Dense matmul (matmul_dense.wgsl main): a Neumaier sum of rounded products: 1U (products) + 1U (the
 * final s + c) of sum|w x|, plus 1U for second-order terms (K U^2 per term).
 */
export const DENSE_TOL = 3 * U;

/** M rows of x through `lin` together, and each row alone (M = 1): identical bytes (f32 and bf16 runs). */
export async function expectRowInvariantMatmul(
  lab: Lab,
  r: Rand,
  lin: GpuLinear,
  M: number,
  K: number,
  N: number,
  kernel?: op.AffineKernel,
  kernels = lab.kernels,
): Promise<void> {
  const x = r.f32s(M * K);
  const mm = (rec: Recorder, xb: GPUBuffer, y: GPUBuffer, rows: op.Rows) =>
    kernel ? op.matmul(rec, lin, xb, y, rows, K, N, kernel) : op.matmul(rec, lin, xb, y, rows);
  for (const round of [false, true]) {
    const block = lab.sentinel(M * N);
    const alone = range(M).map(() => lab.sentinel(N));
    await lab.run((rec) => {
      mm(rec, lab.f32(x), block, { M, round });
      alone.forEach((y, m) => mm(rec, lab.f32(x.subarray(m * K, (m + 1) * K)), y, { M: 1, round }));
    }, kernels);
    const all = await lab.bytes(block, M * N);
    for (let m = 0; m < M; m++)
      expectSameBytes(
        `matmul${kernel ? `.${kernel}` : ''} M=${M} row ${m}${round ? ' bf16' : ''}`,
        all.subarray(m * N * 4, (m + 1) * N * 4),
        await lab.bytes(alone[m], N),
      );
  }
}

/** Dense y = W x for M rows on the CPU, with the magnitude sum|w x| per output. */
export function denseRows(
  w: Float64Array,
  N: number,
  K: number,
  x: Float64Array,
  M: number,
): { ref: Float64Array; mag: Float64Array } {
  const ref = new Float64Array(M * N),
    mag = new Float64Array(M * N);
  const absW = w.map(Math.abs),
    absX = x.map(Math.abs);
  for (let m = 0; m < M; m++) {
    ref.set(matvec(w, N, K, x, m * K), m * N);
    mag.set(matvec(absW, N, K, absX, m * K), m * N);
  }
  return { ref, mag };
}
