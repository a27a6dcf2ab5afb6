/**
 * CPU twin of shaders/matmul_mlx.wgsl: MLX's quantized matvec kernels (mlx/backend/metal/kernels/
 * quantized.h qmv_impl, qmv_fast_impl, qmv_quad_impl, qmv_wide_impl) in float32, operation for
 * operation in the same order (Math.fround after every * and +), so the WGSL kernels can be checked
 * against it byte for byte (test/gpu/mlx-policies.test.ts). Unlike the float64 reference this is not an
 * oracle of the true product: it is the order itself, written a second time independently of WGSL.
 * The orders and the assumptions behind them (simd_sum as a shuffle-down ladder, which of MLX's
 * a * b + c expressions an fma contraction fuses, bfloat adds in load_vector) are described once, next to
 * the WGSL. The fused expressions are computed here by another route than the WGSL's (fmaF32: exact in
 * float64, then rounded once), so the byte comparison also checks the WGSL's error-free construction.
 */
import type { AffineMatrix } from './quantized-matmul.ts';
import { roundBf16 } from '../numerics/bf16.ts';

const f = Math.fround;

export { roundBf16 } from '../numerics/bf16.ts';

const f32Bits = new Float32Array(1);
const u32Bits = new Uint32Array(f32Bits.buffer);

/** The float32 next to r (nonzero or zero) in the direction of s. */
function nextToward(r: number, s: number): number {
  if (r === 0) return s > 0 ? 2 ** -149 : -(2 ** -149);
  f32Bits[0] = r;
  u32Bits[0] += s > r === r > 0 ? 1 : -1;
  return f32Bits[0];
}

/**
 * a * b + c for float32 a, b, c, rounded once to float32 (ties to even), as a fused multiply-add. The
 * product of two float32 is exact in float64 (48 significant bits); p + c rounds in float64 to s with
 * remainder t (2Sum, exact). Rounding s to float32 is the answer unless s lies exactly halfway between two
 * float32, where the sign of t (p + c = s + t) decides; |t| is too small to cross any other float32 boundary.
 */
export function fmaF32(a: number, b: number, c: number): number {
  const p = a * b;
  const s = p + c;
  const bb = s - p;
  const t = p - (s - bb) + (c - bb);
  const r = f(s);
  if (t === 0 || r === s || !Number.isFinite(s)) return r;
  const o = nextToward(r, s);
  if ((r + o) / 2 !== s) return r;
  return t > 0 === o > r ? o : r;
}

/** MLX's `a * b + c` in float32: fused when its compile contracts (MlxMachine.fma), else two roundings. */
const muladd = (fused: boolean) => (a: number, b: number, c: number) => (fused ? fmaF32(a, b, c) : f(f(a * b) + c));

/** The x rows and output precision of one call. */
export interface MlxRowsIn {
  x: Float32Array;
  M: number;
  xStride: number;
  /** bf16 activations: bfloat adds in load_vector, outputs rounded to bf16. */
  round: boolean;
  /** MLX's a * b + c expressions fused (the +fma policies); default false. */
  fma?: boolean;
}

interface Row {
  codes: Uint32Array;
  scale: (g: number) => number;
  bias: (g: number) => number;
}

/** Output row n: its codes and its groups' scales and biases (bf16 values, exact in f32). */
function row(a: AffineMatrix, n: number): Row {
  const groups = a.K / a.groupSize;
  return {
    codes: a.codes.subarray(n * a.K, (n + 1) * a.K),
    scale: (g) => f(a.scales[n * groups + g]),
    bias: (g) => f(a.biases[n * groups + g]),
  };
}

/** The shuffle-down ladder: p[l] += p[l + h] for h = p.length / 2 .. 1; returns lane 0. */
function ladder(p: number[]): number {
  for (let h = p.length >> 1; h >= 1; h >>= 1) for (let l = 0; l < h; l++) p[l] = f(p[l] + p[l + h]);
  return p[0];
}

/** qmv / qmv_fast / qmv_quad: one lane's scale * accum + sum * bias over `count` inputs from k0. */
function laneBlock(a: AffineMatrix, r: Row, rows: MlxRowsIn, xr: number, k0: number, count: number) {
  const xs = rows.x;
  const g = Math.floor(k0 / a.groupSize);
  const tAdd = (p: number, q: number) => (rows.round ? roundBf16(f(p + q)) : f(p + q));
  const ma = muladd(rows.fma === true);
  let sum = 0;
  let accum = 0;
  if (a.bits === 8) {
    for (let i = 0; i < count; i++) sum = f(sum + xs[xr + k0 + i]);
    for (let i = 0; i < count; i++) accum = ma(xs[xr + k0 + i], r.codes[k0 + i], accum);
  } else {
    const B = a.bits;
    for (let i = 0; i < count; i += 4) {
      const k = k0 + i;
      const xv = [0, 1, 2, 3].map((j) => xs[xr + k + j]);
      sum = f(sum + tAdd(tAdd(tAdd(xv[0], xv[1]), xv[2]), xv[3]));
      // code j masked in its 8- or 16-bit pack (c_j = q << B j), x pre-divided by 2^(B j)
      const xd = xv.map((v, j) => f(v / 2 ** (B * j)));
      const c = [0, 1, 2, 3].map((j) => r.codes[k + j] * 2 ** (B * j));
      // ((x0 c0 + x1 c1) + x2 c2) + x3 c3, each `+ x c` the fusable one
      accum = f(accum + ma(xd[3], c[3], ma(xd[2], c[2], ma(xd[0], c[0], f(xd[1] * c[1])))));
    }
  }
  return ma(r.scale(g), accum, f(sum * r.bias(g)));
}

function store(out: Float32Array, at: number, v: number, round: boolean) {
  out[at] = round ? roundBf16(v) : v;
}

/** y [M, N] of qmv (lanes 32), qmv_fast (lanes 32, more values per lane) or qmv_quad (lanes 4, K / 4). */
export function qmvOrder(a: AffineMatrix, rows: MlxRowsIn, lanes: number, valuesPerThread: number): Float32Array {
  const out = new Float32Array(rows.M * a.N);
  const block = lanes * valuesPerThread;
  for (let n = 0; n < a.N; n++) {
    const r = row(a, n);
    for (let m = 0; m < rows.M; m++) {
      const part: number[] = [];
      for (let l = 0; l < lanes; l++) {
        let acc = 0;
        for (let kb = 0; kb < a.K; kb += block) {
          const k0 = kb + l * valuesPerThread;
          if (k0 < a.K) acc = f(acc + laneBlock(a, r, rows, m * rows.xStride, k0, Math.min(valuesPerThread, a.K - k0)));
        }
        part.push(acc);
      }
      store(out, m * a.N + n, ladder(part), rows.round);
    }
  }
  return out;
}

/** y [M, N] of qmv_wide (affine, k_lanes 8, sub-chunks of 8 dequantized weights). */
export function qmvWideOrder(a: AffineMatrix, rows: MlxRowsIn): Float32Array {
  const KL = 8;
  const SUB = 8;
  const out = new Float32Array(rows.M * a.N);
  const groups = a.K / a.groupSize;
  const ma = muladd(rows.fma === true);
  for (let n = 0; n < a.N; n++) {
    const r = row(a, n);
    for (let m = 0; m < rows.M; m++) {
      const xr = m * rows.xStride;
      const part: number[] = [];
      for (let l = 0; l < KL; l++) {
        let acc = 0;
        for (let g = l; g < groups; g += KL) {
          const [s, b] = [r.scale(g), r.bias(g)];
          for (let sc = 0; sc < a.groupSize / SUB; sc++) {
            const k0 = g * a.groupSize + sc * SUB;
            let chunk = 0;
            // dequantize's s q + b is exact before its one rounding (8-bit scale times a code of at most 8 bits)
            for (let i = 0; i < SUB; i++) chunk = ma(rows.x[xr + k0 + i], f(f(s * r.codes[k0 + i]) + b), chunk);
            acc = f(acc + chunk);
          }
        }
        part.push(acc);
      }
      store(out, m * a.N + n, ladder(part), rows.round);
    }
  }
  return out;
}

/** y [M, N] of the kernel MLX picked (src/model/mlx-dispatch.ts mlxKernel's choice; qmm is not modelled). */
export function mlxOrder(
  a: AffineMatrix,
  rows: MlxRowsIn,
  choice: { kernel: string; lanes: number; valuesPerThread: number },
): Float32Array {
  if (choice.kernel === 'qmv_wide') return qmvWideOrder(a, rows);
  if (choice.kernel === 'qmm') throw new Error('qmm: reduction order not modelled');
  return qmvOrder(a, rows, choice.lanes, choice.valuesPerThread);
}
