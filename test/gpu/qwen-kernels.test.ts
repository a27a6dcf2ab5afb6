/**
 * The Qwen3.5 kernels (shaders/gated_delta.wgsl, shaders/qwen_ops.wgsl, via src/model/qwen3_5/ops.ts) against
 * their float64 twins (src/reference/qwen3_5/gdn-ops.ts) on random shapes, and row invariance: M rows in one
 * dispatch give each row the bytes it gets alone (the recurrence: a staged block of M tokens gives the state
 * and output bytes of M single-token calls updating the state in place).
 * Error bounds follow helpers/kernel-lab.ts: roundings on the longest chain, each U relative to the magnitude
 * it acts on; exp_ref / rsqrt_ref at their asserted ULPs (1 ULP <= 2U relative). Each test states its count.
 */
import { describe, expect, it } from 'vitest';
import { storageBuffer } from '../../src/gpu/buffers.ts';
import type { Recorder } from '../../src/gpu/recorder.ts';
import * as qop from '../../src/model/qwen3_5/ops.ts';
import type { GdnGeometry } from '../../src/model/qwen3_5/ops.ts';
import * as twin from '../../src/reference/qwen3_5/gdn-ops.ts';
import { sigmoid, softplus } from '../../src/reference/qwen3_5/index.ts';
import {
  ADAPTER,
  EXP_REF_ULP,
  RSQRT_REF_ULP,
  ROW_COUNTS,
  U,
  bf16Rne,
  bytesOf,
  expectClose,
  expectSameBytes,
  Rand,
  useLab,
  type Lab,
} from './helpers/kernel-lab.ts';

/** exp_ref's and rsqrt_ref's errors as relative bounds (1 ULP <= 2U of the value). */
const EXP_U = 2 * EXP_REF_ULP;
const RSQRT_U = 2 * RSQRT_REF_ULP;
/** silu_ref: exp_ref (reaching the result shrunk by e / (1 + e) <= 1), then at most 3 roundings (x e, 1 + e, /). */
const SILU_U = EXP_U + 3;
/** sigmoid_ref: the same chain without the product by x at most: exp_ref, 1 + e, the division, and e / (.) on x < 0. */
const SIGMOID_U = EXP_U + 3;

const GEOMS: GdnGeometry[] = [
  { C: 2 * 2 * 32 + 4 * 32, K: 4, Hk: 2, Hv: 4, Dk: 32, Dv: 32 }, // qwen-tiny
  { C: 2 * 1 * 16 + 3 * 8, K: 3, Hk: 1, Hv: 3, Dk: 16, Dv: 8 },
];

describe(`GPU kernels: Qwen3.5 Gated DeltaNet and attention ops vs float64 twins (${ADAPTER})`, () => {
  let lab: Lab;
  useLab((l) => (lab = l));
  const f32 = (a: ArrayLike<number>) => Float64Array.from(a, (v) => Math.fround(v));
  const out = (floats: number) => lab.own(storageBuffer(lab.device, Math.max(16, floats * 4), 'out'));

  async function conv(g: GdnGeometry, win: Float64Array, qkv: Float64Array, w: Float64Array, M: number) {
    const o = out(M * g.C);
    const [bw, bq, bk] = [lab.f32(win), lab.f32(qkv), lab.f32(w)];
    await lab.run((rec) => qop.gdnConv(rec, g, { window: bw, qkv: bq, weight: bk, out: o, M, round: false }));
    return lab.read(o, M * g.C);
  }

  for (const g of GEOMS) {
    const tag = `C ${g.C}, K ${g.K}, Hk ${g.Hk}, Hv ${g.Hv}, Dk ${g.Dk}, Dv ${g.Dv}`;

    it(`conv + silu (${tag}): (2K - 1) roundings of sum |w x| through silu' <= 1.1, then silu_ref's own; rows invariant`, async () => {
      const r = new Rand(g.C + 1);
      const M = 8;
      const win = r.f32s((g.K - 1) * g.C);
      const qkv = r.f32s(M * g.C);
      const w = r.f32s(g.C * g.K, 0.5);
      const got = await conv(g, win, qkv, w, M);
      const ref = twin.convSilu(win, qkv, w, M, g);
      // sum_j |w x| per output: the magnitude at which the conv's roundings act
      const seq = new Float64Array([...win, ...qkv].map(Math.abs));
      const magAbs = ref.map((_, i) => {
        const [t, ch] = [Math.floor(i / g.C), i % g.C];
        let m = 0;
        for (let j = 0; j < g.K; j++) m += Math.abs(w[ch * g.K + j]) * seq[(t + j) * g.C + ch];
        return m;
      });
      const bound = ref.map((v, i) => 1.1 * (2 * g.K - 1) * U * magAbs[i] + SILU_U * U * Math.abs(v));
      expectClose('conv', got, ref, bound, 1);
      // row t alone, with the window it sees: [window; rows < t] trimmed to the last K - 1
      for (const t of [0, 1, M - 1]) {
        const seqWin = twin.convCommit(win, qkv, t, g);
        const alone = await conv(g, seqWin, qkv.slice(t * g.C, (t + 1) * g.C), w, 1);
        expectSameBytes(`conv row ${t}`, bytesOf(alone), bytesOf(got.subarray(t * g.C, (t + 1) * g.C)));
      }
    });

    it(`conv window commit (${tag}): the last K - 1 raw rows, copied exactly, for every accepted count`, async () => {
      const r = new Rand(g.C + 2);
      const win = r.f32s((g.K - 1) * g.C);
      const qkv = r.f32s(8 * g.C);
      for (const n of [1, 2, 3, 8]) {
        const o = out((g.K - 1) * g.C);
        const [bw, bq] = [lab.f32(win), lab.f32(qkv)];
        await lab.run((rec) => qop.gdnConvCommit(rec, g, { window: bw, qkv: bq, windowOut: o, n }));
        const got = await lab.read(o, (g.K - 1) * g.C);
        expectSameBytes(`commit ${n}`, bytesOf(got), bytesOf(Float32Array.from(twin.convCommit(win, qkv, n, g))));
      }
    });

    it(`q/k L2 norm (${tag}): 7U of |ref| (sum of squares 2U -> 1U, + eps, rsqrt_ref, two products); rows invariant`, async () => {
      const r = new Rand(g.C + 3);
      const M = 8;
      const c = r.f32s(M * g.C);
      const run = async (x: Float64Array, rows: number) => {
        const o = out(rows * 2 * g.Hk * g.Dk);
        const bc = lab.f32(x);
        await lab.run((rec) => qop.gdnQkNorm(rec, g, { c: bc, qk: o, M: rows, round: false }));
        return lab.read(o, rows * 2 * g.Hk * g.Dk);
      };
      const got = await run(c, M);
      const ref = twin.qkNorm(c, M, g);
      expectClose('qk_norm', got, ref, ref.map(Math.abs), (3 + RSQRT_U + 1) * U);
      const w = 2 * g.Hk * g.Dk;
      for (const t of [0, M - 1])
        expectSameBytes(
          `qk_norm row ${t}`,
          bytesOf(await run(c.slice(t * g.C, (t + 1) * g.C), 1)),
          bytesOf(got.subarray(t * w, (t + 1) * w)),
        );
    });

    it(`gates (${tag}): beta within sigmoid_ref's ${SIGMOID_U}U; g = exp(-exp(A) softplus(a + dt)) within the propagated bound`, async () => {
      const r = new Rand(g.C + 4);
      const M = 8;
      const a = f32(Array.from({ length: M * g.Hv }, () => r.uniform(-25, 25)));
      const b = r.f32s(M * g.Hv, 4);
      const aLog = f32(Array.from({ length: g.Hv }, () => r.uniform(-3, 2.5)));
      const dt = r.f32s(g.Hv);
      const o = out(M * g.Hv * 2);
      const [ba, bb, bl, bd] = [lab.f32(a), lab.f32(b), lab.f32(aLog), lab.f32(dt)];
      await lab.run((rec) => qop.gdnGates(rec, g, { a: ba, b: bb, aLog: bl, dtBias: bd, gb: o, M }));
      const got = await lab.read(o, M * g.Hv * 2);
      const ref = twin.gates(a, b, aLog, dt, M, g.Hv);
      // g: x = a + dt rounds (U|x|, moving softplus by sigmoid(x) U |x|); softplus_ref: exp_ref, then log_ref
      // (10U: frexp exact, s = f / (2 + f) 2U, the series 2U, 2 s p U, e ln2 in two parts and the sum 2U, at most
      // doubled by cancellation when e = 1) and Goldberg's correction (2U); exp_ref(A) and the product: the
      // argument is off by arg (EXP_U + 10 + 2 + EXP_U + 1) U + exp(A) sigmoid(x) U |x|; exp_ref of it adds EXP_U,
      // and where g is below the normal f32 range exp_ref is within 2^-126 (flushed or 0 under e^-103).
      const bound = ref.map((v, i) => {
        const k = i >> 1;
        if (i & 1) return SIGMOID_U * U * Math.abs(v);
        const h = k % g.Hv;
        const x = a[k] + dt[h];
        const eA = Math.exp(aLog[h]);
        const arg = eA * softplus(x);
        return v * (arg * (2 * EXP_U + 13) * U + eA * sigmoid(x) * U * Math.abs(x) + EXP_U * U) + 2 ** -126;
      });
      expectClose('gates', got, ref, bound, 1);
    });

    it(`recurrence (${tag}): o within (t + 1)(2 Dk + 8)U of the magnitude envelope; block (staged) == single-token steps byte for byte`, async () => {
      const r = new Rand(g.C + 5);
      const M = 8;
      const S0 = r.f32s(g.Hv * g.Dk * g.Dv, 0.3);
      const c = r.f32s(M * g.C);
      const qk = Float64Array.from(twin.qkNorm(c, M, g), Math.fround);
      const gb = f32(Array.from({ length: M * g.Hv * 2 }, (_, i) => (i & 1 ? r.uniform(0.05, 1) : r.uniform(0.3, 1))));
      const sFloats = g.Hv * g.Dk * g.Dv;
      const oFloats = g.Hv * g.Dv;
      const runBlock = async () => {
        const [bS, bqk, bc, bgb] = [lab.f32(S0), lab.f32(qk), lab.f32(c), lab.f32(gb)];
        const stage = out(M * sFloats);
        const o = out(M * oFloats);
        await lab.run((rec) =>
          qop.gdnRecurrence(rec, g, { S: bS, stage, unused: lab.dummy, qk: bqk, c: bc, gb: bgb, o, M, round: false }),
        );
        return {
          o: await lab.read(o, M * oFloats),
          states: await lab.read(stage, M * sFloats),
          S: await lab.read(bS, sFloats),
        };
      };
      const block = await runBlock();
      expectSameBytes('S untouched by a staged block', bytesOf(block.S), bytesOf(Float32Array.from(S0)));
      const ref = twin.recurrence(S0.slice(), qk, c, gb, M, g, true);
      // Magnitude envelope: the same recurrence on absolute values with v - S k replaced by |v| + |S||k|.
      const env = envelope(S0, qk, c, gb, M, g);
      const bound = ref.o.map((_, i) => (Math.floor(i / oFloats) + 1) * (2 * g.Dk + 8) * U * env[i]);
      expectClose('recurrence', block.o, ref.o, bound, 1);
      // chain: token by token, S updated in place (the prefill mode), one dispatch per token
      const bS = lab.f32(S0);
      for (let t = 0; t < M; t++) {
        const [bqk, bc, bgb] = [
          lab.f32(qk.slice(t * 2 * g.Hk * g.Dk, (t + 1) * 2 * g.Hk * g.Dk)),
          lab.f32(c.slice(t * g.C, (t + 1) * g.C)),
          lab.f32(gb.slice(t * g.Hv * 2, (t + 1) * g.Hv * 2)),
        ];
        const o = out(oFloats);
        await lab.run((rec: Recorder) =>
          qop.gdnRecurrence(rec, g, { S: bS, unused: lab.dummy, qk: bqk, c: bc, gb: bgb, o, M: 1, round: false }),
        );
        expectSameBytes(
          `o of token ${t}`,
          bytesOf(await lab.read(o, oFloats)),
          bytesOf(block.o.subarray(t * oFloats, (t + 1) * oFloats)),
        );
        expectSameBytes(
          `state after token ${t}`,
          bytesOf(await lab.read(bS, sFloats)),
          bytesOf(block.states.subarray(t * sFloats, (t + 1) * sFloats)),
        );
      }
    });

    it(`recurrence with the state stored in bf16 (${tag}): staged and in-place states are the f32 states rounded; a block's later rows differ from bf16-stored steps`, async () => {
      const r = new Rand(g.C + 7);
      const M = 4;
      const S0 = Float64Array.from(r.f32s(g.Hv * g.Dk * g.Dv, 0.3), (v) => bf16Rne(v));
      const c = r.f32s(M * g.C);
      const qk = Float64Array.from(twin.qkNorm(c, M, g), Math.fround);
      const gb = f32(Array.from({ length: M * g.Hv * 2 }, (_, i) => (i & 1 ? r.uniform(0.05, 1) : r.uniform(0.3, 1))));
      const sFloats = g.Hv * g.Dk * g.Dv;
      const oFloats = g.Hv * g.Dv;
      const run = async (stateBf16: boolean) => {
        const [bS, bqk, bc, bgb] = [lab.f32(S0), lab.f32(qk), lab.f32(c), lab.f32(gb)];
        const stage = out(M * sFloats);
        const o = out(M * oFloats);
        await lab.run((rec) =>
          qop.gdnRecurrence(rec, g, {
            S: bS,
            stage,
            unused: lab.dummy,
            qk: bqk,
            c: bc,
            gb: bgb,
            o,
            M,
            round: false,
            stateBf16,
          }),
        );
        return { o: await lab.read(o, M * oFloats), states: await lab.read(stage, M * sFloats) };
      };
      const [f32run, bf16run] = [await run(false), await run(true)];
      // the block's own arithmetic is unchanged: same outputs, states rounded only where stored
      expectSameBytes('o', bytesOf(bf16run.o), bytesOf(f32run.o));
      expectSameBytes('states', bytesOf(bf16run.states), bytesOf(Float32Array.from(f32run.states, bf16Rne)));
      // the chain stores and re-reads a rounded state: token 1 on, its outputs differ from the block's
      const bS = lab.f32(S0);
      const outs: Float32Array[] = [];
      for (let t = 0; t < M; t++) {
        const [bqk, bc, bgb] = [
          lab.f32(qk.slice(t * 2 * g.Hk * g.Dk, (t + 1) * 2 * g.Hk * g.Dk)),
          lab.f32(c.slice(t * g.C, (t + 1) * g.C)),
          lab.f32(gb.slice(t * g.Hv * 2, (t + 1) * g.Hv * 2)),
        ];
        const o = out(oFloats);
        await lab.run((rec) =>
          qop.gdnRecurrence(rec, g, {
            S: bS,
            unused: lab.dummy,
            qk: bqk,
            c: bc,
            gb: bgb,
            o,
            M: 1,
            round: false,
            stateBf16: true,
          }),
        );
        outs.push(await lab.read(o, oFloats));
      }
      expectSameBytes('token 0', bytesOf(outs[0]), bytesOf(bf16run.o.subarray(0, oFloats)));
      const later = outs
        .slice(1)
        .some(
          (o, j) =>
            Buffer.compare(
              Buffer.from(bytesOf(o)),
              Buffer.from(bytesOf(bf16run.o.subarray((j + 1) * oFloats, (j + 2) * oFloats))),
            ) !== 0,
        );
      expect(later).toBe(true);
    });

    it(`gated RMSNorm (${tag}): 14U of |ref| (sum of squares, mean, eps, rsqrt_ref, three products, silu_ref); rows invariant`, async () => {
      const r = new Rand(g.C + 6);
      const M = 8;
      const n = M * g.Hv * g.Dv;
      const o = r.f32s(n);
      const z = r.f32s(n, 2);
      const w = r.f32s(g.Dv);
      const run = async (oo: Float64Array, zz: Float64Array, rows: number) => {
        const y = out(rows * g.Hv * g.Dv);
        const [bo, bz, bw] = [lab.f32(oo), lab.f32(zz), lab.f32(w)];
        await lab.run((rec) =>
          qop.gdnGatedNorm(rec, g, { o: bo, z: bz, weight: bw, y, M: rows, eps: 1e-6, round: false }),
        );
        return lab.read(y, rows * g.Hv * g.Dv);
      };
      const got = await run(o, z, M);
      const ref = twin.gatedNorm(o, z, w, M * g.Hv, g.Dv, 1e-6);
      expectClose('gated_norm', got, ref, ref.map(Math.abs), (3 + RSQRT_U + 3 + SILU_U) * U);
      const row = g.Hv * g.Dv;
      for (const t of [0, M - 1])
        expectSameBytes(
          `gated_norm row ${t}`,
          bytesOf(await run(o.slice(t * row, (t + 1) * row), z.slice(t * row, (t + 1) * row), 1)),
          bytesOf(got.subarray(t * row, (t + 1) * row)),
        );
    });
  }

  it('partial RoPE (pairs i, i + rot/2 within the first rot dims) then * 1/8: 3U of |a c| + |b s| on rotated dims, others exact; rows invariant', async () => {
    const r = new Rand(11);
    const [heads, d, rot, pos0] = [3, 64, 16, 5];
    const half = rot / 2;
    const positions = pos0 + 8;
    const cos = f32(Array.from({ length: positions * half }, () => r.uniform(-1, 1)));
    const sin = f32(Array.from({ length: positions * half }, () => r.uniform(-1, 1)));
    const table = { cos: lab.f32(cos), sin: lab.f32(sin), half, rotPairs: half };
    const run = async (x: Float64Array, M: number, p: number) => {
      const b = lab.f32(x);
      await lab.run((rec) => qop.partialRope(rec, b, table, { M, heads, d, rot, pos0: p, scale: 0.125, round: false }));
      return lab.read(b, M * heads * d);
    };
    for (const M of ROW_COUNTS) {
      const x = r.f32s(M * heads * d);
      const cs = (row: number) => {
        const p = pos0 + Math.floor(row / heads);
        return { cos: cos.subarray(p * half, (p + 1) * half), sin: sin.subarray(p * half, (p + 1) * half) };
      };
      const got = await run(x, M, pos0);
      const ref = twin.partialRope(x, M * heads, d, rot, cs, 0.125);
      const mag = ref.map((_, i) => {
        const [row, e] = [Math.floor(i / d), i % d];
        if (e >= rot) return 0;
        const { cos: c, sin: s } = cs(row);
        const j = e % half;
        const [a, b] = e < half ? [x[row * d + e], x[row * d + e + half]] : [x[row * d + e], x[row * d + e - half]];
        return 0.125 * (Math.abs(a * c[j]) + Math.abs(b * s[j]));
      });
      expectClose(`partial_rope M ${M}`, got, ref, mag, 3 * U);
      const last = await run(x.slice((M - 1) * heads * d), 1, pos0 + M - 1);
      expectSameBytes(`partial_rope M ${M} last row alone`, bytesOf(last), bytesOf(got.subarray((M - 1) * heads * d)));
    }
  });

  it(`output gate, SwiGLU and residual add: ${SIGMOID_U + 1}U, ${SILU_U + 1}U and U of |ref|`, async () => {
    const r = new Rand(12);
    const [M, heads, d] = [4, 3, 16];
    const n = M * heads * d;
    const x = r.f32s(n);
    const qg = r.f32s(M * heads * 2 * d, 3);
    const bx = lab.f32(x);
    const bqg = lab.f32(qg);
    await lab.run((rec) => qop.outGate(rec, bx, bqg, { M, heads, d, stride: 2 * d, gateOff: d, round: false }));
    const gref = twin.outGate(x, qg, d, 2 * d, d);
    expectClose('out_gate', await lab.read(bx, n), gref, gref.map(Math.abs), (SIGMOID_U + 1) * U);
    const u = r.f32s(n);
    const gx = r.f32s(n, 3);
    const bg = lab.f32(gx);
    await lab.run((rec) => qop.swiglu(rec, bg, lab.f32(u), n, false));
    const sref = twin.swiglu(gx, u);
    expectClose('swiglu', await lab.read(bg, n), sref, sref.map(Math.abs), (SILU_U + 1) * U);
    const bh = lab.f32(x);
    await lab.run((rec) => qop.add(rec, bh, lab.f32(u), n, false));
    const aref = x.map((v, i) => v + u[i]);
    expectClose('add', await lab.read(bh, n), aref, aref.map(Math.abs), U);
  });
});

/** The recurrence on magnitudes: |S0|, |k|, |q|, |v|, with v - S k replaced by |v| + |S| |k| (no cancellation). */
function envelope(S0: Float64Array, qk: Float64Array, c: Float64Array, gb: Float64Array, M: number, g: GdnGeometry) {
  const abs = (a: Float64Array) => a.map(Math.abs);
  const { Hk, Hv, Dk, Dv, C } = g;
  const kd = Hk * Dk;
  const S = abs(S0);
  const q = abs(qk);
  const cc = abs(c);
  const o = new Float64Array(M * Hv * Dv);
  for (let t = 0; t < M; t++)
    for (let h = 0; h < Hv; h++) {
      const hk = Math.floor(h / (Hv / Hk));
      const [gg, beta] = [gb[2 * (t * Hv + h)], gb[2 * (t * Hv + h) + 1]];
      const Sh = S.subarray(h * Dk * Dv, (h + 1) * Dk * Dv);
      const qb = t * 2 * kd + hk * Dk;
      const kb = qb + kd;
      for (let i = 0; i < Dk * Dv; i++) Sh[i] *= gg;
      for (let j = 0; j < Dv; j++) {
        let m = 0;
        for (let i = 0; i < Dk; i++) m += Sh[i * Dv + j] * q[kb + i];
        const delta = (cc[t * C + 2 * kd + h * Dv + j] + m) * beta;
        for (let i = 0; i < Dk; i++) Sh[i * Dv + j] += q[kb + i] * delta;
        let acc = 0;
        for (let i = 0; i < Dk; i++) acc += Sh[i * Dv + j] * q[qb + i];
        o[(t * Hv + h) * Dv + j] = acc;
      }
    }
  return o;
}
