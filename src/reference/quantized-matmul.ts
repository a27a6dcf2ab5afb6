/**
 * CPU twin of the quantized matmul kernels: y = W x for MLX affine-quantized weights, in float64,
 * W[n, k] = scale[n, g] * q[n, k] + bias[n, g] with g = floor(k / groupSize) and q the unpacked codes
 * (src/format/dequant.ts), plus the magnitudes that the kernels' rounding errors scale with.
 *
 * WGSL kernels it is the twin of (run by src/model/ops.ts matmul and gateUp; README "Numerics"):
 * - shaders/matmul.wgsl `affine` (stored codes: per group scale * sum(q x) + bias * sum(x); the
 *   fallback for linears the others cannot run) and `affine_xsum` (the x group sums);
 * - shaders/matmul_lanes.wgsl `main` and `tile` (centred codes; software adapters, and prefill);
 * - shaders/matmul_coop.wgsl `main` and `gate_up` (centred codes; GPUs).
 * They are compared with it in test/gpu/kernels-matmul.test.ts, each within the error bound counted
 * from its arithmetic (test/gpu/helpers/linears.ts quantizedTol) times the magnitude below.
 */
import { dequantAffine, unpackRow } from '../format/dequant.ts';
import { matvec } from './ops.ts';

/** An affine-quantized weight matrix [N, K], unpacked once. */
export interface AffineMatrix {
  /** Output features (rows of W). */
  N: number;
  /** Input features. */
  K: number;
  bits: number;
  groupSize: number;
  /** Codes q as stored, [N, K]. */
  codes: Uint32Array;
  /** [N, K / groupSize]. */
  scales: Float64Array;
  biases: Float64Array;
  /** W dequantized, [N, K]. */
  w: Float64Array;
}

/** Unpacks MLX's packed rows (`words`, N rows of K * bits / 32 words) with their scales and biases. */
export function affineMatrix(
  words: Uint32Array,
  scales: Float64Array,
  biases: Float64Array,
  N: number,
  K: number,
  bits: number,
  groupSize: number,
): AffineMatrix {
  if (K % groupSize !== 0 || (K * bits) % 32 !== 0)
    throw new Error(
      `affine matrix: ${K} inputs do not fill whole groups of ${groupSize} and whole words of ${bits}-bit codes`,
    );
  const wordsPerRow = (K * bits) / 32;
  const codes = new Uint32Array(N * K);
  for (let n = 0; n < N; n++) unpackRow(words, n * wordsPerRow, K, bits, codes.subarray(n * K, (n + 1) * K));
  return {
    N,
    K,
    bits,
    groupSize,
    codes,
    scales,
    biases,
    w: dequantAffine(words, scales, biases, N, K, bits, groupSize),
  };
}

/** y = W x with, per output, the magnitudes the kernels' rounding errors scale with. */
export interface AffineProduct {
  y: Float64Array;
  /**
   * For stored codes (matmul.wgsl affine): the sum over groups of |scale| sum|q x| + |bias| sum|x|.
   */
  mag: Float64Array;
  /**
   * For centred codes (the exact kernels lanes, tile and coop, which use q - 2^(bits-1) and the bias
   * adjusted to bias + 2^(bits-1) scale): the sum over groups of
   * |scale| sum|(q - 2^(bits-1)) x| + |bias + 2^(bits-1) scale| sum|x|.
   */
  magCentred: Float64Array;
}

/** y = W x for one row of x, read from `x` at `xOff`. */
export function affineMatvec(a: AffineMatrix, x: Float64Array, xOff = 0): AffineProduct {
  const { N, K, groupSize: gs } = a;
  const groups = K / gs;
  const half = 2 ** (a.bits - 1);
  const y = matvec(a.w, N, K, x, xOff);
  const mag = new Float64Array(N);
  const magCentred = new Float64Array(N);
  for (let n = 0; n < N; n++) {
    let s = 0,
      sc = 0;
    for (let g = 0; g < groups; g++) {
      let qx = 0,
        qcx = 0,
        ax = 0;
      for (let k = g * gs; k < (g + 1) * gs; k++) {
        const q = a.codes[n * K + k];
        const v = x[xOff + k];
        qx += Math.abs(q * v);
        qcx += Math.abs((q - half) * v);
        ax += Math.abs(v);
      }
      const scale = a.scales[n * groups + g],
        bias = a.biases[n * groups + g];
      s += Math.abs(scale) * qx + Math.abs(bias) * ax;
      sc += Math.abs(scale) * qcx + Math.abs(bias + half * scale) * ax;
    }
    mag[n] = s;
    magCentred[n] = sc;
  }
  return { y, mag, magCentred };
}

/** Y = X W^T for M rows of x (row m at m * xStride), row after row: [M, N] each. */
export function affineMatmul(a: AffineMatrix, x: Float64Array, M: number, xStride = a.K): AffineProduct {
  const out: AffineProduct = {
    y: new Float64Array(M * a.N),
    mag: new Float64Array(M * a.N),
    magCentred: new Float64Array(M * a.N),
  };
  for (let m = 0; m < M; m++) {
    const r = affineMatvec(a, x, m * xStride);
    out.y.set(r.y, m * a.N);
    out.mag.set(r.mag, m * a.N);
    out.magCentred.set(r.magCentred, m * a.N);
  }
  return out;
}
