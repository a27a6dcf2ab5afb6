/** RMSNorm (with its fused second norm, group sums and RoPE), an attention block's q/k/v norms, and RoPE. */
import type { Recorder } from '../gpu/recorder.ts';
import type { Binding } from '../gpu/kernels.ts';
import type { GpuLinear } from './gpu-linear.ts';
import { groups, type Rows } from './op-rows.ts';
import { readsGroupSums } from './affine-kernel.ts';
import { groupSums, type GroupSums } from './matmul-op.ts';

export interface NormArgs {
  rows: number;
  D: number;
  eps: number;
  round: boolean;
  inStride?: number;
  outStride?: number;
  /** Residual mode: out = (out + norm(x)) * postScale. */
  residual?: { postScale: number };
  /** Then normalise the rows just written (out) again into `out` here, with `weight` (null: weightless).
   * (Not called `then`: an object with a `then` member is a thenable, and `await` would call it.) */
  nextNorm?: { weight: GPUBuffer | null; out: GPUBuffer };
  /**
   * Then compute the group sums that the exact kernels of `lin` read from the final rows (the `nextNorm`
   * output, else `out`), as groupSums would (undefined result where they would not be used).
   */
  sums?: { lin: GpuLinear; rows: Rows; slot: string };
  /** Then rotate-half RoPE in place (op.rope): the rows are `heads` heads per position, from pos0. */
  rope?: { table: RopeTable; heads: number; pos0: number };
}

/** rmsnorm.wgsl's Params fields that only `qkv_rows` reads, off for the other entry points. */
const QKV_ROWS_ONLY = { q_rows: 0, kv_rows: 0, kv_heads: 0 } as const;

/** rmsnorm.wgsl's Params fields that only `rows_wg` reads, off for `main`. */
const RMSNORM_ROWS_WG_ONLY = {
  then_norm: 0,
  has_weight2: 0,
  sums_group: 0,
  rot_pairs: 0,
  heads: 0,
  pos0: 0,
  table_half: 0,
  ...QKV_ROWS_ONLY,
} as const;

/** Invocations per row of rmsnorm.wgsl `rows_wg` (a power of two). */
const NORM_WG = 256;

/**
 * RMSNorm of `rows` rows of length D; `weight` null = weightless (v_norm); optionally followed by a
 * second norm and by the group sums of the result (NormArgs.nextNorm / .sums). On GPUs one `rows_wg`
 * dispatch does all of it (a workgroup per row; see rmsnorm.wgsl); on software adapters, where
 * workgroup barriers are costly, one invocation per row (`main`) and separate dispatches, in the same
 * order of operations per value.
 */
export function rmsnorm(
  rec: Recorder,
  x: GPUBuffer,
  weight: GPUBuffer | null,
  out: GPUBuffer,
  dummy: GPUBuffer,
  a: NormArgs,
): GroupSums | undefined {
  const D = a.D;
  const inStride = a.inStride ?? D;
  const outStride = a.outStride ?? D;
  // Sums only where the next matmul reads them (sumsKernel's decision: not for MLX's kernels or split-K) of rows
  // of exactly its inputs.
  const sumsLin =
    a.sums && outStride === D && a.sums.lin.desc.inFeatures === D && readsGroupSums(rec, a.sums.lin, a.sums.rows, D)
      ? a.sums.lin
      : undefined;
  if (rec.kernels.kernelClass === 'gpu') {
    const gs = sumsLin && sumsLin.desc.kind === 'affine' ? sumsLin.desc.groupSize : 0;
    const params = rec.params('rmsnorm.wgsl', {
      rows: a.rows,
      D,
      in_stride: inStride,
      out_stride: outStride,
      eps: a.eps,
      has_weight: weight !== null,
      mode: a.residual !== undefined,
      round: a.round,
      post_scale: a.residual?.postScale ?? 1,
      then_norm: a.nextNorm !== undefined,
      has_weight2: !!a.nextNorm?.weight,
      sums_group: gs,
      rot_pairs: a.rope?.table.rotPairs ?? 0,
      heads: a.rope?.heads ?? 1,
      pos0: a.rope?.pos0 ?? 0,
      table_half: a.rope?.table.half ?? 0,
      ...QKV_ROWS_ONLY,
    });
    // Unused writable bindings get placeholders of their own (WebGPU forbids two writable bindings of one range).
    const xs = gs
      ? rec.kernels.scratch(`xsums.${a.sums!.slot}`, a.rows * (D / gs) * 4)
      : rec.kernels.scratch('unused.xs', 16);
    const out2 = a.nextNorm?.out ?? rec.kernels.scratch('unused.out2', 16);
    const [cos, sin] = a.rope ? [a.rope.table.cos, a.rope.table.sin] : [dummy, dummy];
    rec.run(
      'rmsnorm.wgsl',
      'rows_wg',
      { WG: NORM_WG },
      [params, x, weight ?? dummy, out, a.nextNorm?.weight ?? dummy, out2, xs, cos, sin],
      a.rows,
    );
    if (!gs) return undefined;
    const final = a.nextNorm?.out ?? out;
    return { buffer: xs, x: final, M: a.rows, K: D, xStride: D, groupSize: gs };
  }
  const one = (
    src: GPUBuffer,
    w: GPUBuffer | null,
    dst: GPUBuffer,
    o: { inStride: number; outStride: number; residual?: { postScale: number } },
  ) => {
    const params = rec.params('rmsnorm.wgsl', {
      rows: a.rows,
      D,
      in_stride: o.inStride,
      out_stride: o.outStride,
      eps: a.eps,
      has_weight: w !== null,
      mode: o.residual !== undefined,
      round: a.round,
      post_scale: o.residual?.postScale ?? 1,
      ...RMSNORM_ROWS_WG_ONLY, // unused by main
    });
    rec.run('rmsnorm.wgsl', 'main', {}, [params, src, w ?? dummy, dst], groups(a.rows));
  };
  one(x, weight, out, { inStride, outStride, residual: a.residual });
  if (a.rope) rope(rec, out, a.rope.table, a.rope.heads, D, a.rope.pos0, { M: a.rows / a.rope.heads, round: a.round });
  if (a.nextNorm) one(out, a.nextNorm.weight, a.nextNorm.out, { inStride: outStride, outStride });
  if (!sumsLin) return undefined;
  return groupSums(rec, sumsLin, a.nextNorm?.out ?? out, a.sums!.rows, D, a.sums!.slot);
}

/**
 * One head-row tensor of an attention block's q / k / v norms: [rows, D] in `x` (a buffer, or a view of a
 * stacked projection's output: stackedQkvMatmul), normalised into `out`.
 */
export interface HeadRows {
  x: GPUBuffer | Binding;
  out: GPUBuffer;
  rows: number;
}

/** An attention block's three norms: q and k with their weights and RoPE (heads per position each), v weightless. */
export interface QkvNormArgs {
  D: number;
  eps: number;
  round: boolean;
  q: HeadRows & { weight: GPUBuffer; heads: number };
  k: HeadRows & { weight: GPUBuffer; heads: number };
  v: HeadRows;
  rope: { table: RopeTable; pos0: number };
}

/** Storage bindings of rmsnorm.wgsl `qkv_rows` (WebGPU guarantees 8 per stage; GPUs offer 10 or more). */
const QKV_ROWS_STORAGE = 10;

/** Whether qkvNorm runs as one `qkv_rows` dispatch on this device. */
export function qkvNormFused(rec: Recorder): boolean {
  return (
    rec.kernels.kernelClass === 'gpu' && rec.kernels.device.limits.maxStorageBuffersPerShaderStage >= QKV_ROWS_STORAGE
  );
}

/**
 * The q, k and v norms (q, k with RoPE) of an attention block: one rmsnorm.wgsl `qkv_rows` dispatch on GPUs
 * whose stage takes its ten storage bindings, else the three rmsnorm calls it equals byte for byte.
 */
export function qkvNorm(rec: Recorder, dummy: GPUBuffer, a: QkvNormArgs): void {
  if (!qkvNormFused(rec)) {
    const raw = [a.q.x, a.k.x, a.v.x];
    if (!raw.every((b): b is GPUBuffer => !('buffer' in b)))
      throw new Error('qkvNorm: views of a stacked projection need the fused qkv_rows kernel');
    const base = { D: a.D, eps: a.eps, round: a.round };
    const ropeOf = (heads: number) => ({ table: a.rope.table, heads, pos0: a.rope.pos0 });
    rmsnorm(rec, raw[0], a.q.weight, a.q.out, dummy, { ...base, rows: a.q.rows, rope: ropeOf(a.q.heads) });
    rmsnorm(rec, raw[1], a.k.weight, a.k.out, dummy, { ...base, rows: a.k.rows, rope: ropeOf(a.k.heads) });
    rmsnorm(rec, raw[2], null, a.v.out, dummy, { ...base, rows: a.v.rows });
    return;
  }
  if (a.k.rows !== a.v.rows) throw new Error(`qkvNorm: ${a.k.rows} k rows but ${a.v.rows} v rows`);
  const t = a.rope.table;
  const params = rec.params('rmsnorm.wgsl', {
    rows: a.q.rows + 2 * a.k.rows,
    D: a.D,
    in_stride: a.D,
    out_stride: a.D,
    eps: a.eps,
    has_weight: 1,
    mode: 0,
    round: a.round,
    post_scale: 1,
    then_norm: 0,
    has_weight2: 1,
    sums_group: 0,
    rot_pairs: t.rotPairs,
    heads: a.q.heads,
    pos0: a.rope.pos0,
    table_half: t.half,
    q_rows: a.q.rows,
    kv_rows: a.k.rows,
    kv_heads: a.k.heads,
  });
  rec.run(
    'rmsnorm.wgsl',
    'qkv_rows',
    { WG: NORM_WG },
    [params, a.q.x, a.q.weight, a.q.out, a.k.weight, a.k.out, undefined, t.cos, t.sin, a.k.x, a.v.x, a.v.out],
    a.q.rows + 2 * a.k.rows,
  );
}

export interface RopeTable {
  cos: GPUBuffer;
  sin: GPUBuffer;
  /** Pairs per position in the table (d / 2). */
  half: number;
  /** Pairs that rotate (the rest have frequency 0). */
  rotPairs: number;
}

/** In-place rotate-half RoPE on [M, heads, d] at positions pos0 .. pos0+M-1. */
export function rope(rec: Recorder, x: GPUBuffer, t: RopeTable, heads: number, d: number, pos0: number, r: Rows): void {
  if (t.rotPairs === 0) return;
  const params = rec.params('rope.wgsl', {
    M: r.M,
    heads,
    d,
    pos0,
    rot_pairs: t.rotPairs,
    table_half: t.half,
    round: r.round,
  });
  rec.run('rope.wgsl', 'main', {}, [params, x, t.cos, t.sin], groups(r.M * heads * t.rotPairs));
}
