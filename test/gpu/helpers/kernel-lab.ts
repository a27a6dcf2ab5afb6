/**
 * Shared by the kernel tests (test/gpu/kernels-*.test.ts): seeded data, bit helpers, the f32 and bf16
 * comparisons with their error bounds, and the Lab that records and runs kernels as the engine does
 * (Recorder + src/model/ops.ts, buffers read back after the submit).
 *
 * Error bounds. Every f32 comparison is |gpu - exact| <= bound, element-wise, where `exact` is the
 * float64 result of the same math and `bound` follows from the kernel's own arithmetic: the number of
 * f32 roundings on the longest chain that leads to the output, each at most U = 2^-24 relative to the
 * magnitude it acts on (a correctly rounded operation; lavapipe and SwiftShader round + - * / and sqrt
 * correctly), plus the asserted error of the transcendentals of shaders/common.wgsl (EXP_REF_ULP, ...).
 * `mag` is the sum of the absolute values of the terms a kernel adds up, the scale at which its
 * rounding acts, so that cancellation does not turn a correct result into a failure. Each test states
 * its count next to the assertion. There is no relative slack on top: a slack such as 1e-5 |exact| would
 * swamp the rounding counts.
 */
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { testGpu } from '../gpu-context.ts';
import type { GpuContext } from '../../../src/gpu/device.ts';
import type { CoopTuning } from '../../../src/gpu/coop-tuning.ts';
import { KernelCache, type PipelinePool } from '../../../src/gpu/kernels.ts';
import { Recorder } from '../../../src/gpu/recorder.ts';
import { readBytes, storageBuffer, uploadBuffer } from '../../../src/gpu/buffers.ts';

export const ADAPTER = process.env.RINGSIDE_ADAPTER ?? 'default adapter';
/** f32 unit roundoff: one correctly rounded f32 operation is off by at most U relative to its exact result. */
export const U = 2 ** -24;
/** Row counts of the row-invariance tests. */
export const ROW_COUNTS = [2, 3, 4, 8];

// ---- the accuracy figures of shaders/common.wgsl (asserted by kernels-elementwise.test.ts) ---------------

/** exp_ref: at most this many ULPs of the true e^x where e^x is a normal f32. */
export const EXP_REF_ULP = 1.5;
/** rsqrt_ref: at most this many ULPs of the true 1/sqrt(x) (correctly rounded sqrt and division). */
export const RSQRT_REF_ULP = 1.5;

/** Spacing of f32 values at |t| (normal range; 2^-149 below it): one ULP of t. */
export function ulpF32(t: number): number {
  const a = Math.abs(t);
  return a < 2 ** -126 ? 2 ** -149 : 2 ** (Math.floor(Math.log2(a)) - 23);
}

/**
 * Bound on |tanh_ref(x) - tanh(x)| for an f32 x, from tanh_ref's three branches (shaders/common.wgsl):
 * - |x| < 0.125, odd series x (1 + s), |s| <= x^2 / 3 <= 0.0053: the last add and the product with x
 *   round once each (2U), the roundings inside s (about five, each relative to s) add at most 0.03U, the
 *   series' truncation (0.0089 x^11) is below 1e-11 relative: 2.05U |t| (at most 2 ULP);
 * - |x| > 9.1, sign(x): off by 1 - tanh|x| < 2 e^(-2|x|) (under half an ULP of 1), plus 2^-52 for the
 *   float64 truth's own rounding next to 1;
 * - otherwise t = 1 - q, q = 2 / (e + 1), e = exp_ref(2|x|) (2|x| is exact): e's error (EXP_REF_ULP)
 *   reaches q shrunk by e / (e + 1) and relative to e + 1, plus the roundings of e + 1 and of the
 *   division (U each, relative to q); 1 - q rounds once (half an ULP of t; exact by Sterbenz where
 *   q >= 1/2). The error of q is what the cancellation in 1 - q magnifies by q / t, up to 7 just
 *   above |x| = 0.125.
 */
export function tanhRefBound(x: number): number {
  const a = Math.abs(x);
  const t = Math.tanh(a);
  if (a < 0.125) return 2.05 * U * t;
  if (a > 9.1) return 2 * Math.exp(-2 * a) + 2 ** -52;
  const e = Math.exp(2 * a);
  const q = 2 / (e + 1);
  return q * ((EXP_REF_ULP * ulpF32(e)) / (e + 1) + 2 * U) + 0.5 * ulpF32(t);
}

/**
 * Bound on the error of shaders/common.wgsl gelu_tanh(x) = 0.5 x (1 + tanh_ref(c (x + 0.044715 x^3)))
 * for an f32 x: the tanh argument a carries 7 roundings (x*x, *x, the constant 0.044715, *, +, the
 * constant c, *; x and x^3 have the same sign, so nothing cancels): |da| <= 7U|a|, which moves tanh by
 * (1 - t^2) |da|; tanh_ref's own error (tanhRefBound); 1 + t rounds once; 0.5 x is exact; the product
 * rounds once (U |gelu|). Plus 0.5 |x| 2^-52: the float64 twin (src/reference/ops.ts geluTanh) cancels in
 * 1 + tanh as well, where its tanh is within 2^-53 of -1.
 */
export function geluBound(x: number): number {
  const a = 0.7978845608028654 * (x + 0.044715 * x * x * x);
  const t = Math.tanh(a);
  const dt = (1 - t * t) * 7 * U * Math.abs(a) + tanhRefBound(a);
  const g = 0.5 * x * (1 + t);
  return 0.5 * Math.abs(x) * (dt + U * (1 + t) + 2 ** -52) + U * Math.abs(g);
}

// ---- seeded random data ------------------------------------------------------------------------

export class Rand {
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
export function f32Bits(x: number): number {
  SCRATCH_F[0] = x;
  return SCRATCH_U[0];
}
export function bitsF32(u: number): number {
  SCRATCH_U[0] = u >>> 0;
  return SCRATCH_F[0];
}
/** bf16 bits of x truncated (generating data: any bf16 value will do). */
export function bf16Trunc(x: number): number {
  return f32Bits(x) >>> 16;
}

/**
 * Round-to-nearest-even of the f32 value of x to bf16, by comparing the distances to the two bf16
 * neighbours (independent of the bit trick in shaders/common.wgsl). Above the largest bf16 the upper
 * neighbour is 2^128 (infinity), as IEEE rounding treats overflow.
 */
export function bf16Rne(x: number): number {
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
export function randomF16Bits(r: Rand): number {
  return ((r.int(2) << 15) | ((9 + r.int(9)) << 10) | r.int(1024)) >>> 0;
}

export const bytesOf = (a: ArrayBufferView) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
export const range = (n: number) => Array.from({ length: n }, (_, i) => i);
export const SENTINEL = 0xdeadbeef; // a float nothing computes (-6.3e18): marks elements a kernel must not touch

// ---- comparison --------------------------------------------------------------------------------

/** Worst error per op, in units of the op's bound, printed at the end of each file. */
const worst = new Map<string, number>();
function note(opName: string, ratio: number): void {
  worst.set(opName, Math.max(worst.get(opName) ?? 0, ratio));
}
const nearTies = new Map<string, number>();
/** Elements of the row kernels' outputs bit-identical to the affine kernel's (same arithmetic sequence): [same, total]. */
export const sameAsAffine = new Map<string, [number, number]>();

/**
 * f32 outputs: |got - ref| <= tol * mag, element-wise. `tol` is the op's rounding count times U (see the
 * header); ops whose bound is not a multiple of one magnitude pass the bound itself as `mag` and tol 1.
 */
export function expectClose(
  what: string,
  got: ArrayLike<number>,
  ref: ArrayLike<number>,
  mag: ArrayLike<number>,
  tol: number,
): void {
  expect(got.length, `${what}: length`).toBe(ref.length);
  const bad: string[] = [];
  let nbad = 0;
  let worstRatio = 0;
  for (let i = 0; i < ref.length; i++) {
    const err = Math.abs(got[i] - ref[i]);
    const bound = tol * mag[i];
    if (!(err <= bound)) {
      nbad++;
      if (bad.length < 6)
        bad.push(`[${i}] got ${got[i]} want ${ref[i]} (err ${err.toExponential(2)}, bound ${bound.toExponential(2)})`);
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

/** The f32 error bound of expectClose (tol * mag), as an interval around each value. */
export function f32Interval(
  exact: ArrayLike<number>,
  mag: ArrayLike<number>,
  tol: number,
): { lo: Float64Array; hi: Float64Array } {
  const lo = new Float64Array(exact.length),
    hi = new Float64Array(exact.length);
  for (let i = 0; i < exact.length; i++) {
    const s = tol * mag[i];
    lo[i] = exact[i] - s;
    hi[i] = exact[i] + s;
  }
  return { lo, hi };
}

/** [lo, hi] * k for a scalar k of either sign. */
export function scaleInterval(lo: number, hi: number, k: number): [number, number] {
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
export function expectBf16(
  what: string,
  got: Float32Array,
  exact: ArrayLike<number>,
  lo: ArrayLike<number> = exact,
  hi: ArrayLike<number> = exact,
  maxNearTies = Math.max(2, Math.ceil(got.length / 500)),
): number {
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
  expect(
    ties,
    `${what}: ${ties} well-conditioned elements on the other side of a bf16 tie (at most ${maxNearTies} expected)`,
  ).toBeLessThanOrEqual(maxNearTies);
  nearTies.set(what.split(' ')[0], (nearTies.get(what.split(' ')[0]) ?? 0) + ties);
  return ties;
}

/** Byte equality with a useful message (first differing float). */
export function expectSameBytes(what: string, a: Uint8Array, b: Uint8Array): void {
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

export class Lab {
  readonly device: GPUDevice;
  readonly kernels: KernelCache;
  readonly dummy: GPUBuffer;
  private readonly owned: GPUBuffer[] = [];
  /** Pipelines shared by `kernels` and every tuned cache (tuned): only the constants a tuning changes compile. */
  private readonly pool: PipelinePool = { modules: new Map(), pipelines: new Map() };
  private readonly tunings = new Map<string, KernelCache>();
  constructor(readonly ctx: GpuContext) {
    this.device = ctx.device;
    this.kernels = new KernelCache(this.device, { pool: this.pool });
    this.dummy = storageBuffer(this.device, 16, 'dummy');
  }
  /** A kernel cache of the lab's class whose coop linears take this shape (src/gpu/coop-tuning.ts), kept per tuning. */
  tuned(coop: CoopTuning): KernelCache {
    const key = JSON.stringify(coop);
    let k = this.tunings.get(key);
    if (!k) {
      k = new KernelCache(this.device, { pool: this.pool, kernelClass: this.kernels.kernelClass, coop });
      this.tunings.set(key, k);
    }
    return k;
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
  async run(fn: (rec: Recorder) => void, kernels = this.kernels): Promise<void> {
    this.device.pushErrorScope('validation');
    const rec = new Recorder(this.device, kernels, 'kernel-test');
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

/**
 * Inside a describe: opens the device and a Lab before the tests (handing the Lab to `set`), frees each
 * test's buffers after it, and at the end prints the worst error / bound per op and closes the device.
 * RINGSIDE_ADAPTER (scripts/test.sh) says which adapter must be in use; test/gpu/gpu-context.ts checks it.
 */
export function useLab(set: (lab: Lab) => void): void {
  let ctx: GpuContext | undefined;
  let lab: Lab | undefined;
  const t0 = performance.now();
  beforeAll(async () => {
    ctx = await testGpu();
    lab = new Lab(ctx);
    set(lab);
    const rep = ctx.report;
    console.log(
      `adapter: ${rep.description} (${rep.architecture}), subgroups ${rep.subgroupMinSize ?? '?'}..${rep.subgroupMaxSize ?? '?'}, ` +
        `maxComputeInvocationsPerWorkgroup ${rep.limits.maxComputeInvocationsPerWorkgroup}, features [${rep.features.join(', ')}]`,
    );
  });
  afterEach(() => lab?.release());
  afterAll(() => {
    const w = [...worst].map(([k, v]) => `${k} ${v.toFixed(3)}`).join(', ');
    const ties = [...nearTies].map(([k, v]) => `${k} ${v}`).join(', ');
    const same = [...sameAsAffine].map(([k, [n, t]]) => `${k} ${n}/${t}`).join(', ');
    console.log(
      `worst error / bound per op (${ADAPTER}): ${w}\nbf16 near-ties per op: ${ties || 'none'}` +
        `${same ? `\nrow kernels bit-identical to affine: ${same}` : ''}\n${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
    lab?.destroy();
    ctx?.destroy();
  });
}
