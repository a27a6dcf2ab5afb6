/**
 * Every kernel of src/model/ops.ts against a CPU float64 computation of the same math, on seeded random
 * data and several small shapes, driven exactly as the engine drives them (Recorder + the ops wrappers,
 * weights uploaded from safetensors bytes by TensorUploader, split into row parts where asked).
 *
 * Tolerances (f32 outputs): |gpu - ref| <= 1e-5 |ref| + MAG_TOL * mag, where `mag` is the sum of the
 * absolute values of the terms the kernel adds up (the scale at which f32 rounding acts, so that
 * cancellation does not turn a correct result into a failure). MAG_TOL is 16 f32 ulps, except for
 * attention, where exp() turns a score's rounding (relative to sum |q||k|) into a relative weight
 * error and the sums over keys are plain f32: there the bound is 1e-5 of sum_i p_i |v_i|, and for
 * the inexact split variants, the worst-case bound of a plain f32 sum (n ulps of the magnitudes).
 * The worst error / bound ratio per op is printed at the end.
 *
 * bf16 outputs (the `round` flag): the GPU's bits must equal the CPU value rounded to nearest-even
 * (an independent implementation below), unless the f32 error range around the exact value straddles
 * a bf16 rounding boundary; only a tiny number of such near-ties may go the other way.
 *
 * Row invariance (DESIGN.md, "exact by construction"): M rows computed together and each row alone
 * (M = 1, or the chain step that row stands for) give byte-identical outputs.
 *
 * scripts/test.sh runs this file on lavapipe and again on SwiftShader (RINGSIDE_ADAPTER says which
 * adapter must be in use; test/gpu/gpu-context.ts checks it).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import { KernelCache } from '../../src/gpu/kernels.ts';
import { Recorder } from '../../src/gpu/recorder.ts';
import { readBytes, storageBuffer, uploadBuffer } from '../../src/gpu/buffers.ts';
import { TensorUploader } from '../../src/gpu/upload.ts';
import * as op from '../../src/model/ops.ts';
import { attentionFused, createAttentionScratch, segmentCount, SEG_MAX_EXACT } from '../../src/model/attention-op.ts';
import type { GpuLinear } from '../../src/model/gpu-weights.ts';
import { ropeTable } from '../../src/model/rope-tables.ts';
import type { AffineLinear, DenseLinear } from '../../src/format/model-description.ts';
import type { RopeSpec } from '../../src/format/config.ts';
import { writeSafetensors, type TensorToWrite } from '../../src/format/safetensors-writer.ts';
import { readSafetensorsHeader } from '../../src/format/safetensors.ts';
import { bytesSource } from '../../src/format/bytesource.ts';
import { dequantAffine } from '../../src/format/dequant.ts';
import { bf16ToNumber, f16ToNumber } from '../../src/format/dtype.ts';
import { geluTanh, matvec, rmsNorm, softcap as softcapRef } from '../../src/reference/ops.ts';
import { attendRow } from '../../src/reference/layer.ts';
import { Rope } from '../../src/reference/rope.ts';

const ADAPTER = process.env.RINGSIDE_ADAPTER ?? 'default adapter';
const EPS = 2 ** -24; // f32 unit roundoff
const REL_TOL = 1e-5;
const MAG_TOL = 16 * EPS;
const ROW_COUNTS = [2, 3, 4, 8];

// ---- seeded random data ------------------------------------------------------------------------

class Rand {
  private s: number;
  constructor(seed: number) {
    this.s = seed >>> 0;
  }
  /** mulberry32 */
  next(): number {
    this.s = (this.s + 0x6d2b79f5) >>> 0;
    let t = this.s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  uniform(a: number, b: number): number {
    return a + (b - a) * this.next();
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  normal(sd = 1): number {
    const u = 1 - this.next();
    return sd * Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * this.next());
  }
  /** n f32-representable normal values, as float64. */
  f32s(n: number, sd = 1): Float64Array {
    return Float64Array.from({ length: n }, () => Math.fround(this.normal(sd)));
  }
}

// ---- bit helpers -------------------------------------------------------------------------------

const SCRATCH_F = new Float32Array(1);
const SCRATCH_U = new Uint32Array(SCRATCH_F.buffer);
function f32Bits(x: number): number {
  SCRATCH_F[0] = x;
  return SCRATCH_U[0];
}
function bitsF32(u: number): number {
  SCRATCH_U[0] = u >>> 0;
  return SCRATCH_F[0];
}
/** bf16 bits of x truncated (generating data: any bf16 value will do). */
function bf16Trunc(x: number): number {
  return f32Bits(x) >>> 16;
}

/**
 * Round-to-nearest-even of the f32 value of x to bf16, by comparing the distances to the two bf16
 * neighbours (independent of the bit trick in shaders/common.wgsl). Above the largest bf16 the upper
 * neighbour is 2^128 (infinity), as IEEE rounding treats overflow.
 */
function bf16Rne(x: number): number {
  const f = Math.fround(x);
  if (!Number.isFinite(f) || f === 0) return f;
  const lo = (f32Bits(f) & 0xffff0000) >>> 0; // toward zero
  const hi = (lo + 0x10000) >>> 0; // away from zero, same sign
  const vlo = bitsF32(lo);
  const hiIsInf = (hi & 0x7fffffff) === 0x7f800000;
  const vhi = hiIsInf ? Math.sign(f) * 2 ** 128 : bitsF32(hi);
  const dlo = Math.abs(f - vlo);
  const dhi = Math.abs(vhi - f);
  const pickHi = dhi < dlo || (dhi === dlo && (lo & 0x10000) !== 0);
  return pickHi ? bitsF32(hi) : vlo;
}

/** f16 bits of a random normal value with |x| in [2^-6, 2^3) (no subnormals, inf or NaN). */
function randomF16Bits(r: Rand): number {
  return ((r.int(2) << 15) | ((9 + r.int(9)) << 10) | r.int(1024)) >>> 0;
}

const bytesOf = (a: ArrayBufferView) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
const range = (n: number) => Array.from({ length: n }, (_, i) => i);
const SENTINEL = 0xdeadbeef; // a float nothing computes (-6.3e18): marks elements a kernel must not touch

// ---- comparison --------------------------------------------------------------------------------

/** Worst error per op, in units of the op's bound, printed at the end. */
const worst = new Map<string, number>();
function note(opName: string, ratio: number): void {
  worst.set(opName, Math.max(worst.get(opName) ?? 0, ratio));
}

/** f32 outputs: |got - ref| <= REL_TOL |ref| + magTol * mag, element-wise. */
function expectClose(what: string, got: ArrayLike<number>, ref: ArrayLike<number>, mag: ArrayLike<number>, magTol = MAG_TOL): void {
  expect(got.length, `${what}: length`).toBe(ref.length);
  const bad: string[] = [];
  let nbad = 0;
  let worstRatio = 0;
  for (let i = 0; i < ref.length; i++) {
    const err = Math.abs(got[i] - ref[i]);
    const bound = REL_TOL * Math.abs(ref[i]) + magTol * mag[i];
    if (!(err <= bound)) {
      nbad++;
      if (bad.length < 6) bad.push(`[${i}] got ${got[i]} want ${ref[i]} (err ${err.toExponential(2)}, bound ${bound.toExponential(2)})`);
    } else if (bound > 0 && err > worstRatio * bound) {
      worstRatio = err / bound;
    }
  }
  note(what.split(' ')[0], worstRatio);
  expect(nbad, `${what}: ${nbad} of ${ref.length} elements out of tolerance: ${bad.join('; ')}`).toBe(0);
}

/** Signed-magnitude bf16 bits -> an integer line on which adjacent bf16 values differ by 1. */
function bf16Ordinal(f32: number): number {
  const b = f32Bits(f32) >>> 16;
  return b & 0x8000 ? -(b & 0x7fff) : b;
}

/** Spacing of bf16 values around x. */
function bf16Ulp(x: number): number {
  const a = Math.abs(x);
  return a < 2 ** -126 ? 2 ** -133 : 2 ** (Math.floor(Math.log2(a)) - 7);
}

/** The f32 error bound of expectClose, as an interval around each value. */
function f32Interval(exact: ArrayLike<number>, mag: ArrayLike<number>, magTol = MAG_TOL): { lo: Float64Array; hi: Float64Array } {
  const lo = new Float64Array(exact.length), hi = new Float64Array(exact.length);
  for (let i = 0; i < exact.length; i++) {
    const s = REL_TOL * Math.abs(exact[i]) + magTol * mag[i];
    lo[i] = exact[i] - s;
    hi[i] = exact[i] + s;
  }
  return { lo, hi };
}

/** [lo, hi] * k for a scalar k of either sign. */
function scaleInterval(lo: number, hi: number, k: number): [number, number] {
  return k >= 0 ? [lo * k, hi * k] : [hi * k, lo * k];
}

/**
 * bf16 outputs (the `round` flag). `exact` is the float64 value just before the kernel's last
 * rounding (earlier bf16 roundings of the kernel applied to exact values), [lo, hi] the range the
 * kernel's f32 value can have there (the f32 error bound, earlier roundings propagated by the
 * caller). The GPU's value must be a bf16 between bf16Rne(lo) and bf16Rne(hi): equal to
 * bf16Rne(exact), except where the range straddles a rounding boundary. Among well-conditioned
 * elements (range under 1/16 bf16 ulp) at most `maxNearTies` may take the other side of a tie;
 * ill-conditioned ones (f32 cancellation, e.g. gelu of a large negative x) only need to be in range.
 */
function expectBf16(what: string, got: Float32Array, exact: ArrayLike<number>, lo: ArrayLike<number> = exact, hi: ArrayLike<number> = exact, maxNearTies = Math.max(2, Math.ceil(got.length / 500))): number {
  expect(got.length, `${what}: length`).toBe(exact.length);
  const bad: string[] = [];
  let nbad = 0;
  let ties = 0;
  for (let i = 0; i < got.length; i++) {
    const want = bf16Rne(exact[i]);
    const g = got[i];
    if ((f32Bits(g) & 0xffff) !== 0 && !Number.isNaN(g)) {
      nbad++;
      if (bad.length < 6) bad.push(`[${i}] ${g} is not a bf16 value`);
      continue;
    }
    if (f32Bits(g) === f32Bits(want) || (g === 0 && want === 0)) continue;
    const o = bf16Ordinal(g);
    if (Number.isFinite(g) && o >= bf16Ordinal(bf16Rne(lo[i])) && o <= bf16Ordinal(bf16Rne(hi[i]))) {
      if (hi[i] - lo[i] < bf16Ulp(exact[i]) / 16) ties++;
      continue;
    }
    nbad++;
    if (bad.length < 6) bad.push(`[${i}] got ${g} want ${want} (exact ${exact[i]}, f32 range [${lo[i]}, ${hi[i]}])`);
  }
  expect(nbad, `${what}: ${nbad} of ${got.length} elements wrong: ${bad.join('; ')}`).toBe(0);
  expect(ties, `${what}: ${ties} well-conditioned elements on the other side of a bf16 tie (at most ${maxNearTies} expected)`).toBeLessThanOrEqual(maxNearTies);
  nearTies.set(what.split(' ')[0], (nearTies.get(what.split(' ')[0]) ?? 0) + ties);
  return ties;
}
const nearTies = new Map<string, number>();
/** Elements of the row kernels' outputs bit-identical to the affine kernel's (same arithmetic sequence): [same, total]. */
const sameAsAffine = new Map<string, [number, number]>();

/** Byte equality with a useful message (first differing float). */
function expectSameBytes(what: string, a: Uint8Array, b: Uint8Array): void {
  expect(a.byteLength, `${what}: byte length`).toBe(b.byteLength);
  let first = -1;
  let count = 0;
  for (let i = 0; i < a.byteLength; i++) {
    if (a[i] !== b[i]) {
      if (first < 0) first = i;
      count++;
    }
  }
  if (first >= 0) {
    const fa = new Float32Array(a.buffer, a.byteOffset, a.byteLength >> 2);
    const fb = new Float32Array(b.buffer, b.byteOffset, b.byteLength >> 2);
    const e = first >> 2;
    expect.fail(`${what}: ${count} bytes differ, first at float ${e}: ${fa[e]} vs ${fb[e]}`);
  }
}

// ---- GPU plumbing ------------------------------------------------------------------------------

class Lab {
  readonly device: GPUDevice;
  readonly kernels: KernelCache;
  readonly dummy: GPUBuffer;
  private readonly owned: GPUBuffer[] = [];
  constructor(readonly ctx: GpuContext) {
    this.device = ctx.device;
    this.kernels = new KernelCache(this.device);
    this.dummy = storageBuffer(this.device, 16, 'dummy');
  }
  own<T extends GPUBuffer>(b: T): T {
    this.owned.push(b);
    return b;
  }
  f32(data: ArrayLike<number>, label = 'f32'): GPUBuffer {
    return this.own(uploadBuffer(this.device, Float32Array.from(data), label));
  }
  u32(data: ArrayLike<number>, label = 'u32'): GPUBuffer {
    return this.own(uploadBuffer(this.device, Uint32Array.from(data), label));
  }
  /** A buffer of `floats` floats, every one set to SENTINEL. */
  sentinel(floats: number, label = 'out'): GPUBuffer {
    return this.u32(new Uint32Array(floats).fill(SENTINEL), label);
  }
  /** Records with `fn`, submits, and fails on any validation error (shader compile included). */
  async run(fn: (rec: Recorder) => void): Promise<void> {
    this.device.pushErrorScope('validation');
    const rec = new Recorder(this.device, this.kernels, 'kernel-test');
    fn(rec);
    rec.submit();
    const err = await this.device.popErrorScope();
    if (err) throw new Error(`WebGPU validation error: ${err.message}`);
    await this.device.queue.onSubmittedWorkDone();
  }
  async bytes(buf: GPUBuffer, floats: number, offsetFloats = 0): Promise<Uint8Array> {
    return readBytes(this.device, buf, floats * 4, offsetFloats * 4);
  }
  async read(buf: GPUBuffer, floats: number, offsetFloats = 0): Promise<Float32Array> {
    const b = await this.bytes(buf, floats, offsetFloats);
    return new Float32Array(b.buffer, b.byteOffset, floats);
  }
  async readU32(buf: GPUBuffer, n: number): Promise<Uint32Array> {
    const b = await readBytes(this.device, buf, n * 4);
    return new Uint32Array(b.buffer, b.byteOffset, n);
  }
  release(): void {
    this.owned.splice(0).forEach((b) => b.destroy());
  }
  destroy(): void {
    this.release();
    this.dummy.destroy();
  }
}

/** Uploads tensors the way uploadWeights does: safetensors bytes -> TensorRefs -> TensorUploader (row parts). */
async function uploadTensors(lab: Lab, tensors: TensorToWrite[], rowsPerPart?: number) {
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

interface AffineCase {
  N: number; // out features (rows of W)
  K: number; // in features
  bits: 2 | 4 | 8;
  gs: number;
  rowsPerPart?: number;
}
interface AffineWeights {
  lin: GpuLinear;
  codes: Uint32Array; // [N, K]
  scales: Float64Array; // [N, K/gs]
  biases: Float64Array;
  w: Float64Array; // dequantized [N, K]
}

/** A random MLX-affine linear (bf16 scales and biases centring the codes), uploaded in row parts. */
async function affineLinear(lab: Lab, r: Rand, c: AffineCase): Promise<AffineWeights> {
  const { N, K, bits, gs } = c;
  const perWord = 32 / bits;
  const groups = K / gs;
  const codes = Uint32Array.from({ length: N * K }, () => r.int(1 << bits));
  const words = new Uint32Array((N * K) / perWord);
  for (let n = 0; n < N; n++) {
    for (let k = 0; k < K; k++) words[(n * K + k) / perWord | 0] |= codes[n * K + k] << (bits * (k % perWord));
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
  const { refs, gpu } = await uploadTensors(lab, [
    { name: 'w.weight', dtype: 'U32', shape: [N, K / perWord], data: bytesOf(words) },
    { name: 'w.scales', dtype: 'BF16', shape: [N, groups], data: bytesOf(sBits) },
    { name: 'w.biases', dtype: 'BF16', shape: [N, groups], data: bytesOf(bBits) },
  ], c.rowsPerPart);
  const desc: AffineLinear = { kind: 'affine', name: 'w', outFeatures: N, inFeatures: K, bits, groupSize: gs, weight: refs[0], scales: refs[1], biases: refs[2] };
  if (c.rowsPerPart !== undefined && c.rowsPerPart < N) expect(gpu[0].parts.length).toBe(Math.ceil(N / c.rowsPerPart));
  return { lin: { desc, weight: gpu[0], scales: gpu[1], biases: gpu[2] }, codes, scales, biases, w: dequantAffine(words, scales, biases, N, K, bits, gs) };
}

type DenseDtype = 'BF16' | 'F16' | 'F32';
/** A random dense linear [N, K] in `dtype`, uploaded in row parts; returns the exact values too. */
async function denseLinear(lab: Lab, r: Rand, N: number, K: number, dtype: DenseDtype, rowsPerPart?: number): Promise<{ lin: GpuLinear; w: Float64Array }> {
  let data: Uint8Array;
  let w: Float64Array;
  if (dtype === 'F32') {
    const f = Float32Array.from({ length: N * K }, () => r.normal(0.2));
    w = Float64Array.from(f);
    data = bytesOf(f);
  } else {
    const bits = Uint16Array.from({ length: N * K }, () => (dtype === 'BF16' ? bf16Trunc(r.normal(0.2)) : randomF16Bits(r)));
    w = Float64Array.from(bits, dtype === 'BF16' ? bf16ToNumber : f16ToNumber);
    data = bytesOf(bits);
  }
  const { refs, gpu } = await uploadTensors(lab, [{ name: 'w.weight', dtype, shape: [N, K], data }], rowsPerPart);
  if (rowsPerPart !== undefined && rowsPerPart < N) expect(gpu[0].parts.length).toBe(Math.ceil(N / rowsPerPart));
  const desc: DenseLinear = { kind: 'dense', name: 'w', outFeatures: N, inFeatures: K, weight: refs[0] };
  return { lin: { desc, weight: gpu[0] }, w };
}

// ---- attention: which key each term reads, derived from the documented cache semantics ----------

type Mode = op.AttentionMode;
interface KeyLoc {
  stage: boolean;
  row: number;
}
const mod = (a: number, m: number) => ((a % m) + m) % m;

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
function expectedKeys(mode: Mode, W: number, base: number, p: number, j: number, span = 0): KeyLoc[] {
  const pos = p + j;
  if (mode === 'linear') return range(pos + 1).map((row) => ({ stage: false, row }));
  if (mode === 'draft') {
    const n = Math.min(p, span);
    return range(n).map((i) => p - n + i).map((kp) => (kp === p - 1 - W ? { stage: true, row: 0 } : { stage: false, row: mod(kp - base, W) }));
  }
  const n = Math.min(pos + 1, W);
  if (mode === 'physical') {
    const ring: KeyLoc[] = range(W).map((row) => ({ stage: false, row }));
    for (let t = 0; t <= j; t++) ring[mod(p + t - base, W)] = { stage: true, row: t };
    return ring.slice(0, n);
  }
  // chrono, and masked (the masked-out keys of the widened range contribute exact zeros)
  const keys: KeyLoc[] = [];
  for (let kp = pos - n + 1; kp <= pos; kp++) keys.push(kp >= p ? { stage: true, row: kp - p } : { stage: false, row: mod(kp - base, W) });
  return keys;
}

/** Position held by each ring slot before the block (positions < p), or -1 if never written. */
function slotPositions(W: number, base: number, p: number): number[] {
  const at = new Array<number>(W).fill(-1);
  for (let pos = Math.max(0, p - W); pos < p; pos++) at[mod(pos - base, W)] = pos;
  return at;
}

interface AttnCase {
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

interface AttnData {
  q: Float64Array; // [M, heads, d]
  kCache: Float64Array; // [slots, kvHeads, d]
  vCache: Float64Array;
  kStage: Float64Array; // [M, kvHeads, d] (ring modes)
  vStage: Float64Array;
  slots: number;
}

function attnData(r: Rand, c: AttnCase): AttnData {
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

/** CPU attention of every row (src/reference attendRow, float64) and its magnitude sum_i p_i |v_i|. */
function attnReference(c: AttnCase, x: AttnData): { out: Float64Array; mag: Float64Array } {
  const row = c.kvHeads * c.d;
  const out = new Float64Array(c.M * c.heads * c.d);
  const mag = new Float64Array(out.length);
  for (let j = 0; j < c.M; j++) {
    const keys = expectedKeys(c.mode, c.window, c.base, c.p, j, c.span);
    const K = keys.map((k) => (k.stage ? x.kStage : x.kCache).subarray(k.row * row, (k.row + 1) * row));
    const V = keys.map((k) => (k.stage ? x.vStage : x.vCache).subarray(k.row * row, (k.row + 1) * row));
    const qj = x.q.subarray(j * c.heads * c.d, (j + 1) * c.heads * c.d);
    out.set(attendRow(qj, K, V, c.heads, c.kvHeads, c.d), j * c.heads * c.d);
    // magnitude: the same softmax weights applied to |v|
    const absV = V.map((v) => v.map(Math.abs));
    mag.set(attendRow(qj, K, absV, c.heads, c.kvHeads, c.d), j * c.heads * c.d);
  }
  return { out, mag };
}

/**
 * Runs op.attention as target.ts does (linear: kStage = kCache, the block's rows are in the cache), on
 * scratch from createAttentionScratch filled with SENTINEL, so that a pass reading what no earlier pass
 * wrote shows. `prefill`: the prefill scratch (exact plan capped at one segment per row). `fused`:
 * force the fused or the four-pass path (undefined: the device's, attentionFused).
 */
function recordAttention(lab: Lab, rec: Recorder, c: AttnCase, bufs: { q: GPUBuffer; kCache: GPUBuffer; vCache: GPUBuffer; kStage: GPUBuffer; vStage: GPUBuffer; out: GPUBuffer }, round: boolean, maxKeys: number, split = 0, prefill = false, fused?: boolean): void {
  const scratch = createAttentionScratch(lab.device, { heads: c.heads, qWidth: c.heads * c.d, maxKeys, prefillRows: c.M, stepRows: c.M }, 'test-attn');
  for (const b of scratch.buffers) lab.device.queue.writeBuffer(lab.own(b), 0, new Uint32Array(b.size / 4).fill(SENTINEL));
  op.attention(rec, {
    M: c.M, heads: c.heads, kvHeads: c.kvHeads, d: c.d, mode: c.mode, window: c.window, base: c.base, p: c.p, round, split, span: c.span,
    q: bufs.q, kCache: bufs.kCache, vCache: bufs.vCache,
    kStage: c.mode === 'linear' ? bufs.kCache : bufs.kStage,
    vStage: c.mode === 'linear' ? bufs.vCache : bufs.vStage,
    out: bufs.out,
    scratch: prefill ? scratch.prefill : scratch.step,
    fused,
  });
}

/** Uploads a case's data and runs op.attention on it; returns the output's bytes. */
async function runAttention(lab: Lab, c: AttnCase, x: AttnData, o: AttnRunOptions = {}): Promise<Uint8Array> {
  const n = c.M * c.heads * c.d;
  const out = lab.sentinel(n);
  const maxKeys = c.mode === 'masked' ? op.maskedKeyCount(c.p, c.M, c.window) : c.mode === 'linear' ? x.slots : c.window + 1;
  await lab.run((rec) => recordAttention(lab, rec, c, { q: lab.f32(x.q), kCache: lab.f32(x.kCache), vCache: lab.f32(x.vCache), kStage: lab.f32(x.kStage), vStage: lab.f32(x.vStage), out }, o.round ?? false, maxKeys, o.split ?? 0, o.prefill ?? false, o.fused));
  return lab.bytes(out, n);
}
interface AttnRunOptions {
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
async function expectFusedSame(lab: Lab, c: AttnCase, x: AttnData, o: AttnRunOptions = {}): Promise<void> {
  const four = await runAttention(lab, c, x, { ...o, fused: false });
  const fused = await runAttention(lab, c, x, { ...o, fused: true });
  const what = [o.round && 'bf16', o.split && `split ${o.split}`, o.prefill && 'prefill plan'].filter(Boolean).join(', ');
  expectSameBytes(`attention.${c.mode} fused == four passes${what ? ` (${what})` : ''}`, fused, four);
}

/**
 * A block's row j computed the way the chain computes it: the inputs of a dispatch whose row 0 is
 * that row. Linear: position p + j alone (the block's rows are already in the cache). Physical and
 * chrono: position p + j alone, after block rows 0..j-1 were committed to their ring slots. Draft:
 * the same query read alone. Masked (whose widened key range depends on M by design): the tail block
 * p + j .. p + M - 1, which has the same widened range while the ring is not full (p + M <= W).
 */
function chainStep(c: AttnCase, x: AttnData, j: number): { step: AttnCase; x: AttnData } {
  const row = c.kvHeads * c.d;
  const qRow = c.heads * c.d;
  const q = x.q.subarray(j * qRow, (j + 1) * qRow);
  if (c.mode === 'linear') return { step: { ...c, M: 1, p: c.p + j }, x: { ...x, q } };
  if (c.mode === 'draft') return { step: { ...c, M: 1 }, x: { ...x, q } };
  const kCache = Float64Array.from(x.kCache), vCache = Float64Array.from(x.vCache);
  for (let t = 0; t < j; t++) {
    const slot = mod(c.p + t - c.base, c.window);
    kCache.set(x.kStage.subarray(t * row, (t + 1) * row), slot * row);
    vCache.set(x.vStage.subarray(t * row, (t + 1) * row), slot * row);
  }
  const M = c.mode === 'masked' ? c.M - j : 1;
  return {
    step: { ...c, M, p: c.p + j },
    x: { ...x, kCache, vCache, q: x.q.subarray(j * qRow, (j + M) * qRow), kStage: x.kStage.subarray(j * row, (j + M) * row), vStage: x.vStage.subarray(j * row, (j + M) * row) },
  };
}

/** Keys of row j as (stage?, row) and, in masked mode, which of them are masked out (widened range). */
function keysWithMask(c: AttnCase, j: number): { keys: KeyLoc[]; masked: boolean[] } {
  if (c.mode !== 'masked') {
    const keys = expectedKeys(c.mode, c.window, c.base, c.p, j, c.span);
    return { keys, masked: keys.map(() => false) };
  }
  const lo = Math.max(0, c.p + 1 - c.window);
  const pos = c.p + j;
  const keys: KeyLoc[] = [], masked: boolean[] = [];
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
function attentionF32(c: AttnCase, x: AttnData, nsegOf: (n: number) => number): Float32Array {
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
      const score: number[] = [], comp: number[] = [];
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
      const m: number[] = [], l: number[] = [], o: Float32Array[] = [];
      for (let g = 0; g < nseg; g++) {
        const lo = Math.min(n, g * len), hi = Math.min(n, lo + len);
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
        let lt = f(w * l[0]), ot = f(w * o[0][ch]);
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
const exactPlan = (cap = SEG_MAX_EXACT) => (n: number) => segmentCount(n, 0, cap);

/** shaders/common.wgsl exp_ref, one f32 operation at a time (WGSL round() is round-half-to-even). */
function expRefF32(x: number): number {
  const f = Math.fround;
  if (x < -103) return 0;
  const y = f(x * f(1.4426950408889634));
  let n = Math.round(y);
  if (n - y === 0.5 && n % 2 !== 0) n -= 1;
  const r = f(f(x - f(n * f(0.693145751953125))) - f(n * f(1.428606765330187e-6)));
  let p = f(1 / 5040);
  for (const k of [1 / 720, 1 / 120, 1 / 24, 1 / 6, 0.5, 1, 1]) p = f(f(p * r) + f(k));
  return f(p * 2 ** n);
}

// ---- the tests ---------------------------------------------------------------------------------

describe(`GPU kernels vs the CPU float64 reference (${ADAPTER})`, () => {
  let ctx: GpuContext;
  let lab: Lab;
  const t0 = performance.now();
  beforeAll(async () => {
    ctx = await testGpu();
    lab = new Lab(ctx);
    const rep = ctx.report;
    console.log(`adapter: ${rep.description} (${rep.architecture}), subgroups ${rep.subgroupMinSize ?? '?'}..${rep.subgroupMaxSize ?? '?'}, ` +
      `maxComputeInvocationsPerWorkgroup ${rep.limits.maxComputeInvocationsPerWorkgroup}, features [${rep.features.join(', ')}]`);
  });
  afterEach(() => lab?.release());
  afterAll(() => {
    const w = [...worst].map(([k, v]) => `${k} ${v.toFixed(3)}`).join(', ');
    const ties = [...nearTies].map(([k, v]) => `${k} ${v}`).join(', ');
    const same = [...sameAsAffine].map(([k, [n, t]]) => `${k} ${n}/${t}`).join(', ');
    console.log(`worst error / bound per op (${ADAPTER}): ${w}\nbf16 near-ties per op: ${ties}\nrow kernels bit-identical to affine: ${same}\n${((performance.now() - t0) / 1000).toFixed(1)} s`);
    lab?.destroy();
    ctx?.destroy();
  });

  // -- matmul, affine ------------------------------------------------------------------------------
  describe('matmul, affine (MLX 4/8-bit)', () => {
    const cases: (AffineCase & { M: number })[] = [
      { bits: 4, gs: 32, K: 64, N: 40, M: 3 },
      { bits: 4, gs: 64, K: 192, N: 33, M: 5, rowsPerPart: 12 },
      { bits: 4, gs: 128, K: 256, N: 24, M: 2, rowsPerPart: 10 },
      { bits: 8, gs: 32, K: 96, N: 17, M: 4, rowsPerPart: 7 },
      { bits: 8, gs: 64, K: 128, N: 64, M: 1 },
      { bits: 8, gs: 128, K: 384, N: 20, M: 3, rowsPerPart: 8 },
      { bits: 2, gs: 64, K: 128, N: 16, M: 2, rowsPerPart: 5 },
    ];
    for (const c of cases) {
      const parts = c.rowsPerPart ? Math.ceil(c.N / c.rowsPerPart) : 1;
      it(`${c.bits}-bit gs ${c.gs}: K ${c.K}, N ${c.N}, M ${c.M}, ${parts} part(s), f32 and bf16 outputs`, async () => {
        const r = new Rand(1000 + c.bits * 100 + c.gs + c.K);
        const A = await affineLinear(lab, r, c);
        const x = r.f32s(c.M * c.K);
        const xb = lab.f32(x, 'x');
        const y = lab.sentinel(c.M * c.N);
        const yb = lab.sentinel(c.M * c.N);
        await lab.run((rec) => {
          op.matmul(rec, A.lin, xb, y, { M: c.M, round: false });
          op.matmul(rec, A.lin, xb, yb, { M: c.M, round: true });
        });
        const ref = new Float64Array(c.M * c.N);
        const mag = new Float64Array(c.M * c.N);
        for (let m = 0; m < c.M; m++) {
          const o = affineReference(A, c, x, m * c.K);
          ref.set(o.ref, m * c.N);
          mag.set(o.mag, m * c.N);
        }
        expectClose('matmul.affine', await lab.read(y, c.M * c.N), ref, mag);
        const iv = f32Interval(ref, mag);
        expectBf16('matmul.affine bf16', await lab.read(yb, c.M * c.N), ref, iv.lo, iv.hi);
      });
    }

    it('writes only its columns at x/y strides (n_offset per part, padding untouched)', async () => {
      const r = new Rand(77);
      const c = { bits: 4 as const, gs: 32, K: 64, N: 21, rowsPerPart: 8 };
      const M = 3, xStride = c.K + 5, yStride = c.N + 7;
      const A = await affineLinear(lab, r, c);
      const x = r.f32s(M * xStride);
      const y = lab.sentinel(M * yStride);
      await lab.run((rec) => op.matmul(rec, A.lin, lab.f32(x), y, { M, round: false }, xStride, yStride));
      const got = await lab.read(y, M * yStride);
      const gotU = new Uint32Array(got.buffer, got.byteOffset, got.length);
      for (let m = 0; m < M; m++) {
        const { ref, mag } = affineReference(A, c, x, m * xStride);
        expectClose(`matmul.affine row ${m}`, got.subarray(m * yStride, m * yStride + c.N), ref, mag);
        for (let i = c.N; i < yStride; i++) expect(gotU[m * yStride + i], `padding y[${m}, ${i}]`).toBe(SENTINEL);
      }
    });

    for (const M of ROW_COUNTS) {
      it(`row-invariant: M = ${M} rows together == each row alone, byte for byte (3 parts)`, async () => {
        const r = new Rand(500 + M);
        const c = { bits: 4 as const, gs: 64, K: 128, N: 30, rowsPerPart: 11 };
        const A = await affineLinear(lab, r, c);
        await expectRowInvariantMatmul(lab, r, A.lin, M, c.K, c.N);
      });
    }
  });

  // -- matmul, the engine's exact kernels: 'lanes' (matmul_lanes_*.wgsl main, decode and verify) and
  // 'tile' (matmul_lanes_*.wgsl tile, prefill) ---------------------------------------------------------
  // 'lanes': four features per invocation, x shared through subgroups where the device has them;
  // 'tile': each chunk of weights unpacked once for a block of 8 rows, all rows always computed. Their
  // rows must not depend on M or on the slot a row takes (byte equality with the row alone, M = 1..8
  // and past one block), and their values must agree with the CPU reference and with the
  // one-output-per-invocation `affine` kernel. Linears a kernel cannot run fall back to `affine`.
  describe('matmul, exact kernels lanes / tile / coop', () => {
    const ROW_KERNELS = ['lanes', 'tile', 'coop'] as const;
    const invCases: (AffineCase & { name: string })[] = [
      { name: '4-bit gs 64, 3 parts', bits: 4, gs: 64, K: 128, N: 30, rowsPerPart: 11 },
      { name: '8-bit gs 32, 2 parts', bits: 8, gs: 32, K: 96, N: 70, rowsPerPart: 40 },
      { name: '2-bit gs 64', bits: 2, gs: 64, K: 192, N: 17 },
      { name: '4-bit gs 128, N > one lanes workgroup of 64 invocations', bits: 4, gs: 128, K: 256, N: 131 },
      { name: '8-bit gs 64, N > two tile / lanes workgroups (256 features each)', bits: 8, gs: 64, K: 128, N: 600 },
      { name: '4-bit gs 32, N > two lanes workgroups (256 features each), 2 parts', bits: 4, gs: 32, K: 96, N: 600, rowsPerPart: 530 },
      { name: '8-bit gs 128', bits: 8, gs: 128, K: 256, N: 9 },
    ];
    for (const kernel of ROW_KERNELS) {
      for (const c of invCases) {
        it(`${kernel} row-invariant (${c.name}, K ${c.K}, N ${c.N}): M = 1..8 and 13 together == each row alone, every row position, byte for byte (f32 and bf16)`, async () => {
          const r = new Rand(700 + c.K + c.N + c.bits + kernel.length);
          const A = await affineLinear(lab, r, c);
          for (const M of [1, 2, 3, 4, 5, 6, 7, 8, 13]) await expectRowInvariantMatmul(lab, r, A.lin, M, c.K, c.N, kernel);
        });
      }
    }

    const cases: (AffineCase & { M: number })[] = [
      { bits: 4, gs: 32, K: 64, N: 40, M: 3 },
      { bits: 4, gs: 64, K: 192, N: 33, M: 5, rowsPerPart: 12 },
      { bits: 4, gs: 128, K: 256, N: 24, M: 9, rowsPerPart: 10 },
      { bits: 8, gs: 32, K: 96, N: 17, M: 4, rowsPerPart: 7 },
      { bits: 8, gs: 64, K: 128, N: 64, M: 1 },
      { bits: 8, gs: 128, K: 384, N: 20, M: 8, rowsPerPart: 8 },
      { bits: 2, gs: 64, K: 128, N: 16, M: 2, rowsPerPart: 5 },
    ];
    for (const kernel of ROW_KERNELS) {
      for (const c of cases) {
        const parts = c.rowsPerPart ? Math.ceil(c.N / c.rowsPerPart) : 1;
        it(`${kernel} ${c.bits}-bit gs ${c.gs}: K ${c.K}, N ${c.N}, M ${c.M}, ${parts} part(s): == CPU reference and == affine within f32 tolerance`, async () => {
          const r = new Rand(1500 + c.bits * 100 + c.gs + c.K + kernel.length);
          const A = await affineLinear(lab, r, c);
          const x = r.f32s(c.M * c.K);
          const xb = lab.f32(x, 'x');
          const [y, yb, yAffine] = [lab.sentinel(c.M * c.N), lab.sentinel(c.M * c.N), lab.sentinel(c.M * c.N)];
          await lab.run((rec) => {
            op.matmul(rec, A.lin, xb, y, { M: c.M, round: false }, c.K, c.N, kernel);
            op.matmul(rec, A.lin, xb, yb, { M: c.M, round: true }, c.K, c.N, kernel);
            op.matmul(rec, A.lin, xb, yAffine, { M: c.M, round: false }, c.K, c.N, 'affine');
          });
          const ref = new Float64Array(c.M * c.N);
          const mag = new Float64Array(c.M * c.N);
          for (let m = 0; m < c.M; m++) {
            const o = affineReference(A, c, x, m * c.K);
            ref.set(o.ref, m * c.N);
            mag.set(o.mag, m * c.N);
          }
          const got = await lab.read(y, c.M * c.N);
          const old = await lab.read(yAffine, c.M * c.N);
          expectClose(`matmul.${kernel}`, got, ref, mag);
          // Against the affine kernel: both are within the bound of the exact value, so within twice it of each other.
          expectClose(`matmul.${kernel}-vs-affine`, got, old, mag.map((v, i) => 2 * v + (2 * REL_TOL * Math.abs(ref[i])) / MAG_TOL));
          const same = got.reduce((n, v, i) => n + (f32Bits(v) === f32Bits(old[i]) ? 1 : 0), 0);
          sameAsAffine.set(kernel, [(sameAsAffine.get(kernel)?.[0] ?? 0) + same, (sameAsAffine.get(kernel)?.[1] ?? 0) + got.length]);
          const iv = f32Interval(ref, mag);
          expectBf16(`matmul.${kernel} bf16`, await lab.read(yb, c.M * c.N), ref, iv.lo, iv.hi);
        });
      }
    }

    it('exact kernels write only their columns at x/y strides (x stride a multiple of 4; padding untouched)', async () => {
      for (const kernel of ROW_KERNELS) {
        const r = new Rand(78 + kernel.length);
        const c = { bits: 4 as const, gs: 32, K: 64, N: 21, rowsPerPart: 8 };
        const M = 6, xStride = c.K + 8, yStride = c.N + 7;
        const A = await affineLinear(lab, r, c);
        const x = r.f32s(M * xStride);
        const y = lab.sentinel(M * yStride);
        await lab.run((rec) => op.matmul(rec, A.lin, lab.f32(x), y, { M, round: false }, xStride, yStride, kernel));
        const got = await lab.read(y, M * yStride);
        const gotU = new Uint32Array(got.buffer, got.byteOffset, got.length);
        for (let m = 0; m < M; m++) {
          const { ref, mag } = affineReference(A, c, x, m * xStride);
          expectClose(`matmul.${kernel} row ${m}`, got.subarray(m * yStride, m * yStride + c.N), ref, mag);
          for (let i = c.N; i < yStride; i++) expect(gotU[m * yStride + i], `${kernel} padding y[${m}, ${i}]`).toBe(SENTINEL);
        }
        lab.release();
      }
    });

    it('an x stride that is not a multiple of 4 falls back to affine (same bytes), whatever M', async () => {
      for (const kernel of ROW_KERNELS) {
        const r = new Rand(79);
        const c = { bits: 4 as const, gs: 32, K: 64, N: 21 };
        const M = 3, xStride = c.K + 5;
        const A = await affineLinear(lab, r, c);
        const x = r.f32s(M * xStride);
        const xb = lab.f32(x);
        const [a, b] = [lab.sentinel(M * c.N), lab.sentinel(M * c.N)];
        await lab.run((rec) => {
          op.matmul(rec, A.lin, xb, a, { M, round: false }, xStride, c.N, kernel);
          op.matmul(rec, A.lin, xb, b, { M, round: false }, xStride, c.N, 'affine');
        });
        expectSameBytes(`${kernel} fallback`, await lab.bytes(a, M * c.N), await lab.bytes(b, M * c.N));
        lab.release();
      }
    });
  });

  // -- matmul, dense ---------------------------------------------------------------------------------
  describe('matmul, dense (bf16 / f16 / f32 weights)', () => {
    const cases: { dtype: DenseDtype; K: number; N: number; M: number; rowsPerPart?: number }[] = [
      { dtype: 'BF16', K: 64, N: 24, M: 3 },
      { dtype: 'BF16', K: 100, N: 13, M: 5, rowsPerPart: 5 },
      { dtype: 'F16', K: 48, N: 20, M: 2 },
      { dtype: 'F16', K: 33, N: 7, M: 4, rowsPerPart: 3 }, // odd K: rows and parts not word-aligned
      { dtype: 'F32', K: 80, N: 16, M: 3 },
      { dtype: 'F32', K: 31, N: 9, M: 2, rowsPerPart: 4 },
    ];
    for (const c of cases) {
      const parts = c.rowsPerPart ? Math.ceil(c.N / c.rowsPerPart) : 1;
      it(`${c.dtype}: K ${c.K}, N ${c.N}, M ${c.M}, ${parts} part(s), f32 and bf16 outputs`, async () => {
        const r = new Rand(2000 + c.K * 7 + c.N);
        const { lin, w } = await denseLinear(lab, r, c.N, c.K, c.dtype, c.rowsPerPart);
        const x = r.f32s(c.M * c.K);
        const xb = lab.f32(x);
        const y = lab.sentinel(c.M * c.N);
        const yb = lab.sentinel(c.M * c.N);
        await lab.run((rec) => {
          op.matmul(rec, lin, xb, y, { M: c.M, round: false });
          op.matmul(rec, lin, xb, yb, { M: c.M, round: true });
        });
        const ref = new Float64Array(c.M * c.N);
        const mag = new Float64Array(c.M * c.N);
        const absW = w.map(Math.abs);
        const absX = x.map(Math.abs);
        for (let m = 0; m < c.M; m++) {
          ref.set(matvec(w, c.N, c.K, x, m * c.K), m * c.N);
          mag.set(matvec(absW, c.N, c.K, absX, m * c.K), m * c.N);
        }
        expectClose(`matmul.dense.${c.dtype}`, await lab.read(y, c.M * c.N), ref, mag);
        const iv = f32Interval(ref, mag);
        expectBf16(`matmul.dense.${c.dtype} bf16`, await lab.read(yb, c.M * c.N), ref, iv.lo, iv.hi);
      });
    }
    for (const dtype of ['BF16', 'F16', 'F32'] as const) {
      it(`row-invariant (${dtype}): M in ${ROW_COUNTS.join(',')} together == each row alone, byte for byte`, async () => {
        const r = new Rand(600 + dtype.length);
        const { lin } = await denseLinear(lab, r, 19, 40, dtype, 7);
        for (const M of ROW_COUNTS) await expectRowInvariantMatmul(lab, r, lin, M, 40, 19);
      });
    }
  });

  // -- embed -------------------------------------------------------------------------------------------
  describe('embed (tied table lookup times scale)', () => {
    const affineCases: (AffineCase & { M: number })[] = [
      { bits: 4, gs: 32, K: 64, N: 50, M: 7, rowsPerPart: 16 },
      { bits: 8, gs: 64, K: 128, N: 20, M: 5 },
      { bits: 4, gs: 128, K: 256, N: 12, M: 4, rowsPerPart: 5 },
      { bits: 8, gs: 32, K: 96, N: 9, M: 3, rowsPerPart: 2 },
    ];
    for (const c of affineCases) {
      const parts = c.rowsPerPart ? Math.ceil(c.N / c.rowsPerPart) : 1;
      it(`affine ${c.bits}-bit gs ${c.gs}: V ${c.N}, H ${c.K}, M ${c.M}, ${parts} part(s)`, async () => {
        const r = new Rand(3000 + c.N + c.K);
        const A = await affineLinear(lab, r, c);
        // the first and last rows of the table, the first row of the second part, a repeat, random rows
        const ids = [c.N - 1, 0, Math.min(c.rowsPerPart ?? 1, c.N - 1), c.N - 1, ...range(c.M - 4).map(() => r.int(c.N))];
        await checkEmbed(lab, A.lin, ids, c.K, (id, col) => {
          const g = id * (c.K / c.gs) + Math.floor(col / c.gs);
          const q = A.codes[id * c.K + col];
          return { v: A.scales[g] * q + A.biases[g], mag: Math.abs(A.scales[g] * q) + Math.abs(A.biases[g]) };
        });
      });
    }
    for (const dtype of ['BF16', 'F16', 'F32'] as const) {
      it(`dense ${dtype}: V 30, H 48, M 6, 4 parts`, async () => {
        const r = new Rand(3100 + dtype.length);
        const { lin, w } = await denseLinear(lab, r, 30, 48, dtype, 8);
        await checkEmbed(lab, lin, [29, 0, 8, 7, 15, 29], 48, (id, col) => ({ v: w[id * 48 + col], mag: Math.abs(w[id * 48 + col]) }));
      });
    }

    it('bf16 rounding is round-to-nearest-even: ties, carries, overflow, signs (f32 table, scale 1)', async () => {
      const special = [
        0x3f800000, 0x3f808000, 0x3f818000, 0x3f808001, 0x3f807fff, 0xbf808000, 0xbf818000, 0xbf818001,
        0x3fff8000, 0x3fffffff, 0x407f8000, 0x00808000, 0x00818000, 0x7f7f7fff, 0x7f7f8000, 0xff7f8000,
        0x7f7fffff, 0x00000000, 0x80000000, 0x3eaaaaab, 0x4049fdb0, 0x4049ffff, 0x477fe000, 0x477ff000,
      ];
      const r = new Rand(3200);
      const H = 64;
      const table = new Uint32Array(2 * H);
      special.forEach((b, i) => (table[i] = b));
      for (let i = special.length; i < table.length; i++) table[i] = f32Bits(r.normal(10));
      const { refs, gpu } = await uploadTensors(lab, [{ name: 'e.weight', dtype: 'F32', shape: [2, H], data: bytesOf(table) }]);
      const lin: GpuLinear = { desc: { kind: 'dense', name: 'e', outFeatures: 2, inFeatures: H, weight: refs[0] }, weight: gpu[0] };
      const h = lab.sentinel(2 * H);
      await lab.run((rec) => op.embed(rec, lin, lab.u32([0, 1]), h, 1, { M: 2, round: true }));
      const got = await lab.read(h, 2 * H);
      const want = Float32Array.from(table, (b) => bf16Rne(bitsF32(b)));
      const gotBits = [...new Uint32Array(got.buffer, got.byteOffset, got.length)].map((b) => b.toString(16));
      const wantBits = [...new Uint32Array(want.buffer)].map((b) => b.toString(16));
      expect(gotBits).toEqual(wantBits);
      // spot checks of the independent rounding itself
      expect(f32Bits(bf16Rne(bitsF32(0x3f808000)))).toBe(0x3f800000);
      expect(f32Bits(bf16Rne(bitsF32(0x3f818000)))).toBe(0x3f820000);
      expect(f32Bits(bf16Rne(bitsF32(0x7f7fffff)))).toBe(0x7f800000);
      expect(f32Bits(bf16Rne(bitsF32(0xbf818001)))).toBe(0xbf820000);
    });
  });

  // -- rmsnorm ---------------------------------------------------------------------------------------
  describe('rmsnorm', () => {
    interface NormCase {
      name: string;
      rows: number;
      D: number;
      weighted: boolean;
      residual?: number; // post scale
      inPad?: number;
      outPad?: number;
      sd?: number;
    }
    const cases: NormCase[] = [
      { name: 'weighted', rows: 5, D: 64, weighted: true },
      { name: 'weighted, large values', rows: 3, D: 96, weighted: true, sd: 300 },
      { name: 'weightless (v_norm)', rows: 12, D: 32, weighted: false },
      { name: 'weightless, tiny values (eps dominates)', rows: 4, D: 16, weighted: false, sd: 1e-4 },
      { name: 'residual, post scale 1', rows: 4, D: 96, weighted: true, residual: 1 },
      { name: 'residual, post scale 0.7373 (layer scalar)', rows: 3, D: 64, weighted: true, residual: 0.7373 },
      { name: 'strided rows', rows: 3, D: 40, weighted: true, inPad: 6, outPad: 10 },
      { name: 'strided rows, residual, weightless', rows: 5, D: 24, weighted: false, residual: 1.5, inPad: 3, outPad: 1 },
    ];
    const eps = 1e-6;
    for (const c of cases) {
      it(`${c.name}: ${c.rows} rows of D ${c.D}, f32 and bf16 outputs`, async () => {
        const r = new Rand(4000 + c.rows * 31 + c.D);
        const inStride = c.D + (c.inPad ?? 0);
        const outStride = c.D + (c.outPad ?? 0);
        const x = r.f32s(c.rows * inStride, c.sd ?? 1);
        const wBits = Uint16Array.from({ length: c.D }, () => bf16Trunc(r.uniform(0.3, 2.5)));
        const w = Float64Array.from(wBits, bf16ToNumber);
        const wb = lab.own(uploadBuffer(lab.device, wBits, 'norm.w'));
        // out: sentinel padding; in residual mode the rows hold the residual stream
        const out0 = new Uint32Array(c.rows * outStride).fill(SENTINEL);
        const resid = r.f32s(c.rows * outStride, 2);
        const resid16 = resid.map(bf16Rne); // the bf16 run's residual stream is bf16
        if (c.residual !== undefined) for (let m = 0; m < c.rows; m++) for (let i = 0; i < c.D; i++) out0[m * outStride + i] = f32Bits(resid[m * outStride + i]);
        const out0b = Uint32Array.from(out0);
        if (c.residual !== undefined) for (let m = 0; m < c.rows; m++) for (let i = 0; i < c.D; i++) out0b[m * outStride + i] = f32Bits(resid16[m * outStride + i]);
        const xb = lab.f32(x);
        const out = lab.u32(out0);
        const outB = lab.u32(out0b);
        const post = Math.fround(c.residual ?? 1);
        const args = (round: boolean): op.NormArgs => ({ rows: c.rows, D: c.D, eps, round, inStride, outStride, residual: c.residual !== undefined ? { postScale: post } : undefined });
        await lab.run((rec) => {
          op.rmsnorm(rec, xb, c.weighted ? wb : null, out, lab.dummy, args(false));
          op.rmsnorm(rec, xb, c.weighted ? wb : null, outB, lab.dummy, args(true));
        });
        const got = await lab.read(out, c.rows * outStride);
        const gotB = await lab.read(outB, c.rows * outStride);
        const ref = new Float64Array(c.rows * c.D), mag = new Float64Array(c.rows * c.D);
        const exactB = new Float64Array(c.rows * c.D), loB = new Float64Array(c.rows * c.D), hiB = new Float64Array(c.rows * c.D);
        const g = new Float32Array(c.rows * c.D), gB = new Float32Array(c.rows * c.D);
        for (let m = 0; m < c.rows; m++) {
          const v = rmsNorm(x, m * inStride, c.D, c.weighted ? w : null, Math.fround(eps));
          for (let i = 0; i < c.D; i++) {
            const at = m * c.D + i, o = m * outStride + i;
            g[at] = got[o];
            gB[at] = gotB[o];
            const dv = REL_TOL * Math.abs(v[i]) + MAG_TOL * Math.abs(v[i]); // f32 bound of the norm itself
            if (c.residual === undefined) {
              ref[at] = v[i];
              mag[at] = Math.abs(v[i]);
              [exactB[at], loB[at], hiB[at]] = [v[i], v[i] - dv, v[i] + dv];
            } else {
              ref[at] = (resid[o] + v[i]) * post;
              mag[at] = (Math.abs(resid[o]) + Math.abs(v[i])) * Math.abs(post);
              // out = r(r(out + r(v)) * post): propagate the range of v through both inner roundings
              exactB[at] = bf16Rne(resid16[o] + bf16Rne(v[i])) * post;
              [loB[at], hiB[at]] = scaleInterval(bf16Rne(resid16[o] + bf16Rne(v[i] - dv)), bf16Rne(resid16[o] + bf16Rne(v[i] + dv)), post);
            }
          }
          const padU = new Uint32Array(got.buffer, got.byteOffset + (m * outStride + c.D) * 4, outStride - c.D);
          expect([...padU].every((u) => u === SENTINEL), `row ${m} padding untouched`).toBe(true);
        }
        expectClose('rmsnorm', g, ref, mag);
        expectBf16('rmsnorm bf16', gB, exactB, loB, hiB);
      });
    }

    it(`row-invariant: M in ${ROW_COUNTS.join(',')} rows together == each row alone (residual mode)`, async () => {
      const r = new Rand(4500);
      const D = 48;
      const wb = lab.own(uploadBuffer(lab.device, Uint16Array.from({ length: D }, () => bf16Trunc(r.uniform(0.5, 2))), 'w'));
      for (const M of ROW_COUNTS) {
        const x = r.f32s(M * D);
        const resid = r.f32s(M * D);
        const block = lab.f32(resid);
        const alone = range(M).map((m) => lab.f32(resid.subarray(m * D, (m + 1) * D)));
        await lab.run((rec) => {
          const a = (rows: number): op.NormArgs => ({ rows, D, eps: 1e-6, round: false, residual: { postScale: 0.81 } });
          op.rmsnorm(rec, lab.f32(x), wb, block, lab.dummy, a(M));
          alone.forEach((buf, m) => op.rmsnorm(rec, lab.f32(x.subarray(m * D, (m + 1) * D)), wb, buf, lab.dummy, a(1)));
        });
        const all = await lab.bytes(block, M * D);
        for (let m = 0; m < M; m++) expectSameBytes(`rmsnorm M=${M} row ${m}`, all.subarray(m * D * 4, (m + 1) * D * 4), await lab.bytes(alone[m], D));
      }
    });
  });

  // -- rope ------------------------------------------------------------------------------------------
  describe('rope (rotate-half, cos/sin tables)', () => {
    const DEFAULT: RopeSpec = { ropeType: 'default', theta: 10000, partialRotary: 1 };
    const PROPORTIONAL: RopeSpec = { ropeType: 'proportional', theta: 1_000_000, partialRotary: 0.25 };
    const cases: { spec: RopeSpec; d: number; heads: number; M: number; pos0: number }[] = [
      { spec: DEFAULT, d: 32, heads: 3, M: 4, pos0: 0 },
      { spec: DEFAULT, d: 64, heads: 2, M: 3, pos0: 517 },
      { spec: DEFAULT, d: 16, heads: 4, M: 2, pos0: 1021 },
      { spec: PROPORTIONAL, d: 64, heads: 4, M: 2, pos0: 1023 },
      { spec: PROPORTIONAL, d: 128, heads: 1, M: 5, pos0: 3 },
      { spec: PROPORTIONAL, d: 32, heads: 2, M: 3, pos0: 200 },
    ];
    const positions = 1100;
    for (const c of cases) {
      it(`${c.spec.ropeType}${c.spec.ropeType === 'proportional' ? ` (partial ${c.spec.partialRotary})` : ''}: d ${c.d}, ${c.heads} heads, positions ${c.pos0}..${c.pos0 + c.M - 1}`, async () => {
        const r = new Rand(5000 + c.d + c.pos0);
        const table = ropeTable(lab.device, c.spec, c.d, positions);
        lab.own(table.cos);
        lab.own(table.sin);
        const rope = new Rope(c.d, c.spec, 'f32');
        expect(table.rotPairs).toBe(c.spec.ropeType === 'default' ? c.d / 2 : Math.floor((c.spec.partialRotary * c.d) / 2));
        const n = c.M * c.heads * c.d;
        const x = r.f32s(n, 2);
        const xb = lab.f32(x);
        const xr = lab.f32(x);
        await lab.run((rec) => {
          op.rope(rec, xb, table, c.heads, c.d, c.pos0, { M: c.M, round: false });
          op.rope(rec, xr, table, c.heads, c.d, c.pos0, { M: c.M, round: true });
        });
        const got = await lab.read(xb, n);
        const gotB = await lab.read(xr, n);
        const ref = Float64Array.from(x);
        const mag = new Float64Array(n);
        const half = c.d / 2;
        const rotated = new Array<boolean>(n).fill(false);
        for (let m = 0; m < c.M; m++) {
          const { cos, sin } = rope.table(c.pos0 + m);
          for (let h = 0; h < c.heads; h++) {
            const off = (m * c.heads + h) * c.d;
            rope.apply(ref, off, c.pos0 + m);
            for (let i = 0; i < table.rotPairs; i++) {
              const a = Math.abs(x[off + i]), b = Math.abs(x[off + i + half]);
              mag[off + i] = a * Math.abs(cos[i]) + b * Math.abs(sin[i]);
              mag[off + i + half] = b * Math.abs(cos[i]) + a * Math.abs(sin[i]);
              rotated[off + i] = rotated[off + i + half] = true;
            }
          }
        }
        // Zero-frequency pairs are the identity: the kernel must leave them byte for byte.
        const xin = new Float32Array(x);
        for (let i = 0; i < n; i++) {
          if (!rotated[i]) {
            expect(f32Bits(got[i]), `unrotated element ${i}`).toBe(f32Bits(xin[i]));
            expect(f32Bits(gotB[i]), `unrotated element ${i} (bf16 run)`).toBe(f32Bits(xin[i]));
          }
        }
        const idx = range(n).filter((i) => rotated[i]);
        expectClose('rope', idx.map((i) => got[i]), idx.map((i) => ref[i]), idx.map((i) => mag[i]));
        const iv = f32Interval(idx.map((i) => ref[i]), idx.map((i) => mag[i]));
        expectBf16('rope bf16', Float32Array.from(idx, (i) => gotB[i]), idx.map((i) => ref[i]), iv.lo, iv.hi);
      });
    }

    it(`row-invariant: M in ${ROW_COUNTS.join(',')} rows at p == each row alone at p + j`, async () => {
      const r = new Rand(5500);
      const d = 32, heads = 3, p = 40;
      const table = ropeTable(lab.device, PROPORTIONAL, d, 64);
      const tableD = ropeTable(lab.device, DEFAULT, d, 64);
      [table.cos, table.sin, tableD.cos, tableD.sin].forEach((b) => lab.own(b));
      for (const t of [table, tableD]) {
        for (const M of ROW_COUNTS) {
          const x = r.f32s(M * heads * d);
          const block = lab.f32(x);
          const alone = range(M).map((m) => lab.f32(x.subarray(m * heads * d, (m + 1) * heads * d)));
          await lab.run((rec) => {
            op.rope(rec, block, t, heads, d, p, { M, round: false });
            alone.forEach((b, m) => op.rope(rec, b, t, heads, d, p + m, { M: 1, round: false }));
          });
          const all = await lab.bytes(block, M * heads * d);
          for (let m = 0; m < M; m++) expectSameBytes(`rope M=${M} row ${m}`, all.subarray(m * heads * d * 4, (m + 1) * heads * d * 4), await lab.bytes(alone[m], heads * d));
        }
      }
    });
  });

  // -- geglu and softcap -------------------------------------------------------------------------------
  describe('element-wise: geglu, softcap', () => {
    for (const n of [1, 63, 64, 65, 1000]) {
      it(`geglu over ${n} elements, f32 and bf16 outputs`, async () => {
        const r = new Rand(6000 + n);
        const a = Float64Array.from({ length: n }, (_, i) => Math.fround(i % 10 === 9 ? r.uniform(-14, 14) : r.normal(2)));
        const b = r.f32s(n);
        const ab = lab.f32(a), aR = lab.f32(a), bb = lab.f32(b);
        await lab.run((rec) => {
          op.geglu(rec, ab, bb, n, false);
          op.geglu(rec, aR, bb, n, true);
        });
        const ref = a.map((v, i) => geluTanh(v) * b[i]);
        // 0.5 x (1 + tanh(..)) cancels for negative x: the f32 error scale is |x b|, not |gelu(x) b|
        const mag = a.map((v, i) => Math.abs(v * b[i]));
        expectClose('geglu', await lab.read(ab, n), ref, mag);
        // a = r(r(gelu(a)) * b): the range of gelu's f32 value goes through the inner rounding
        const exactB = new Float64Array(n), loB = new Float64Array(n), hiB = new Float64Array(n);
        for (let i = 0; i < n; i++) {
          const g = geluTanh(a[i]);
          const dg = REL_TOL * Math.abs(g) + MAG_TOL * Math.abs(a[i]);
          exactB[i] = bf16Rne(g) * b[i];
          [loB[i], hiB[i]] = scaleInterval(bf16Rne(g - dg), bf16Rne(g + dg), b[i]);
          const d = MAG_TOL * Math.abs(exactB[i]); // the product's own f32 rounding
          loB[i] -= d;
          hiB[i] += d;
        }
        expectBf16('geglu bf16', await lab.read(aR, n), exactB, loB, hiB);
      });
    }
    for (const [n, cap] of [[200, 30], [65, 50], [1, 30]] as const) {
      it(`softcap ${cap} over ${n} elements (small, mid and saturated), f32 and bf16 outputs`, async () => {
        const r = new Rand(6500 + n);
        const vals = [0, -0, 1e-3, -3.7, 3.74, 3.76, 300, -300, 1e4];
        const a = Float64Array.from({ length: n }, (_, i) => Math.fround(i < vals.length ? vals[i] : r.normal(40)));
        const ab = lab.f32(a), aR = lab.f32(a);
        await lab.run((rec) => {
          op.softcap(rec, ab, n, cap, false);
          op.softcap(rec, aR, n, cap, true);
        });
        const capF = Math.fround(cap);
        const ref = a.map((v) => softcapRef(v, capF));
        expectClose('softcap', await lab.read(ab, n), ref, ref.map(Math.abs));
        const iv = f32Interval(ref, ref.map(Math.abs));
        expectBf16('softcap bf16', await lab.read(aR, n), ref, iv.lo, iv.hi);
      });
    }
  });

  // -- argmax ------------------------------------------------------------------------------------------
  describe('argmax', () => {
    it('first index of the maximum per row, ties included', async () => {
      const r = new Rand(7000);
      const V = 1000;
      const rows: Float32Array[] = [];
      rows.push(Float32Array.from({ length: V }, () => r.normal(3))); // unique max
      const tie = Float32Array.from({ length: V }, () => r.normal(3));
      [999, 400, 17].forEach((i) => (tie[i] = 50));
      rows.push(tie); // -> 17
      const ends = Float32Array.from({ length: V }, () => r.normal(3));
      ends[0] = ends[V - 1] = 50;
      rows.push(ends); // -> 0
      rows.push(new Float32Array(V).fill(-2.5)); // all equal -> 0
      const zeros = new Float32Array(V).fill(-1);
      zeros[3] = 0;
      zeros[5] = -0;
      rows.push(zeros); // +0 == -0: -> 3
      const last = Float32Array.from({ length: V }, (_, i) => i / V);
      rows.push(last); // -> V-1
      const infs = new Float32Array(V).fill(-Infinity);
      infs[777] = -3e38;
      rows.push(infs); // -> 777
      const want = [argmaxFirst(rows[0]), 17, 0, 0, 3, V - 1, 777];
      expect(argmaxFirst(rows[0])).toBe([...rows[0]].indexOf(Math.max(...rows[0])));
      const M = rows.length;
      const flat = new Float32Array(M * V);
      rows.forEach((row, i) => flat.set(row, i * V));
      const ids = lab.u32(new Uint32Array(M).fill(SENTINEL));
      const idsAlone = range(M).map(() => lab.u32([SENTINEL]));
      await lab.run((rec) => {
        op.argmax(rec, lab.f32(flat), ids, M, V);
        rows.forEach((row, m) => op.argmax(rec, lab.f32(row), idsAlone[m], 1, V));
      });
      expect([...(await lab.readU32(ids, M))]).toEqual(want);
      const alone: number[] = [];
      for (const b of idsAlone) alone.push((await lab.readU32(b, 1))[0]);
      expect(alone, 'each row alone').toEqual(want);
    });

    it('NaN never wins (as shaders/argmax.wgsl documents)', async () => {
      const V = 64;
      const a = Float32Array.from({ length: V }, (_, i) => Math.sin(i));
      a[0] = NaN;
      a[10] = NaN;
      a[40] = 5;
      const ids = lab.u32([SENTINEL]);
      await lab.run((rec) => op.argmax(rec, lab.f32(a), ids, 1, V));
      expect((await lab.readU32(ids, 1))[0]).toBe(40);
    });
  });

  // -- attention ---------------------------------------------------------------------------------------
  // Cases past 64 keys cut rows into segments: 301 keys = 5 x 61, 4100 = 64 x 65 (capped at 64, so
  // segments grow past 64 keys), key counts that are not multiples of 64, and blocks whose rows cross a
  // segment-count boundary (63 -> 64 keys: 1 -> 2 segments; 4032 -> 4033: 63 -> 64; 4096 -> 4097: L 64 -> 65).
  // Every test runs the device's path (attentionFused: the four passes here, the fused one under
  // RINGSIDE_KERNELS=gpu) and checks that both paths, forced, give the same bytes (expectFusedSame);
  // the row-invariance tests run each path. The prefill plan's one segment per row puts rows past 256
  // keys (attention.wgsl SEG_CAP) on the fused path's other storage, `s` instead of workgroup memory.
  describe('attention (scores, segmented softmax and P.V, combine; and fused)', () => {
    const cases: AttnCase[] = [
      { name: 'linear, GQA 4:2', mode: 'linear', heads: 4, kvHeads: 2, d: 16, M: 3, p: 5, window: 0, base: 0 },
      { name: 'linear from position 0', mode: 'linear', heads: 2, kvHeads: 2, d: 32, M: 4, p: 0, window: 0, base: 0 },
      { name: 'linear, MQA 4:1, one row', mode: 'linear', heads: 4, kvHeads: 1, d: 8, M: 1, p: 20, window: 0, base: 0 },
      { name: 'linear, 299..301 keys (5 segments of 60 or 61)', mode: 'linear', heads: 2, kvHeads: 1, d: 8, M: 3, p: 298, window: 0, base: 0 },
      { name: 'linear, 4161..4162 keys (64 segments of 66)', mode: 'linear', heads: 2, kvHeads: 1, d: 8, M: 2, p: 4160, window: 0, base: 0 },
      { name: 'physical, ring not full', mode: 'physical', heads: 4, kvHeads: 2, d: 16, M: 4, p: 3, window: 16, base: 0 },
      { name: 'physical, ring fills and wraps inside the block (base 0)', mode: 'physical', heads: 2, kvHeads: 1, d: 16, M: 4, p: 6, window: 8, base: 0 },
      { name: 'physical, wrapped ring, base 13', mode: 'physical', heads: 4, kvHeads: 2, d: 16, M: 4, p: 15, window: 8, base: 13 },
      { name: 'physical, wrapped ring, base 9, W 6', mode: 'physical', heads: 2, kvHeads: 1, d: 8, M: 3, p: 10, window: 6, base: 9 },
      { name: 'physical, one row (chain step), base 21', mode: 'physical', heads: 4, kvHeads: 4, d: 8, M: 1, p: 30, window: 8, base: 21 },
      { name: 'physical, ring of 200 filling past 64 keys', mode: 'physical', heads: 2, kvHeads: 1, d: 8, M: 4, p: 130, window: 200, base: 0 },
      { name: 'physical, wrapped ring of 4100 (64 segments of 65)', mode: 'physical', heads: 2, kvHeads: 1, d: 8, M: 3, p: 8300, window: 4100, base: 77 },
      { name: 'chrono, prefill chunk 0', mode: 'chrono', heads: 4, kvHeads: 2, d: 16, M: 6, p: 0, window: 8, base: 0 },
      { name: 'chrono, prefill chunk 2 over a filled ring', mode: 'chrono', heads: 2, kvHeads: 2, d: 16, M: 5, p: 6, window: 8, base: 0 },
      { name: 'chrono, wrapped ring, base 13', mode: 'chrono', heads: 4, kvHeads: 2, d: 16, M: 4, p: 15, window: 8, base: 13 },
      { name: 'chrono, wrapped ring, base 9, W 6', mode: 'chrono', heads: 2, kvHeads: 1, d: 8, M: 3, p: 10, window: 6, base: 9 },
      { name: 'chrono, wrapped ring of 4100', mode: 'chrono', heads: 2, kvHeads: 1, d: 8, M: 2, p: 8300, window: 4100, base: 77 },
      { name: 'draft, span W + 1 (evicted entry from staging), base 13', mode: 'draft', heads: 4, kvHeads: 2, d: 16, M: 1, p: 17, window: 8, base: 13, span: 9 },
      { name: 'draft, span W, ring not full, two rows', mode: 'draft', heads: 2, kvHeads: 1, d: 16, M: 2, p: 5, window: 8, base: 0, span: 8 },
      { name: 'draft, span W + 1, base 0, wrapped', mode: 'draft', heads: 4, kvHeads: 4, d: 8, M: 1, p: 30, window: 16, base: 0, span: 17 },
      { name: 'draft, span W, just after a long prefill (base = p)', mode: 'draft', heads: 4, kvHeads: 2, d: 8, M: 1, p: 21, window: 16, base: 21, span: 16 },
      { name: 'draft, span W + 1, base 9, W 6', mode: 'draft', heads: 2, kvHeads: 1, d: 8, M: 1, p: 10, window: 6, base: 9, span: 7 },
      { name: 'draft, span W + 1 = 4101', mode: 'draft', heads: 2, kvHeads: 1, d: 8, M: 1, p: 5000, window: 4100, base: 903, span: 4101 },
    ];
    for (const c of cases) {
      it(`${c.name}: ${c.heads}/${c.kvHeads} heads, d ${c.d}, rows at ${c.p}..${c.p + c.M - 1}${c.mode === 'linear' ? '' : `, W ${c.window}, base ${c.base}`}; f32 and bf16`, async () => {
        const r = new Rand(8000 + c.p * 13 + c.window * 7 + c.M + c.heads);
        if (c.mode !== 'linear') checkKeyOrder(c);
        const x = attnData(r, c);
        const maxKeys = (c.mode === 'linear' ? x.slots : c.window) + 3;
        const bufs = {
          q: lab.f32(x.q), kCache: lab.f32(x.kCache), vCache: lab.f32(x.vCache), kStage: lab.f32(x.kStage), vStage: lab.f32(x.vStage),
          out: lab.sentinel(c.M * c.heads * c.d),
        };
        const outB = lab.sentinel(c.M * c.heads * c.d);
        await lab.run((rec) => {
          recordAttention(lab, rec, c, bufs, false, maxKeys);
          recordAttention(lab, rec, c, { ...bufs, out: outB }, true, maxKeys);
        });
        const { out, mag } = attnReference(c, x);
        const n = c.M * c.heads * c.d;
        expectClose(`attention.${c.mode}`, await lab.read(bufs.out, n), out, mag, REL_TOL);
        const iv = f32Interval(out, mag, REL_TOL);
        expectBf16(`attention.${c.mode} bf16`, await lab.read(outB, n), out, iv.lo, iv.hi);
        for (const round of [false, true]) await expectFusedSame(lab, c, x, { round });
        await expectFusedSame(lab, c, x, { prefill: true });
      });
    }

    it(`the device's path: two dispatches (fused) on the GPU kernel class, four on software (${process.env.RINGSIDE_KERNELS ?? 'detected'})`, async () => {
      const c: AttnCase = { name: '', mode: 'linear', heads: 2, kvHeads: 1, d: 8, M: 2, p: 3, window: 0, base: 0 };
      const x = attnData(new Rand(776), c);
      expect(attentionFused(lab.kernels)).toBe(lab.kernels.kernelClass === 'gpu');
      let dispatches = 0;
      await lab.run((rec) => {
        recordAttention(lab, rec, c, { q: lab.f32(x.q), kCache: lab.f32(x.kCache), vCache: lab.f32(x.vCache), kStage: lab.f32(x.kStage), vStage: lab.f32(x.vStage), out: lab.sentinel(c.M * c.heads * c.d) }, false, x.slots);
        dispatches = rec.dispatches;
      });
      expect(dispatches).toBe(attentionFused(lab.kernels) ? 2 : 4);
    });

    // Row invariance: row j of a block must equal the chain step that computes position p + j alone,
    // after rows 0..j-1 were committed to the cache (chainStep). The block's scratch strides (its
    // largest key and segment counts) differ from each step's: they must not matter.
    const inv: Omit<AttnCase, 'M' | 'name'>[] = [
      { mode: 'linear', heads: 4, kvHeads: 2, d: 16, p: 9, window: 0, base: 0 },
      { mode: 'linear', heads: 2, kvHeads: 1, d: 8, p: 60, window: 0, base: 0 },
      { mode: 'linear', heads: 2, kvHeads: 1, d: 8, p: 4029, window: 0, base: 0 },
      { mode: 'linear', heads: 2, kvHeads: 1, d: 8, p: 4093, window: 0, base: 0 },
      { mode: 'physical', heads: 4, kvHeads: 2, d: 16, p: 23, window: 16, base: 21 },
      { mode: 'physical', heads: 2, kvHeads: 1, d: 16, p: 5, window: 16, base: 0 },
      { mode: 'physical', heads: 2, kvHeads: 1, d: 8, p: 60, window: 130, base: 0 },
      { mode: 'physical', heads: 2, kvHeads: 1, d: 8, p: 8205, window: 4100, base: 21 },
      { mode: 'chrono', heads: 4, kvHeads: 2, d: 16, p: 23, window: 16, base: 21 },
      { mode: 'chrono', heads: 2, kvHeads: 1, d: 8, p: 8205, window: 4100, base: 21 },
      { mode: 'draft', heads: 4, kvHeads: 2, d: 8, p: 30, window: 16, base: 0, span: 17 },
      { mode: 'draft', heads: 2, kvHeads: 1, d: 8, p: 5000, window: 4100, base: 903, span: 4101 },
      { mode: 'masked', heads: 2, kvHeads: 1, d: 8, p: 58, window: 200, base: 0 },
      { mode: 'masked', heads: 2, kvHeads: 1, d: 8, p: 4090, window: 4200, base: 0 },
    ];
    for (const [c0, fused] of inv.flatMap((c) => [[c, false], [c, true]] as const)) {
      it(`row-invariant ${fused ? 'fused' : 'four-pass'} ${c0.mode}${c0.mode === 'linear' ? '' : `, W ${c0.window}, base ${c0.base}`}: block of M in ${ROW_COUNTS.join(',')} at ${c0.p} == M chain steps, byte for byte (f32 and bf16)`, async () => {
        const r = new Rand(9000 + c0.p + c0.base);
        for (const [M, round] of ROW_COUNTS.flatMap((m) => [[m, false], [m, true]] as const)) {
          const c: AttnCase = { ...c0, M, name: '' };
          if (c.mode === 'masked') expect(c.p + M, 'masked chain steps need a ring that is not full').toBeLessThanOrEqual(c.window);
          const x = attnData(r, c);
          const qRow = c.heads * c.d;
          const all = await runAttention(lab, c, x, { round, fused });
          for (let j = 0; j < M; j++) {
            const s = chainStep(c, x, j);
            expectSameBytes(`attention.${c.mode}${fused ? ' fused' : ''} M=${M} row ${j}${round ? ' bf16' : ''}`, all.subarray(j * qRow * 4, (j + 1) * qRow * 4), (await runAttention(lab, s.step, s.x, { round, fused })).subarray(0, qRow * 4));
          }
          // and the block is right, not just consistent
          const want = attnReference(c, x);
          if (!round) expectClose(`attention.${c.mode}`, new Float32Array(all.buffer, all.byteOffset, M * qRow), want.out, want.mag, REL_TOL);
          lab.release();
        }
      });
    }

    // The arithmetic itself, byte for byte: the kernel == attentionF32 (the WGSL replayed in f32). With
    // one segment (n <= 64, split 1, or the prefill plan) that is the sequential softmax and P.V the
    // kernel had before segmentation; past 64 keys, the exact plan's and an inexact split's partitions.
    const seq: AttnCase[] = [
      { name: 'linear', mode: 'linear', heads: 4, kvHeads: 2, d: 16, M: 3, p: 5, window: 0, base: 0 },
      { name: 'physical', mode: 'physical', heads: 4, kvHeads: 2, d: 16, M: 4, p: 15, window: 8, base: 13 },
      { name: 'chrono', mode: 'chrono', heads: 2, kvHeads: 1, d: 8, M: 3, p: 10, window: 6, base: 9 },
      { name: 'draft', mode: 'draft', heads: 4, kvHeads: 2, d: 16, M: 1, p: 17, window: 8, base: 13, span: 9 },
      { name: 'linear, 61..64 keys', mode: 'linear', heads: 2, kvHeads: 1, d: 8, M: 4, p: 60, window: 0, base: 0 },
    ];
    for (const c of seq) {
      it(`one segment == the sequential kernel, byte for byte: ${c.name}, rows at ${c.p}..${c.p + c.M - 1}`, async () => {
        const x = attnData(new Rand(777 + c.p), c);
        expectSameBytes(`attention.${c.mode} sequential`, await runAttention(lab, c, x), bytesOf(attentionF32(c, x, () => 1)));
        await expectFusedSame(lab, c, x);
      });
    }
    const long: AttnCase = { name: '', mode: 'linear', heads: 2, kvHeads: 1, d: 64, M: 2, p: 300, window: 0, base: 0 };
    const longRing: AttnCase = { name: '', mode: 'chrono', heads: 2, kvHeads: 1, d: 8, M: 3, p: 400, window: 200, base: 7 };
    // 256 .. 258 keys in one segment: the fused path's workgroup memory holds 256 (SEG_CAP), so row 0
    // keeps its scores there and rows 1, 2 in `s`.
    const capEdge: AttnCase = { name: '', mode: 'linear', heads: 2, kvHeads: 1, d: 8, M: 3, p: 255, window: 0, base: 0 };
    for (const c of [long, longRing, capEdge]) {
      it(`one segment == the sequential kernel past 64 keys (${c.mode}, ${c.mode === 'linear' ? c.p + 1 : c.window} keys): split 1 and the prefill plan`, async () => {
        const x = attnData(new Rand(778 + c.p), c);
        const want = bytesOf(attentionF32(c, x, () => 1));
        expectSameBytes(`attention.${c.mode} split 1`, await runAttention(lab, c, x, { split: 1 }), want);
        expectSameBytes(`attention.${c.mode} prefill`, await runAttention(lab, c, x, { prefill: true }), want);
        await expectFusedSame(lab, c, x, { split: 1 });
        await expectFusedSame(lab, c, x, { prefill: true });
      });
    }
    const segmented: (AttnCase & { split: number })[] = [
      { name: 'linear, 299..301 keys, exact plan (5 segments)', mode: 'linear', heads: 2, kvHeads: 1, d: 8, M: 3, p: 298, window: 0, base: 0, split: 0 },
      { name: 'physical, 4100 keys, exact plan (64 of 65)', mode: 'physical', heads: 2, kvHeads: 1, d: 8, M: 2, p: 8300, window: 4100, base: 77, split: 0 },
      { name: 'draft, 4101 keys, exact plan (64 of 65)', mode: 'draft', heads: 2, kvHeads: 1, d: 8, M: 1, p: 5000, window: 4100, base: 903, span: 4101, split: 0 },
      { name: 'linear, split 7 (inexact)', mode: 'linear', heads: 2, kvHeads: 1, d: 8, M: 3, p: 298, window: 0, base: 0, split: 7 },
      { name: 'linear, split 8 > keys of the first rows (empty segments)', mode: 'linear', heads: 2, kvHeads: 1, d: 8, M: 8, p: 0, window: 0, base: 0, split: 8 },
      { name: 'masked, split 3 (inexact)', mode: 'masked', heads: 2, kvHeads: 1, d: 8, M: 4, p: 40, window: 16, base: 37, split: 3 },
      { name: 'masked, exact plan, 150 widened keys', mode: 'masked', heads: 2, kvHeads: 1, d: 8, M: 6, p: 300, window: 145, base: 0, split: 0 },
    ];
    for (const c of segmented) {
      it(`segments == the WGSL replayed in f32, byte for byte: ${c.name}`, async () => {
        const x = attnData(new Rand(779 + c.p + c.split), c);
        const plan = c.split > 0 ? () => c.split : exactPlan();
        expectSameBytes(`attention.${c.mode} split ${c.split}`, await runAttention(lab, c, x, { split: c.split }), bytesOf(attentionF32(c, x, plan)));
        await expectFusedSame(lab, c, x, { split: c.split });
      });
    }

    // The inexact variants are the exact kernel with only the partition changed: a split equal to the
    // exact plan's segment count (the same for every row here) gives the exact bytes, another does not.
    const off: AttnCase[] = [
      { name: 'linear, 201..204 keys (4 segments)', mode: 'linear', heads: 2, kvHeads: 1, d: 8, M: 4, p: 200, window: 0, base: 0 },
      { name: 'physical, 4100 keys (64 segments)', mode: 'physical', heads: 2, kvHeads: 1, d: 8, M: 3, p: 8300, window: 4100, base: 77 },
      { name: 'masked, 154 widened keys (3 segments)', mode: 'masked', heads: 2, kvHeads: 1, d: 8, M: 4, p: 150, window: 200, base: 0 },
    ];
    for (const c of off) {
      it(`mechanism off == exact: ${c.name}, split = the exact segment count`, async () => {
        const x = attnData(new Rand(780 + c.p), c);
        const counts = new Set(range(c.M).map((j) => exactPlan()(keysWithMask(c, j).keys.length)));
        expect(counts.size, 'every row has the same exact segment count').toBe(1);
        const [S] = counts;
        const exact = await runAttention(lab, c, x);
        expectSameBytes(`attention.${c.mode} split ${S}`, await runAttention(lab, c, x, { split: S }), exact);
        const other = await runAttention(lab, c, x, { split: S - 1 });
        expect(other.some((b, i) => b !== exact[i]), `split ${S - 1} changes some bits`).toBe(true);
        for (const split of [0, S - 1]) await expectFusedSame(lab, c, x, { split });
      });
    }
  });

  // -- dispatches of more than 65535 workgroups (a 262144-row LM head), folded into 2-D ----------------
  describe('dispatches folded into 2-D (over maxComputeWorkgroupsPerDimension workgroups)', () => {
    it('softcap over 64 * 65535 + 100 elements', async () => {
      const n = 64 * 65535 + 100;
      expect(Math.ceil(n / 64)).toBeGreaterThan(lab.device.limits.maxComputeWorkgroupsPerDimension);
      const a = new Float32Array(n);
      for (let i = 0; i < n; i++) a[i] = (((i * 2654435761) >>> 0) % 20001) / 100 - 100; // cheap, varied, in [-100, 100]
      const ab = lab.f32(a);
      await lab.run((rec) => op.softcap(rec, ab, n, 30, false));
      const got = await lab.read(ab, n);
      const ref = new Float64Array(n), mag = new Float64Array(n);
      for (let i = 0; i < n; i++) {
        ref[i] = softcapRef(a[i], 30);
        mag[i] = Math.abs(ref[i]);
      }
      expectClose('softcap', got, ref, mag);
    });

    it('dense f32 matmul with M * N = 60 * 70001 outputs (an LM head over a large vocabulary)', async () => {
      const M = 60, N = 70001, K = 8;
      expect(Math.ceil((M * N) / 64)).toBeGreaterThan(lab.device.limits.maxComputeWorkgroupsPerDimension);
      const r = new Rand(13100);
      const { lin, w } = await denseLinear(lab, r, N, K, 'F32');
      const x = r.f32s(M * K);
      const y = lab.sentinel(M * N);
      await lab.run((rec) => op.matmul(rec, lin, lab.f32(x), y, { M, round: false }));
      const got = await lab.read(y, M * N);
      const ref = new Float64Array(M * N), mag = new Float64Array(M * N);
      const absW = w.map(Math.abs), absX = x.map(Math.abs);
      for (let m = 0; m < M; m++) {
        ref.set(matvec(w, N, K, x, m * K), m * N);
        mag.set(matvec(absW, N, K, absX, m * K), m * N);
      }
      expectClose('matmul.dense.F32', got, ref, mag);
    });
  });

  // -- inexact kernel variants of the parity-lab policies (src/model/policy.ts) ----------------------
  // Same math with plain f32 sums split into ranges: checked against the same float64 reference with
  // the worst-case bound of a recursive f32 sum (n eps of the summed magnitudes).
  describe('inexact variants: split-K matmul, split and masked attention', () => {
    for (const [c, split] of [
      [{ bits: 4, gs: 64, K: 256, N: 20, M: 3, rowsPerPart: 8 }, 2],
      [{ bits: 8, gs: 32, K: 160, N: 9, M: 2 }, 3],
    ] as [AffineCase & { M: number }, number][]) {
      it(`matmul affine_split ${split}: ${c.bits}-bit gs ${c.gs}, K ${c.K}, N ${c.N}, M ${c.M}`, async () => {
        const r = new Rand(11000 + c.K + split);
        const A = await affineLinear(lab, r, c);
        const x = r.f32s(c.M * c.K);
        const y = lab.sentinel(c.M * c.N);
        await lab.run((rec) => op.matmul(rec, A.lin, lab.f32(x), y, { M: c.M, round: false, split }));
        const ref = new Float64Array(c.M * c.N), mag = new Float64Array(c.M * c.N);
        for (let m = 0; m < c.M; m++) {
          const o = affineReference(A, c, x, m * c.K);
          ref.set(o.ref, m * c.N);
          mag.set(o.mag, m * c.N);
        }
        expectClose('matmul.affine_split', await lab.read(y, c.M * c.N), ref, mag, (c.gs + c.K / c.gs + split) * EPS);
      });
    }
    for (const dtype of ['BF16', 'F16', 'F32'] as const) {
      it(`matmul main_split 2 (${dtype}): K 70, N 11, M 3, 2 parts`, async () => {
        const r = new Rand(11100 + dtype.length);
        const { lin, w } = await denseLinear(lab, r, 11, 70, dtype, 6);
        const x = r.f32s(3 * 70);
        const y = lab.sentinel(3 * 11);
        await lab.run((rec) => op.matmul(rec, lin, lab.f32(x), y, { M: 3, round: false, split: 2 }));
        const ref = new Float64Array(33), mag = new Float64Array(33);
        for (let m = 0; m < 3; m++) {
          ref.set(matvec(w, 11, 70, x, m * 70), m * 11);
          mag.set(matvec(w.map(Math.abs), 11, 70, x.map(Math.abs), m * 70), m * 11);
        }
        expectClose(`matmul.dense_split.${dtype}`, await lab.read(y, 33), ref, mag, (70 + 2) * EPS);
      });
    }

    const cases: (AttnCase & { split: number })[] = [
      // attention-m-split: split = M
      { name: 'linear, split M', mode: 'linear', heads: 4, kvHeads: 2, d: 16, M: 4, p: 7, window: 0, base: 0, split: 4 },
      { name: 'linear from 0, split 8 > keys of the first rows', mode: 'linear', heads: 2, kvHeads: 1, d: 8, M: 8, p: 0, window: 0, base: 0, split: 8 },
      { name: 'physical, wrapped ring, split M', mode: 'physical', heads: 4, kvHeads: 2, d: 16, M: 3, p: 15, window: 8, base: 13, split: 3 },
      // mask-widened: the union of the rows' windows in chronological order, -inf outside each row's own
      { name: 'masked, ring not full, no split', mode: 'masked', heads: 2, kvHeads: 2, d: 16, M: 4, p: 3, window: 16, base: 0, split: 0 },
      { name: 'masked, wrapped ring, split 2', mode: 'masked', heads: 4, kvHeads: 2, d: 16, M: 4, p: 15, window: 8, base: 13, split: 2 },
      { name: 'masked, wrapped ring, split 3', mode: 'masked', heads: 4, kvHeads: 1, d: 8, M: 5, p: 40, window: 16, base: 37, split: 3 },
      { name: 'masked, wrapped ring, W 6, split 2', mode: 'masked', heads: 2, kvHeads: 1, d: 8, M: 3, p: 10, window: 6, base: 9, split: 2 },
    ];
    for (const c of cases) {
      it(`attention ${c.name}: ${c.heads}/${c.kvHeads} heads, d ${c.d}, rows at ${c.p}..${c.p + c.M - 1}${c.mode === 'linear' ? '' : `, W ${c.window}, base ${c.base}`}`, async () => {
        const r = new Rand(12000 + c.p * 13 + c.window * 7 + c.M + c.split);
        if (c.mode !== 'linear') checkKeyOrder(c);
        const x = attnData(r, c);
        // masked rows reduce over up to W + M - 1 keys
        const maxKeys = (c.mode === 'linear' ? x.slots : c.window + c.M - 1) + 2;
        if (c.mode === 'masked') expect(op.maskedKeyCount(c.p, c.M, c.window)).toBeLessThanOrEqual(maxKeys);
        const out = lab.sentinel(c.M * c.heads * c.d);
        await lab.run((rec) => recordAttention(lab, rec, c, { q: lab.f32(x.q), kCache: lab.f32(x.kCache), vCache: lab.f32(x.vCache), kStage: lab.f32(x.kStage), vStage: lab.f32(x.vStage), out }, false, maxKeys, c.split));
        const want = attnReference(c, x);
        expectClose(`attention.${c.mode}${c.split ? '_split' : ''}`, await lab.read(out, c.M * c.heads * c.d), want.out, want.mag, REL_TOL);
        await expectFusedSame(lab, c, x, { split: c.split });
      });
    }
  });
});

// ---- helpers used by several describes -------------------------------------------------------------

/**
 * y = W x for one row of x (at xOff) through dequantized affine weights (src/format/dequant.ts +
 * src/reference/ops.ts matvec), with the magnitude of what the kernel adds up:
 * sum over groups of |scale| sum|q x| + |bias| sum|x|.
 */
function affineReference(A: AffineWeights, c: AffineCase, x: Float64Array, xOff: number): { ref: Float64Array; mag: Float64Array } {
  const groups = c.K / c.gs;
  const ref = matvec(A.w, c.N, c.K, x, xOff);
  const mag = new Float64Array(c.N);
  for (let n = 0; n < c.N; n++) {
    let s = 0;
    for (let g = 0; g < groups; g++) {
      let qx = 0, ax = 0;
      for (let k = g * c.gs; k < (g + 1) * c.gs; k++) {
        qx += Math.abs(A.codes[n * c.K + k] * x[xOff + k]);
        ax += Math.abs(x[xOff + k]);
      }
      s += Math.abs(A.scales[n * groups + g]) * qx + Math.abs(A.biases[n * groups + g]) * ax;
    }
    mag[n] = s;
  }
  return { ref, mag };
}

function argmaxFirst(v: Float32Array): number {
  let best = 0;
  for (let i = 1; i < v.length; i++) if (v[i] > v[best]) best = i;
  return best;
}

/**
 * CPU-side sanity check of expectedKeys against the meaning of the cache: a sliding row at position
 * pos sees exactly positions pos-n+1 .. pos (n = min(pos+1, W)); chrono in increasing order, physical
 * in some rotation of it (slot order).
 */
function checkKeyOrder(c: AttnCase): void {
  const held = slotPositions(c.window, c.base, c.p);
  for (let j = 0; j < c.M; j++) {
    const seen = expectedKeys(c.mode, c.window, c.base, c.p, j, c.span).map((k) => (k.stage ? (c.mode === 'draft' ? c.p - 1 - c.window : c.p + k.row) : held[k.row]));
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
    else expect([...seen].sort((a, b) => a - b), `physical keys of row ${j}`).toEqual(want);
  }
}

/** M rows of x through `lin` together, and each row alone (M = 1): identical bytes (f32 and bf16 runs). */
async function expectRowInvariantMatmul(lab: Lab, r: Rand, lin: GpuLinear, M: number, K: number, N: number, kernel?: op.AffineKernel): Promise<void> {
  const x = r.f32s(M * K);
  const mm = (rec: Recorder, xb: GPUBuffer, y: GPUBuffer, rows: op.Rows) => (kernel ? op.matmul(rec, lin, xb, y, rows, K, N, kernel) : op.matmul(rec, lin, xb, y, rows));
  for (const round of [false, true]) {
    const block = lab.sentinel(M * N);
    const alone = range(M).map(() => lab.sentinel(N));
    await lab.run((rec) => {
      mm(rec, lab.f32(x), block, { M, round });
      alone.forEach((y, m) => mm(rec, lab.f32(x.subarray(m * K, (m + 1) * K)), y, { M: 1, round }));
    });
    const all = await lab.bytes(block, M * N);
    for (let m = 0; m < M; m++) expectSameBytes(`matmul${kernel ? `.${kernel}` : ''} M=${M} row ${m}${round ? ' bf16' : ''}`, all.subarray(m * N * 4, (m + 1) * N * 4), await lab.bytes(alone[m], N));
  }
}

/** Runs op.embed in f32 and bf16 mode and checks every row of the output against `entry(id, col)`. */
async function checkEmbed(lab: Lab, lin: GpuLinear, ids: number[], H: number, entry: (id: number, col: number) => { v: number; mag: number }): Promise<void> {
  const M = ids.length;
  const scale = Math.fround(Math.sqrt(H));
  const idb = lab.u32(ids);
  const h = lab.sentinel(M * H);
  const hb = lab.sentinel(M * H);
  await lab.run((rec) => {
    op.embed(rec, lin, idb, h, scale, { M, round: false });
    op.embed(rec, lin, idb, hb, scale, { M, round: true });
  });
  const ref = new Float64Array(M * H), mag = new Float64Array(M * H);
  const exactB = new Float64Array(M * H), loB = new Float64Array(M * H), hiB = new Float64Array(M * H);
  ids.forEach((id, m) => {
    for (let col = 0; col < H; col++) {
      const { v, mag: e } = entry(id, col);
      const at = m * H + col;
      ref[at] = v * scale;
      mag[at] = e * scale;
      // h = r(r(v) * scale): the range of v's f32 value goes through the inner rounding
      const dv = REL_TOL * Math.abs(v) + MAG_TOL * e;
      exactB[at] = bf16Rne(v) * scale;
      [loB[at], hiB[at]] = scaleInterval(bf16Rne(v - dv), bf16Rne(v + dv), scale);
    }
  });
  expectClose('embed', await lab.read(h, M * H), ref, mag);
  expectBf16('embed bf16', await lab.read(hb, M * H), exactB, loB, hiB);
}
