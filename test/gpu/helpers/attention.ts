/**
 * The attention kernels' test model (test/gpu/kernels-attention.test.ts): which key each row reads
 * (derived from the documented cache semantics, kv-cache.ts and the attention.wgsl header), seeded
 * cases, the float64 reference with its error bound, the WGSL replayed in f32, and the runners that
 * drive op.attention as target.ts does.
 */
import { expect } from 'vitest';
import type { Recorder } from '../../../src/gpu/recorder.ts';
import * as op from '../../../src/model/ops.ts';
import { createAttentionScratch, segmentCount, SEG_MAX_EXACT } from '../../../src/model/attention-op.ts';
import { attendRow } from '../../../src/reference/gemma4/layer.ts';
import { EXP_REF_ULP, SENTINEL, U, expectSameBytes, range, type Lab, type Rand } from './kernel-lab.ts';

// ---- attention: which key each term reads, derived from the documented cache semantics ----------

export type Mode = op.AttentionMode;
export interface KeyLoc {
  stage: boolean;
  row: number;
}
export const mod = (a: number, m: number) => ((a % m) + m) % m;

/**
 * The keys row j (position p + j) of a block reads, in order (kv-cache.ts, attention.wgsl header):
 *  - linear: cache rows 0 .. p+j (the block's rows are already in the cache).
 *  - physical: the ring as it is after writing block rows 0..j (position pos -> slot (pos-base) mod W),
 *    read in slot order 0 .. min(p+j+1, W)-1.
 *  - chrono: positions max(0, p+j-W+1) .. p+j in order; positions >= p come from the staging rows.
 *  - draft (the assistant's query-only read of the target's ring, p = the target's next position): the
 *    last min(p, span) positions p-n .. p-1 in order, every row alike; span W+1 adds position p-1-W,
 *    which the ring's last write evicted and which the staging row 0 holds.
 */
export function expectedKeys(mode: Mode, W: number, base: number, p: number, j: number, span = 0): KeyLoc[] {
  const pos = p + j;
  if (mode === 'linear') return range(pos + 1).map((row) => ({ stage: false, row }));
  if (mode === 'draft') {
    const n = Math.min(p, span);
    return range(n)
      .map((i) => p - n + i)
      .map((kp) => (kp === p - 1 - W ? { stage: true, row: 0 } : { stage: false, row: mod(kp - base, W) }));
  }
  const n = Math.min(pos + 1, W);
  if (mode === 'physical') {
    const ring: KeyLoc[] = range(W).map((row) => ({ stage: false, row }));
    for (let t = 0; t <= j; t++) ring[mod(p + t - base, W)] = { stage: true, row: t };
    return ring.slice(0, n);
  }
  // chrono, and masked (the masked-out keys of the widened range contribute exact zeros)
  const keys: KeyLoc[] = [];
  for (let kp = pos - n + 1; kp <= pos; kp++)
    keys.push(kp >= p ? { stage: true, row: kp - p } : { stage: false, row: mod(kp - base, W) });
  return keys;
}

/** Position held by each ring slot before the block (positions < p), or -1 if never written. */
export function slotPositions(W: number, base: number, p: number): number[] {
  const at = new Array<number>(W).fill(-1);
  for (let pos = Math.max(0, p - W); pos < p; pos++) at[mod(pos - base, W)] = pos;
  return at;
}

export interface AttnCase {
  name: string;
  mode: Mode;
  heads: number;
  kvHeads: number;
  d: number;
  M: number;
  p: number;
  window: number; // ring slots W (sliding) ; ignored for linear
  base: number;
  span?: number; // draft mode: W or W + 1
}

export interface AttnData {
  q: Float64Array; // [M, heads, d]
  kCache: Float64Array; // [slots, kvHeads, d]
  vCache: Float64Array;
  kStage: Float64Array; // [M, kvHeads, d] (ring modes)
  vStage: Float64Array;
  slots: number;
}

export function attnData(r: Rand, c: AttnCase): AttnData {
  const row = c.kvHeads * c.d;
  const slots = c.mode === 'linear' ? c.p + c.M + 3 : c.window;
  const sd = 0.6; // scores q.k of a few units: a softmax that is neither flat nor one-hot
  return {
    q: r.f32s(c.M * c.heads * c.d, sd),
    kCache: r.f32s(slots * row, sd),
    vCache: r.f32s(slots * row),
    kStage: r.f32s(c.M * row, sd),
    vStage: r.f32s(c.M * row),
    slots,
  };
}

/**
 * CPU attention of every row (src/reference attendRow, float64), its magnitude mag = sum_i p_i |v_i|, and
 * the f32 error bound of the kernel's arithmetic (attention.wgsl; attentionF32 replays it) for the
 * partition `nsegOf` (S segments of L = ceil(n / S) keys for a row of n keys; masked keys included, they
 * add exact zeros). First order, with A the spread of the row's scores (max - min over the keys it
 * attends to):
 * - weight e_i = exp_ref((s_i - m) + c_i): exp_ref's EXP_REF_ULP (2 EXP_REF_ULP U relative) and the two
 *   roundings of its argument (U |s_i - m| each, at most A U); the compensated score s_i + c_i itself is
 *   exact to second order;
 * - segment sums sum e_i v_i and sum e_i: the products (1) and a plain f32 chain over L keys (L - 1);
 * - combine: w_g = exp_ref(m_g - M) (2 EXP_REF_ULP U + A U), w_g * o_g (1), a chain over S segments (S - 1);
 * - numerator and denominator each: (L + S + 4 EXP_REF_ULP + 3A) U relative to their magnitudes (the
 *   numerator's is mag; the denominator's error moves the output by |out| <= mag), the division 1:
 *   |error| <= (2 (L + S + 4 EXP_REF_ULP + 3A) + 1) U mag.
 * For the small cases (L, S and A of a few units) that is about 50 U, for 4100 keys in 64 segments 330 U.
 */
export function attnReference(
  c: AttnCase,
  x: AttnData,
  nsegOf: (n: number) => number = exactPlan(),
): { out: Float64Array; mag: Float64Array; bound: Float64Array } {
  const row = c.kvHeads * c.d;
  const out = new Float64Array(c.M * c.heads * c.d);
  const mag = new Float64Array(out.length);
  const bound = new Float64Array(out.length);
  for (let j = 0; j < c.M; j++) {
    const keys = expectedKeys(c.mode, c.window, c.base, c.p, j, c.span);
    const K = keys.map((k) => (k.stage ? x.kStage : x.kCache).subarray(k.row * row, (k.row + 1) * row));
    const V = keys.map((k) => (k.stage ? x.vStage : x.vCache).subarray(k.row * row, (k.row + 1) * row));
    const qj = x.q.subarray(j * c.heads * c.d, (j + 1) * c.heads * c.d);
    out.set(attendRow(qj, K, V, c.heads, c.kvHeads, c.d), j * c.heads * c.d);
    // magnitude: the same softmax weights applied to |v|
    const absV = V.map((v) => v.map(Math.abs));
    mag.set(attendRow(qj, K, absV, c.heads, c.kvHeads, c.d), j * c.heads * c.d);
    const n = keysWithMask(c, j).keys.length;
    const S = nsegOf(n);
    const L = Math.ceil(n / S);
    for (let h = 0; h < c.heads; h++) {
      const kvh = Math.floor(h / (c.heads / c.kvHeads));
      let lo = Infinity,
        hi = -Infinity;
      for (const k of K) {
        let s = 0;
        for (let e = 0; e < c.d; e++) s += qj[h * c.d + e] * k[kvh * c.d + e];
        lo = Math.min(lo, s);
        hi = Math.max(hi, s);
      }
      const rounds = 2 * (L + S + 4 * EXP_REF_ULP + 3 * (hi - lo)) + 1;
      const at = (j * c.heads + h) * c.d;
      for (let ch = 0; ch < c.d; ch++) bound[at + ch] = rounds * U * mag[at + ch];
    }
  }
  return { out, mag, bound };
}

/**
 * Runs op.attention as target.ts does (linear: kStage = kCache, the block's rows are in the cache), on
 * scratch from createAttentionScratch filled with SENTINEL, so that a pass reading what no earlier pass
 * wrote shows. `prefill`: the prefill scratch (exact plan capped at one segment per row). `fused`:
 * force the fused or the four-pass path (undefined: the device's, attentionFused).
 */
export function recordAttention(
  lab: Lab,
  rec: Recorder,
  c: AttnCase,
  bufs: { q: GPUBuffer; kCache: GPUBuffer; vCache: GPUBuffer; kStage: GPUBuffer; vStage: GPUBuffer; out: GPUBuffer },
  round: boolean,
  maxKeys: number,
  split = 0,
  prefill = false,
  fused?: boolean,
): void {
  const scratch = createAttentionScratch(
    lab.device,
    { heads: c.heads, qWidth: c.heads * c.d, maxKeys, prefillRows: c.M, stepRows: c.M },
    'test-attn',
  );
  for (const b of scratch.buffers)
    lab.device.queue.writeBuffer(lab.own(b), 0, new Uint32Array(b.size / 4).fill(SENTINEL));
  op.attention(rec, {
    M: c.M,
    heads: c.heads,
    kvHeads: c.kvHeads,
    d: c.d,
    mode: c.mode,
    window: c.window,
    base: c.base,
    p: c.p,
    round,
    split,
    span: c.span,
    q: bufs.q,
    kCache: bufs.kCache,
    vCache: bufs.vCache,
    kStage: c.mode === 'linear' ? bufs.kCache : bufs.kStage,
    vStage: c.mode === 'linear' ? bufs.vCache : bufs.vStage,
    out: bufs.out,
    scratch: prefill ? scratch.prefill : scratch.step,
    fused,
  });
}

/** Uploads a case's data and runs op.attention on it; returns the output's bytes. */
export async function runAttention(lab: Lab, c: AttnCase, x: AttnData, o: AttnRunOptions = {}): Promise<Uint8Array> {
  const n = c.M * c.heads * c.d;
  const out = lab.sentinel(n);
  const maxKeys =
    c.mode === 'masked' ? op.maskedKeyCount(c.p, c.M, c.window) : c.mode === 'linear' ? x.slots : c.window + 1;
  await lab.run((rec) =>
    recordAttention(
      lab,
      rec,
      c,
      {
        q: lab.f32(x.q),
        kCache: lab.f32(x.kCache),
        vCache: lab.f32(x.vCache),
        kStage: lab.f32(x.kStage),
        vStage: lab.f32(x.vStage),
        out,
      },
      o.round ?? false,
      maxKeys,
      o.split ?? 0,
      o.prefill ?? false,
      o.fused,
    ),
  );
  return lab.bytes(out, n);
}
export interface AttnRunOptions {
  round?: boolean;
  split?: number;
  prefill?: boolean;
  fused?: boolean;
}

/**
 * The fused path (seg_fused + combine) and the four passes, forced in turn on the same inputs, give the
 * same bytes: the same operations in the same order per value (attention.wgsl, seg_fused). Software
 * adapters do not contract multiply-adds, so this holds here whatever the pipeline; a GPU runs one
 * path only (attentionFused), so the engine never relies on it there.
 */
export async function expectFusedSame(lab: Lab, c: AttnCase, x: AttnData, o: AttnRunOptions = {}): Promise<void> {
  const four = await runAttention(lab, c, x, { ...o, fused: false });
  const fused = await runAttention(lab, c, x, { ...o, fused: true });
  const what = [o.round && 'bf16', o.split && `split ${o.split}`, o.prefill && 'prefill plan']
    .filter(Boolean)
    .join(', ');
  expectSameBytes(`attention.${c.mode} fused == four passes${what ? ` (${what})` : ''}`, fused, four);
}

/**
 * A block's row j computed the way the chain computes it: the inputs of a dispatch whose row 0 is
 * that row. Linear: position p + j alone (the block's rows are already in the cache). Physical and
 * chrono: position p + j alone, after block rows 0..j-1 were committed to their ring slots. Draft:
 * the same query read alone. Masked (whose widened key range depends on M by design): the tail block
 * p + j .. p + M - 1, which has the same widened range while the ring is not full (p + M <= W).
 */
export function chainStep(c: AttnCase, x: AttnData, j: number): { step: AttnCase; x: AttnData } {
  const row = c.kvHeads * c.d;
  const qRow = c.heads * c.d;
  const q = x.q.subarray(j * qRow, (j + 1) * qRow);
  if (c.mode === 'linear') return { step: { ...c, M: 1, p: c.p + j }, x: { ...x, q } };
  if (c.mode === 'draft') return { step: { ...c, M: 1 }, x: { ...x, q } };
  const kCache = Float64Array.from(x.kCache),
    vCache = Float64Array.from(x.vCache);
  for (let t = 0; t < j; t++) {
    const slot = mod(c.p + t - c.base, c.window);
    kCache.set(x.kStage.subarray(t * row, (t + 1) * row), slot * row);
    vCache.set(x.vStage.subarray(t * row, (t + 1) * row), slot * row);
  }
  const M = c.mode === 'masked' ? c.M - j : 1;
  return {
    step: { ...c, M, p: c.p + j },
    x: {
      ...x,
      kCache,
      vCache,
      q: x.q.subarray(j * qRow, (j + M) * qRow),
      kStage: x.kStage.subarray(j * row, (j + M) * row),
      vStage: x.vStage.subarray(j * row, (j + M) * row),
    },
  };
}

/** Keys of row j as (stage?, row) and, in masked mode, which of them are masked out (widened range). */
export function keysWithMask(c: AttnCase, j: number): { keys: KeyLoc[]; masked: boolean[] } {
  if (c.mode !== 'masked') {
    const keys = expectedKeys(c.mode, c.window, c.base, c.p, j, c.span);
    return { keys, masked: keys.map(() => false) };
  }
  const lo = Math.max(0, c.p + 1 - c.window);
  const pos = c.p + j;
  const keys: KeyLoc[] = [],
    masked: boolean[] = [];
  for (let kp = lo; kp < c.p + c.M; kp++) {
    keys.push(kp >= c.p ? { stage: true, row: kp - c.p } : { stage: false, row: mod(kp - c.base, c.window) });
    masked.push(kp > pos || kp + c.window <= pos);
  }
  return { keys, masked };
}

/**
 * shaders/attention.wgsl replayed in f32 on the CPU, one Math.fround per WGSL operation, so that it
 * gives the GPU's bits wherever the compiler does not fuse a multiply-add (lavapipe and SwiftShader do
 * not). `nsegOf(n)` is the partition: the kernel's plans are exactPlan(...) and () => S.
 * With one segment this is the sequential softmax and P.V of the kernel before it was segmented
 * (`softmax` + `pv`, commit b36cf3a): that kernel equalled this function byte for byte on both adapters.
 */
export function attentionF32(c: AttnCase, x: AttnData, nsegOf: (n: number) => number): Float32Array {
  const f = Math.fround;
  const row = c.kvHeads * c.d;
  const out = new Float32Array(c.M * c.heads * c.d);
  const ksumAdd = (s: [number, number], v: number): void => {
    const t = f(s[0] + v);
    const comp = Math.abs(s[0]) >= Math.abs(v) ? f(f(s[0] - t) + v) : f(f(v - t) + s[0]);
    s[0] = t;
    s[1] = f(s[1] + comp);
  };
  for (let j = 0; j < c.M; j++) {
    const { keys, masked } = keysWithMask(c, j);
    const n = keys.length;
    const nseg = nsegOf(n);
    const len = Math.ceil(n / nseg);
    for (let h = 0; h < c.heads; h++) {
      const kvh = Math.floor(h / (c.heads / c.kvHeads));
      const qOff = (j * c.heads + h) * c.d;
      const at = (k: KeyLoc) => k.row * row + kvh * c.d;
      // scores: compensated dot over head_dim, stored as value + compensation
      const score: number[] = [],
        comp: number[] = [];
      keys.forEach((k, i) => {
        if (masked[i]) return void (score.push(f(-1e30)), comp.push(0));
        const kv = k.stage ? x.kStage : x.kCache;
        const acc: [number, number] = [0, 0];
        for (let e = 0; e < c.d; e++) ksumAdd(acc, f(x.q[qOff + e] * kv[at(k) + e]));
        const t = f(acc[0] + acc[1]);
        score.push(t);
        comp.push(f(f(acc[0] - t) + acc[1]));
      });
      // per segment: max, weights and their sum, P.V (plain f32, key order)
      const m: number[] = [],
        l: number[] = [],
        o: Float32Array[] = [];
      for (let g = 0; g < nseg; g++) {
        const lo = Math.min(n, g * len),
          hi = Math.min(n, lo + len);
        let mx = lo < hi ? score[lo] : f(-1e30);
        for (let i = lo + 1; i < hi; i++) mx = Math.max(mx, score[i]);
        let sum = 0;
        const og = new Float32Array(c.d);
        for (let i = lo; i < hi; i++) {
          const e = expRefF32(f(f(score[i] - mx) + comp[i]));
          sum = f(sum + e);
          const v = keys[i].stage ? x.vStage : x.vCache;
          for (let ch = 0; ch < c.d; ch++) og[ch] = f(og[ch] + f(e * v[at(keys[i]) + ch]));
        }
        m.push(mx), l.push(sum), o.push(og);
      }
      // combine, segment 0 first
      const M = Math.max(...m);
      for (let ch = 0; ch < c.d; ch++) {
        let w = expRefF32(f(m[0] - M));
        let lt = f(w * l[0]),
          ot = f(w * o[0][ch]);
        for (let g = 1; g < nseg; g++) {
          w = expRefF32(f(m[g] - M));
          lt = f(lt + f(w * l[g]));
          ot = f(ot + f(w * o[g][ch]));
        }
        out[qOff + ch] = f(ot / lt);
      }
    }
  }
  return out;
}

/** The exact plan's partition: min(cap, ceil(n / 64)) segments, at least one (src/model/attention-op.ts). */
export const exactPlan =
  (cap = SEG_MAX_EXACT) =>
  (n: number) =>
    segmentCount(n, 0, cap);

/** shaders/common.wgsl exp_ref, one f32 operation at a time (WGSL round() is round-half-to-even). */
export function expRefF32(x: number): number {
  const f = Math.fround;
  if (x < -103) return 0;
  const y = f(x * f(Math.LOG2E));
  let n = Math.round(y);
  if (n - y === 0.5 && n % 2 !== 0) n -= 1;
  const r = f(f(x - f(n * f(0.693145751953125))) - f(n * f(1.428606765330187e-6)));
  let p = f(1 / 5040);
  for (const k of [1 / 720, 1 / 120, 1 / 24, 1 / 6, 0.5, 1, 1]) p = f(f(p * r) + f(k));
  return f(p * 2 ** n);
}

/**
 * CPU-side sanity check of expectedKeys against the meaning of the cache: a sliding row at position
 * pos sees exactly positions pos-n+1 .. pos (n = min(pos+1, W)); chrono in increasing order, physical
 * in some rotation of it (slot order).
 */
export function checkKeyOrder(c: AttnCase): void {
  const held = slotPositions(c.window, c.base, c.p);
  for (let j = 0; j < c.M; j++) {
    const seen = expectedKeys(c.mode, c.window, c.base, c.p, j, c.span).map((k) =>
      k.stage ? (c.mode === 'draft' ? c.p - 1 - c.window : c.p + k.row) : held[k.row],
    );
    let want: number[];
    if (c.mode === 'draft') {
      const n = Math.min(c.p, c.span!);
      want = range(n).map((i) => c.p - n + i);
    } else {
      const pos = c.p + j;
      const n = Math.min(pos + 1, c.window);
      want = range(n).map((i) => pos - n + 1 + i);
    }
    if (c.mode !== 'physical') expect(seen, `${c.mode} keys of row ${j}`).toEqual(want);
    else
      expect(
        [...seen].sort((a, b) => a - b),
        `physical keys of row ${j}`,
      ).toEqual(want);
  }
}
