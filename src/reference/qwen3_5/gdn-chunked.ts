/**
 * The gated delta rule in the chunked (WY / UT-transform) form, the arithmetic of shaders/gated_delta.wgsl
 * `recurrence_chunked` (policy gdn-chunked's verify arm), written once over an arithmetic:
 * - `F64`: float64, the form itself. Against gdn-ops.ts `recurrence` (the token-by-token form) it shows the
 *   two are the same rule (test/unit/qwen-gdn-chunked.test.ts), so what gdn-chunked changes is rounding only.
 * - `F32_WGSL`: float32 operation for operation in the kernel's order (Math.fround after every + - * /,
 *   exp_ref and the compensated sums of common.wgsl), so the GPU kernel can be compared byte for byte
 *   (test/gpu/qwen-gdn-chunked.test.ts). Like mlx-orders.ts it assumes no fma contraction and correctly
 *   rounded f32 + - * /, as lavapipe and SwiftShader do. The log decays are an input (the kernel reads them
 *   from log_gates), so softplus_ref is not emulated: lavapipe's compiler rewrites its (1 + y) - 1 into y.
 * Layouts are the kernels' (gdn-ops.ts): qk [M, 2 keyDim] (q already times Dk^-1/2), c [M, C] (v from channel
 * 2 keyDim), lg [M, Hv] the log decays, gb [M, Hv, 2] (only beta is read), S [Hv, Dk, Dv].
 */
import type { GdnShape } from './gdn-ops.ts';

/** Rows per chunk (transformers' torch_chunk_gated_delta_rule and fla's chunk_size; the kernel's CHUNK). */
export const CHUNK = 64;

export interface Arith {
  /** Rounds the result of one operation. */
  f: (x: number) => number;
  exp: (x: number) => number;
  /** Compensated dot-product accumulation (ksum_add / ksum_value of common.wgsl). */
  sum: () => { add(v: number): void; value(): number };
}

/** Neumaier's summation with every operation rounded by `f` (common.wgsl ksum_add, ksum_value). */
function ksum(f: (x: number) => number) {
  return () => {
    let s = 0;
    let c = 0;
    return {
      add(v: number) {
        const t = f(s + v);
        const d = Math.abs(s) >= Math.abs(v) ? f(f(s - t) + v) : f(f(v - t) + s);
        c = f(c + d);
        s = t;
      },
      value: () => f(s + c),
    };
  };
}

const id = (x: number) => x;
export const F64: Arith = { f: id, exp: Math.exp, sum: ksum(id) };

// ---- common.wgsl exp_ref in f32 ----------------------------------------------------------------------

const f = Math.fround;

/** WGSL round(): to the nearest integer, ties to even. */
function roundEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** common.wgsl exp_ref in f32: Cody-Waite reduction, degree-7 Taylor, ldexp. */
export function expRef32(x: number): number {
  if (x < -103) return 0;
  const n = roundEven(f(x * f(Math.LOG2E)));
  const r = f(f(x - f(n * 0.693145751953125)) - f(n * f(1.428606765330187e-6)));
  let p = f(1 / 5040);
  for (const k of [1 / 720, 1 / 120, 1 / 24, 1 / 6, 0.5, 1, 1]) p = f(f(p * r) + f(k));
  return f(p * 2 ** n);
}

export const F32_WGSL: Arith = { f, exp: expRef32, sum: ksum(f) };

/** Round an f32 to bf16, ties to even (common.wgsl round_bf16; NaN untouched). */
function roundBf16(v: number): number {
  const u = new Uint32Array(Float32Array.of(v).buffer)[0];
  if ((u & 0x7fffffff) > 0x7f800000) return v;
  return new Float32Array(Uint32Array.of((u + 0x7fff + ((u >>> 16) & 1)) & 0xffff0000).buffer)[0];
}

export interface ChunkedInputs {
  /** [Hv, Dk, Dv], read only. */
  S: ArrayLike<number>;
  qk: ArrayLike<number>;
  c: ArrayLike<number>;
  /** [M, Hv] log decays -(exp(A_log) softplus(a + dt_bias)). */
  lg: ArrayLike<number>;
  /** [M, Hv, 2]: g (unused: the chunked form sums the log decays), beta. */
  gb: ArrayLike<number>;
  M: number;
  /** Outputs rounded to bf16 (the kernel's `round`). */
  round?: boolean;
}

/**
 * o [M, Hv, Dv] and the state after each token [M, Hv, Dk, Dv], as recurrence_chunked computes them: per
 * value head h and value column j, in the kernel's loop order (comments there).
 */
export function chunkedRecurrence(x: ChunkedInputs, s: GdnShape, ar: Arith) {
  const { Hk, Hv, Dk, Dv, C } = s;
  const { M } = x;
  const F = ar.f;
  const kd = Hk * Dk;
  const sFloats = Hv * Dk * Dv;
  const out = (v: number) => (x.round ? roundBf16(v) : v);
  const o = new Float64Array(M * Hv * Dv);
  const states = new Float64Array(M * sFloats);
  const tri = (t: number, q: number) => (t * (t + 1)) / 2 + q;
  const T = (CHUNK * (CHUNK + 1)) / 2;
  for (let h = 0; h < Hv; h++) {
    const hk = Math.floor(h / (Hv / Hk));
    for (let j = 0; j < Dv; j++) {
      const sb = h * Dk * Dv + j;
      const col = Array.from({ length: Dk }, (_, e) => x.S[sb + e * Dv]);
      for (let c0 = 0; c0 < M; c0 += CHUNK) {
        const L = Math.min(CHUNK, M - c0);
        const qOf = (t: number) => (c0 + t) * 2 * kd + hk * Dk;
        const kOf = (t: number) => qOf(t) + kd;
        const G: number[] = [];
        const eG: number[] = [];
        const beta: number[] = [];
        let cum = 0;
        for (let t = 0; t < L; t++) {
          const row = (c0 + t) * Hv + h;
          cum = F(cum + x.lg[row]);
          G.push(cum);
          eG.push(ar.exp(cum));
          beta.push(x.gb[2 * row + 1]);
        }
        const Pd = new Float64Array(T);
        const A = new Float64Array(T);
        const QK = new Float64Array(T);
        for (let t = 0; t < L; t++)
          for (let q = 0; q <= t; q++) {
            const kk = ar.sum();
            const qq = ar.sum();
            for (let e = 0; e < Dk; e++) {
              kk.add(F(F(x.qk[kOf(t) + e] * beta[t]) * x.qk[kOf(q) + e]));
              qq.add(F(x.qk[qOf(t) + e] * x.qk[kOf(q) + e]));
            }
            const p = ar.exp(F(G[t] - G[q]));
            Pd[tri(t, q)] = p;
            A[tri(t, q)] = F(kk.value() * p);
            QK[tri(t, q)] = F(qq.value() * p);
          }
        const u: number[] = [];
        for (let t = 0; t < L; t++) {
          const acc = ar.sum();
          for (let q = 0; q < t; q++) acc.add(F(A[tri(t, q)] * u[q]));
          u.push(F(F(x.c[(c0 + t) * C + 2 * kd + h * Dv + j] * beta[t]) - acc.value()));
        }
        const wS = Array.from({ length: L }, () => ar.sum());
        const w: number[] = new Array(L).fill(0);
        for (let e = 0; e < Dk; e++)
          for (let t = 0; t < L; t++) {
            const acc = ar.sum();
            for (let q = 0; q < t; q++) acc.add(F(A[tri(t, q)] * w[q]));
            w[t] = F(F(F(x.qk[kOf(t) + e] * beta[t]) * eG[t]) - acc.value());
            wS[t].add(F(w[t] * col[e]));
          }
        const vn = u.map((v, t) => F(v - wS[t].value()));
        for (let t = 0; t < L; t++) {
          const inter = ar.sum();
          for (let e = 0; e < Dk; e++) inter.add(F(F(x.qk[qOf(t) + e] * eG[t]) * col[e]));
          const intra = ar.sum();
          for (let q = 0; q <= t; q++) intra.add(F(QK[tri(t, q)] * vn[q]));
          o[((c0 + t) * Hv + h) * Dv + j] = out(F(inter.value() + intra.value()));
        }
        for (let t = 0; t < L; t++)
          for (let e = 0; e < Dk; e++) {
            const acc = ar.sum();
            for (let q = 0; q <= t; q++) acc.add(F(F(x.qk[kOf(q) + e] * Pd[tri(t, q)]) * vn[q]));
            const v = F(F(col[e] * eG[t]) + acc.value());
            states[(c0 + t) * sFloats + sb + e * Dv] = v;
            if (t === L - 1) col[e] = v;
          }
      }
    }
  }
  return { o, states };
}
