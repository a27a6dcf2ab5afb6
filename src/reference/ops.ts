/**
 * Float64 building blocks of the CPU reference. Plain loops, no tricks: this is the oracle, so readability and
 * a fixed, obvious summation order matter more than speed.
 */

/** y[o] = sum_i W[o, i] * x[i] for W row-major [out, in]; x read from `x` at `xOff`. */
export function matvec(w: Float64Array, out: number, inF: number, x: Float64Array, xOff = 0): Float64Array {
  const y = new Float64Array(out);
  for (let o = 0; o < out; o++) {
    let s = 0;
    const base = o * inF;
    for (let i = 0; i < inF; i++) s += w[base + i] * x[xOff + i];
    y[o] = s;
  }
  return y;
}

/**
 * RMSNorm over `n` elements at `off`: x * (mean(x^2) + eps)^-0.5 * w. Gemma 4 uses the weight as is (not 1 + w);
 * `w` null means no weight (v_norm). CPU twin of shaders/rmsnorm.wgsl (`main`, `rows_wg`; run by src/model/ops.ts
 * rmsnorm), compared with it in test/gpu/kernels-norm-rope.test.ts.
 */
export function rmsNorm(
  x: Float64Array,
  off: number,
  n: number,
  w: Float64Array | null,
  eps: number,
  out: Float64Array = new Float64Array(n),
  outOff = 0,
): Float64Array {
  let ss = 0;
  for (let i = 0; i < n; i++) ss += x[off + i] * x[off + i];
  const r = (ss / n + eps) ** -0.5;
  for (let i = 0; i < n; i++) out[outOff + i] = w ? x[off + i] * r * w[i] : x[off + i] * r;
  return out;
}

/**
 * The same RMSNorm as transformers' Gemma4RMSNorm computes it even in a float64 model: it casts the input to
 * float32 (`hidden_states.float()`), normalises and scales in f32, then casts back. Emulated with Math.fround at
 * each step; the sum of squares is accumulated in f64 then rounded, which can differ from torch's f32
 * reduction by an ulp (that, not a semantic difference, is the residual error against the goldens).
 */
export function rmsNormF32(
  x: Float64Array,
  off: number,
  n: number,
  w: Float64Array | null,
  eps: number,
  out: Float64Array = new Float64Array(n),
  outOff = 0,
): Float64Array {
  const f = Math.fround;
  let ss = 0;
  for (let i = 0; i < n; i++) {
    const v = f(x[off + i]);
    ss += f(v * v);
  }
  const ms = f(f(f(ss) / n) + f(eps));
  const r = f(ms ** -0.5);
  for (let i = 0; i < n; i++) {
    const y = f(f(x[off + i]) * r);
    out[outOff + i] = w ? f(y * f(w[i])) : y;
  }
  return out;
}

/** Signature shared by rmsNorm and rmsNormF32 once eps is bound. */
export type NormFn = (
  x: Float64Array,
  off: number,
  n: number,
  w: Float64Array | null,
  out?: Float64Array,
  outOff?: number,
) => Float64Array;

/**
 * How the reference rounds. 'transformers' reproduces what transformers does in a float64 model (RMSNorm and
 * RoPE tables in float32, everything else in float64): that is what the fixture goldens contain.
 * 'exact' is float64 throughout: the mathematical model.
 */
export type Numerics = 'transformers' | 'exact';

export function makeNorm(eps: number, numerics: Numerics): NormFn {
  return numerics === 'transformers'
    ? (x, off, n, w, out, outOff) => rmsNormF32(x, off, n, w, eps, out, outOff)
    : (x, off, n, w, out, outOff) => rmsNorm(x, off, n, w, eps, out, outOff);
}

/** gelu with the tanh approximation (gelu_pytorch_tanh). */
export function geluTanh(x: number): number {
  return 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x * x * x)));
}

/** cap * tanh(x / cap). */
export function softcap(x: number, cap: number): number {
  return cap * Math.tanh(x / cap);
}

export function argmax(v: Float64Array, off = 0, n = v.length - off): number {
  let best = 0;
  for (let i = 1; i < n; i++) if (v[off + i] > v[off + best]) best = i;
  return best;
}

/** In-place softmax of v[0..n) computed in float32 (inputs rounded to f32, f32 exp/sum/divide). */
export function softmaxF32InPlace(v: Float64Array, n = v.length): void {
  const f = Math.fround;
  let m = -Infinity;
  for (let i = 0; i < n; i++) {
    v[i] = f(v[i]);
    if (v[i] > m) m = v[i];
  }
  let s = 0;
  for (let i = 0; i < n; i++) {
    v[i] = f(Math.exp(f(v[i] - m)));
    s = f(s + v[i]);
  }
  for (let i = 0; i < n; i++) v[i] = f(v[i] / s);
}

/** In-place softmax of v[0..n). */
export function softmaxInPlace(v: Float64Array, n = v.length): void {
  let m = -Infinity;
  for (let i = 0; i < n; i++) if (v[i] > m) m = v[i];
  let s = 0;
  for (let i = 0; i < n; i++) {
    v[i] = Math.exp(v[i] - m);
    s += v[i];
  }
  for (let i = 0; i < n; i++) v[i] /= s;
}
