/** A layer's stacked q, k and v projections as one coop dispatch: where each lands, when it runs, and the dispatch. */
import type { Recorder } from '../gpu/recorder.ts';
import type { Binding } from '../gpu/kernels.ts';
import type { GpuStackedQkv } from './gpu-linear.ts';
import { affineParams } from './affine-params.ts';
import type { AffineLinearDesc, Rows } from './op-rows.ts';
import { sumsKernel } from './affine-kernel.ts';
import { coopMain, sumsFor, type GroupSums } from './matmul-op.ts';
import { qkvNormFused } from './norm-rope-op.ts';

/**
 * Where stackedQkvMatmul writes each projection of M rows in its output buffer, in floats: q at 0 as
 * [M, rows[0]], then each next one as [M, rows[i]] from the next multiple of 64 floats (a 256-byte binding
 * offset). matmul_coop.wgsl `y_index` computes the same places.
 */
export function stackedQkvBlocks(M: number, rows: number[]): { offset: number; floats: number }[] {
  let offset = 0;
  return rows.map((n, i) => {
    if (i > 0) offset = Math.ceil(offset / 64) * 64;
    const b = { offset, floats: M * n };
    offset += M * n;
    return b;
  });
}

/**
 * Whether a forward runs layer `qkv`'s stacked q, k and v as one dispatch (stackedQkvMatmul) for rows r: where
 * each projection alone would run the coop kernel's exact path (GPUs, decode steps and verify blocks; not
 * MLX's kernels, split-K, or prefill) and the norms after it run as `qkv_rows`, which reads the projections as
 * views of the stack's output. Everywhere else the three matmuls run apart, on the same weights.
 */
export function stackedQkvFits(rec: Recorder, qkv: GpuStackedQkv, r: Rows): boolean {
  const d = qkv.lin.desc;
  const { rows } = qkv;
  // matmul_coop.wgsl's segments: q, then k, then v as wide as k (every Gemma 4 layer's)
  const segments = rows.length === 2 || (rows.length === 3 && rows[1] === rows[2]);
  return (
    segments && qkvNormFused(rec) && qkv.lin.weight.parts.length === 1 && sumsKernel(rec, d, r, d.inFeatures) === 'coop'
  );
}

/**
 * A layer's q, k and v (k_eq_v: q and k) projections of x in ONE matmul_coop.wgsl dispatch over their stacked
 * weights (GpuStackedQkv), into `out` at stackedQkvBlocks' places; returns each projection's rows as a view of
 * `out`. Each output feature runs the arithmetic the projection's own matmul gives it (the coop kernel's
 * arithmetic depends on a feature's row, x and the kernel's T, never on the linear's other rows), so the
 * bytes equal the three matmuls' (test/gpu/stacked-qkv.test.ts). H200, 12B sliding layer: 13.1 us at M = 1
 * and 26.4 us at M = 4 against 23.8 and 51.0 for the three dispatches (their narrow grids leave the GPU idle).
 */
export function stackedQkvMatmul(
  rec: Recorder,
  qkv: GpuStackedQkv,
  x: GPUBuffer,
  out: GPUBuffer,
  r: Rows,
  sums?: GroupSums,
): Binding[] {
  const { lin, rows } = qkv;
  const d = lin.desc as AffineLinearDesc;
  const xs = sumsFor(rec, lin, x, r, d.inFeatures, sums);
  // matmul_coop.wgsl y_index: q's rows (y_stride), then k's and v's (equal widths: stackedQkvFits)
  const params = affineParams(rec, 'matmul_coop.wgsl', d, lin.weight.parts[0], r, d.inFeatures, rows[0]);
  coopMain(rec, lin, 0, params, x, xs, out, rows.length);
  return stackedQkvBlocks(r.M, rows).map((b) => ({ buffer: out, offset: b.offset * 4, size: b.floats * 4 }));
}
