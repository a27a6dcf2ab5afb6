/**
 * Float64 twins of the Qwen3.5 GPU kernels, one function per kernel entry point (shaders/gated_delta.wgsl,
 * shaders/qwen_ops.wgsl), in the order of operations of src/reference/qwen3_5/model.ts gatedDeltaNet and
 * gatedAttention (the oracle), split so that each kernel can be tested alone (test/gpu/qwen-kernels.test.ts).
 * Layouts are the kernels': rows are tokens, channels as in_proj_qkv lays them out (q, k, v).
 */
import { sigmoid, silu, softplus } from './scalar.ts';

export interface GdnShape {
  C: number;
  K: number;
  Hk: number;
  Hv: number;
  Dk: number;
  Dv: number;
}

/** c[t, ch] = silu(sum_j w[ch, j] * seq[t + j, ch]) over seq = [window (K-1 rows); qkv (M rows)]. */
export function convSilu(window: Float64Array, qkv: Float64Array, w: Float64Array, M: number, s: GdnShape) {
  const { C, K } = s;
  const at = (idx: number, ch: number) => (idx < K - 1 ? window[idx * C + ch] : qkv[(idx - (K - 1)) * C + ch]);
  const c = new Float64Array(M * C);
  for (let t = 0; t < M; t++)
    for (let ch = 0; ch < C; ch++) {
      let acc = 0;
      for (let j = 0; j < K; j++) acc += w[ch * K + j] * at(t + j, ch);
      c[t * C + ch] = silu(acc);
    }
  return c;
}

/** The window after accepting the first n rows of qkv: the last K-1 rows of [window; qkv[0..n)]. */
export function convCommit(window: Float64Array, qkv: Float64Array, n: number, s: GdnShape): Float64Array {
  const { C, K } = s;
  const out = new Float64Array((K - 1) * C);
  for (let r = 0; r < K - 1; r++) {
    const idx = n + r;
    for (let ch = 0; ch < C; ch++) out[r * C + ch] = idx < K - 1 ? window[idx * C + ch] : qkv[(idx - (K - 1)) * C + ch];
  }
  return out;
}

/** [M, 2 keyDim]: q then k of each row, L2-normalised (eps 1e-6 on the sum of squares), q times Dk^-1/2. */
export function qkNorm(c: Float64Array, M: number, s: GdnShape): Float64Array {
  const kd = s.Hk * s.Dk;
  const out = new Float64Array(M * 2 * kd);
  for (let t = 0; t < M; t++)
    for (let wh = 0; wh < 2 * s.Hk; wh++) {
      const b = t * s.C + wh * s.Dk;
      let ss = 0;
      for (let e = 0; e < s.Dk; e++) ss += c[b + e] * c[b + e];
      const inv = (ss + 1e-6) ** -0.5;
      const scale = wh < s.Hk ? s.Dk ** -0.5 : 1;
      for (let e = 0; e < s.Dk; e++) out[t * 2 * kd + wh * s.Dk + e] = c[b + e] * inv * scale;
    }
  return out;
}

/** [M, Hv, 2]: g = exp(-exp(A_log) softplus(a + dt_bias)), beta = sigmoid(b). */
export function gates(
  a: Float64Array,
  b: Float64Array,
  aLog: Float64Array,
  dtBias: Float64Array,
  M: number,
  Hv: number,
) {
  const out = new Float64Array(M * Hv * 2);
  for (let i = 0; i < M * Hv; i++) {
    const h = i % Hv;
    out[2 * i] = Math.exp(-Math.exp(aLog[h]) * softplus(a[i] + dtBias[h]));
    out[2 * i + 1] = sigmoid(b[i]);
  }
  return out;
}

/**
 * The gated delta rule over M tokens in order from state S [Hv, Dk, Dv] (updated in place): returns o
 * [M, Hv, Dv] and, with `keepStates`, the state after every token [M, Hv, Dk, Dv] (what a GPU block stages).
 */
export function recurrence(
  S: Float64Array,
  qk: Float64Array,
  c: Float64Array,
  gb: Float64Array,
  M: number,
  s: GdnShape,
  keepStates = false,
) {
  const { Hk, Hv, Dk, Dv, C } = s;
  const kd = Hk * Dk;
  const o = new Float64Array(M * Hv * Dv);
  const states = keepStates ? new Float64Array(M * Hv * Dk * Dv) : undefined;
  const delta = new Float64Array(Dv);
  for (let t = 0; t < M; t++) {
    for (let h = 0; h < Hv; h++) {
      const hk = Math.floor(h / (Hv / Hk));
      const [g, beta] = [gb[2 * (t * Hv + h)], gb[2 * (t * Hv + h) + 1]];
      const Sh = S.subarray(h * Dk * Dv, (h + 1) * Dk * Dv);
      const qb = t * 2 * kd + hk * Dk;
      const kb = qb + kd;
      for (let i = 0; i < Dk * Dv; i++) Sh[i] *= g;
      for (let j = 0; j < Dv; j++) {
        let m = 0;
        for (let i = 0; i < Dk; i++) m += Sh[i * Dv + j] * qk[kb + i];
        delta[j] = (c[t * C + 2 * kd + h * Dv + j] - m) * beta;
      }
      for (let i = 0; i < Dk; i++) for (let j = 0; j < Dv; j++) Sh[i * Dv + j] += qk[kb + i] * delta[j];
      for (let j = 0; j < Dv; j++) {
        let acc = 0;
        for (let i = 0; i < Dk; i++) acc += Sh[i * Dv + j] * qk[qb + i];
        o[(t * Hv + h) * Dv + j] = acc;
      }
    }
    states?.set(S, t * Hv * Dk * Dv);
  }
  return { o, states };
}

/** y = w * (o * (mean(o^2) + eps)^-1/2) * silu(z), per row of Dv. */
export function gatedNorm(o: Float64Array, z: Float64Array, w: Float64Array, rows: number, Dv: number, eps: number) {
  const y = new Float64Array(rows * Dv);
  for (let r = 0; r < rows; r++) {
    let ss = 0;
    for (let j = 0; j < Dv; j++) ss += o[r * Dv + j] * o[r * Dv + j];
    const inv = (ss / Dv + eps) ** -0.5;
    for (let j = 0; j < Dv; j++) y[r * Dv + j] = w[j] * (o[r * Dv + j] * inv) * silu(z[r * Dv + j]);
  }
  return y;
}

/** Partial rotate-half RoPE of rows [rows, d] (pairs i, i + rot/2 for i < rot/2) at the given cos/sin, then * scale. */
export function partialRope(
  x: Float64Array,
  rows: number,
  d: number,
  rot: number,
  cosSin: (row: number) => { cos: ArrayLike<number>; sin: ArrayLike<number> },
  scale = 1,
): Float64Array {
  const y = x.slice();
  const half = rot / 2;
  for (let r = 0; r < rows; r++) {
    const { cos, sin } = cosSin(r);
    for (let i = 0; i < half; i++) {
      const [a, b] = [x[r * d + i], x[r * d + i + half]];
      y[r * d + i] = a * cos[i] - b * sin[i];
      y[r * d + i + half] = b * cos[i] + a * sin[i];
    }
    for (let i = 0; i < d; i++) y[r * d + i] *= scale;
  }
  return y;
}

/** attn [M, heads, d] * sigmoid(gate), the gate of head row r = m heads + h at qg[r stride + gateOff + i]. */
export function outGate(attn: Float64Array, qg: Float64Array, d: number, stride: number, gateOff: number) {
  return attn.map((v, i) => v * sigmoid(qg[Math.floor(i / d) * stride + gateOff + (i % d)]));
}

/** silu(g) * u. */
export const swiglu = (g: Float64Array, u: Float64Array) => g.map((v, i) => silu(v) * u[i]);
