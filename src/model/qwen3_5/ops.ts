import type { Recorder } from '../../gpu/recorder.ts';
import type { RopeTable } from '../ops.ts';

/**
 * Typed wrappers of the Qwen3.5 kernels (shaders/gated_delta.wgsl, shaders/qwen_ops.wgsl), beside
 * src/model/ops.ts: one function per op, one pipeline per op whatever the row count, so a verify block's
 * rows get the arithmetic of chain steps.
 */
const WG = 64;
const groups = (n: number) => Math.ceil(n / WG);

/** Gated DeltaNet geometry of a layer (docs/QWEN35.md section 1). */
export interface GdnGeometry {
  /** convDim: channels of in_proj_qkv (q, k, v). */
  C: number;
  /** Conv kernel size. */
  K: number;
  Hk: number;
  Hv: number;
  Dk: number;
  Dv: number;
}

/** Most key-head dims the recurrence holds per invocation (gated_delta.wgsl DK_MAX). */
export const GDN_DK_MAX = 256;

function gdnParams(
  rec: Recorder,
  g: GdnGeometry,
  o: { M: number; n?: number; stage?: boolean; round: boolean; eps?: number; stateBf16?: boolean },
) {
  return rec.params('gated_delta.wgsl', {
    M: o.M,
    C: g.C,
    K: g.K,
    n: o.n ?? 0,
    Hk: g.Hk,
    Hv: g.Hv,
    Dk: g.Dk,
    Dv: g.Dv,
    stage: o.stage ?? false,
    round: o.round,
    eps: o.eps ?? 0,
    q_scale: g.Dk ** -0.5,
    state_bf16: o.stateBf16 ?? false,
  });
}

/** c = silu(causal depthwise conv over [window; qkv rows]) for M rows. */
export function gdnConv(
  rec: Recorder,
  g: GdnGeometry,
  a: { window: GPUBuffer; qkv: GPUBuffer; weight: GPUBuffer; out: GPUBuffer; M: number; round: boolean },
): void {
  const p = gdnParams(rec, g, a);
  rec.run('gated_delta.wgsl', 'conv', {}, [p, a.window, a.qkv, a.out, a.weight], groups(a.M * g.C));
}

/** windowOut = the last K-1 raw rows of [window; first n rows of qkv] (the conv state after n tokens). */
export function gdnConvCommit(
  rec: Recorder,
  g: GdnGeometry,
  a: { window: GPUBuffer; qkv: GPUBuffer; windowOut: GPUBuffer; n: number },
): void {
  const p = gdnParams(rec, g, { M: a.n, n: a.n, round: false });
  const b = [p, a.window, a.qkv, undefined, undefined, a.windowOut];
  rec.run('gated_delta.wgsl', 'conv_commit', {}, b, groups((g.K - 1) * g.C));
}

/** qk [M, 2 keyDim] = L2-normalised q (times Dk^-1/2) and k of the conv output c [M, C]. */
export function gdnQkNorm(
  rec: Recorder,
  g: GdnGeometry,
  a: { c: GPUBuffer; qk: GPUBuffer; M: number; round: boolean },
) {
  const p = gdnParams(rec, g, a);
  const b = [p, undefined, undefined, a.c, undefined, undefined, a.qk];
  rec.run('gated_delta.wgsl', 'qk_norm', {}, b, groups(a.M * 2 * g.Hk));
}

/** gb [M, Hv, 2] = (g, beta) from the a and b projections. */
export function gdnGates(
  rec: Recorder,
  g: GdnGeometry,
  a: { a: GPUBuffer; b: GPUBuffer; aLog: GPUBuffer; dtBias: GPUBuffer; gb: GPUBuffer; M: number },
): void {
  const p = gdnParams(rec, g, { M: a.M, round: false });
  const u = undefined;
  const b = [p, u, u, u, u, u, u, a.a, a.b, a.aLog, a.dtBias, a.gb];
  rec.run('gated_delta.wgsl', 'gates', {}, b, groups(a.M * g.Hv));
}

/**
 * The gated delta rule over M tokens in order: o [M, Hv, Dv]. With `stage` the state after token t goes to
 * row t of `stage` and S is left as it was (a step or verify block: commit copies the accepted row); without,
 * S is updated in place (prefill).
 */
export function gdnRecurrence(
  rec: Recorder,
  g: GdnGeometry,
  a: {
    S: GPUBuffer;
    stage?: GPUBuffer;
    unused: GPUBuffer;
    qk: GPUBuffer;
    c: GPUBuffer;
    gb: GPUBuffer;
    o: GPUBuffer;
    M: number;
    round: boolean;
    /** The inexact policy gdn-state-bf16: states are stored rounded to bf16. */
    stateBf16?: boolean;
  },
): void {
  if (g.Dk > GDN_DK_MAX) throw new Error(`Gated DeltaNet key head dim ${g.Dk} exceeds ${GDN_DK_MAX}`);
  const p = gdnParams(rec, g, { M: a.M, stage: a.stage !== undefined, round: a.round, stateBf16: a.stateBf16 });
  const u = undefined;
  const b = [p, u, u, a.c, u, u, a.qk, u, u, u, u, a.gb, a.S, a.stage ?? a.unused, a.o];
  rec.run('gated_delta.wgsl', 'recurrence', {}, b, groups(g.Hv * g.Dv));
}

/** Rows per chunk of the chunked form (gated_delta.wgsl CHUNK; transformers' and fla's chunk_size). */
export const GDN_CHUNK = 64;

/** lg [M, Hv] = -(exp(A_log) softplus(a + dt_bias)): the log decays the chunked form sums (gdn-chunked). */
export function gdnLogGates(
  rec: Recorder,
  g: GdnGeometry,
  a: { a: GPUBuffer; aLog: GPUBuffer; dtBias: GPUBuffer; lg: GPUBuffer; M: number },
): void {
  const p = gdnParams(rec, g, { M: a.M, round: false });
  const u = undefined;
  const b = [p, u, u, u, u, u, u, a.a, u, a.aLog, a.dtBias, u, u, u, u, u, u, u, a.lg];
  rec.run('gated_delta.wgsl', 'log_gates', {}, b, groups(a.M * g.Hv));
}

/** gated_delta.wgsl ROWS_MAX: the most rows recurrence_chunked takes (a verify block; its arrays are sized for it). */
export const GDN_CHUNKED_ROWS_MAX = 16;

/**
 * The gated delta rule over M tokens in the chunked (WY) form (gated_delta.wgsl recurrence_chunked), the
 * inexact policy gdn-chunked's verify arm: o [M, Hv, Dv] and the state after each token in row t of
 * `stage` (S is read, never written). Log decays from `lg` (gdnLogGates), beta from `gb` (gdnGates).
 */
export function gdnRecurrenceChunked(
  rec: Recorder,
  g: GdnGeometry,
  a: {
    S: GPUBuffer;
    stage: GPUBuffer;
    qk: GPUBuffer;
    c: GPUBuffer;
    gb: GPUBuffer;
    lg: GPUBuffer;
    o: GPUBuffer;
    M: number;
    round: boolean;
  },
): void {
  if (g.Dk > GDN_DK_MAX) throw new Error(`Gated DeltaNet key head dim ${g.Dk} exceeds ${GDN_DK_MAX}`);
  if (a.M > GDN_CHUNKED_ROWS_MAX)
    throw new Error(`gdn-chunked runs verify blocks of at most ${GDN_CHUNKED_ROWS_MAX} rows, not ${a.M}`);
  const p = gdnParams(rec, g, { M: a.M, stage: true, round: a.round });
  const u = undefined;
  const b = [p, u, u, a.c, u, u, a.qk, u, u, u, u, a.gb, a.S, a.stage, a.o, u, u, u, a.lg];
  rec.run('gated_delta.wgsl', 'recurrence_chunked', {}, b, groups(g.Hv * g.Dv));
}

/** y = RMSNormGated(o) * silu(z) per value head row. */
export function gdnGatedNorm(
  rec: Recorder,
  g: GdnGeometry,
  a: { o: GPUBuffer; z: GPUBuffer; weight: GPUBuffer; y: GPUBuffer; M: number; eps: number; round: boolean },
): void {
  const p = gdnParams(rec, g, a);
  const u = undefined;
  const b = [p, u, u, u, u, u, u, u, u, u, u, u, u, u, a.o, a.z, a.weight, a.y];
  rec.run('gated_delta.wgsl', 'gated_norm', {}, b, groups(a.M * g.Hv));
}

function opsParams(rec: Recorder, v: Partial<Record<string, number | boolean>>) {
  return rec.params('qwen_ops.wgsl', {
    M: 0,
    heads: 0,
    d: 0,
    rot: 0,
    pos0: 0,
    table_half: 0,
    round: false,
    n: 0,
    in_stride: 0,
    gate_off: 0,
    scale: 1,
    ...v,
  } as Record<string, number | boolean>);
}

/**
 * Partial rotate-half RoPE in place on x [M, heads, d] at positions pos0.. (pairs i, i + rot/2 within the
 * first `rot` dims; `table` built for rot dims), then x *= scale (the attention's 1/sqrt(d), exact when it
 * is a power of two).
 */
export function partialRope(
  rec: Recorder,
  x: GPUBuffer,
  table: RopeTable,
  a: { M: number; heads: number; d: number; rot: number; pos0: number; scale: number; round: boolean },
): void {
  const p = opsParams(rec, { ...a, table_half: table.half });
  rec.run('qwen_ops.wgsl', 'partial_rope', {}, [p, x, table.cos, table.sin], groups(a.M * a.heads));
}

/** x [M, heads, d] *= sigmoid(gate), gates in qg at (m heads + h) * stride + gateOff. */
export function outGate(
  rec: Recorder,
  x: GPUBuffer,
  qg: GPUBuffer,
  a: { M: number; heads: number; d: number; stride: number; gateOff: number; round: boolean },
): void {
  const p = opsParams(rec, {
    M: a.M,
    heads: a.heads,
    d: a.d,
    in_stride: a.stride,
    gate_off: a.gateOff,
    round: a.round,
  });
  rec.run('qwen_ops.wgsl', 'out_gate', {}, [p, x, undefined, undefined, qg], groups(a.M * a.heads * a.d));
}

/** x = silu(x) * b over n elements. */
export function swiglu(rec: Recorder, x: GPUBuffer, b: GPUBuffer, n: number, round: boolean): void {
  const p = opsParams(rec, { n, round });
  rec.run('qwen_ops.wgsl', 'swiglu', {}, [p, x, undefined, undefined, undefined, b], groups(n));
}

/** x = x + b over n elements (residual). */
export function add(rec: Recorder, x: GPUBuffer, b: GPUBuffer, n: number, round: boolean): void {
  const p = opsParams(rec, { n, round });
  rec.run('qwen_ops.wgsl', 'add', {}, [p, x, undefined, undefined, undefined, b], groups(n));
}
