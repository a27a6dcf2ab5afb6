/** The matmul dispatches: y = W x over a whole linear (exact kernels, split-K, MLX's), and the x group sums they read. */
import type { Recorder } from '../gpu/recorder.ts';
import type { Binding } from '../gpu/kernels.ts';
import { partBinding } from '../gpu/upload.ts';
import { layoutConstants, type AffineLayout } from '../gpu/weight-layout.ts';
import type { GpuLinear } from './gpu-linear.ts';
import { mlxMatmul } from './mlx-matmul.ts';
import { affineParams } from './affine-params.ts';
import { DENSE_DTYPE, WG, groups, type AffineLinearDesc, type Rows } from './op-rows.ts';
import { coopShape } from './coop-shape.ts';
import { sumsKernel, type AffineKernel } from './affine-kernel.ts';

/**
 * matmul_coop.wgsl `main` over row part i of an affine linear (ops.matmul's coop path, and a stacked q/k/v in
 * `segments` segments: stackedQkvMatmul), with its parameters and x group sums made by the caller.
 */
export function coopMain(
  rec: Recorder,
  lin: GpuLinear,
  i: number,
  params: Binding,
  x: GPUBuffer,
  xs: GPUBuffer,
  y: GPUBuffer,
  segments = 1,
): void {
  const part = lin.weight.parts[i];
  const w = partBinding(part);
  const sb = [partBinding(lin.scales!.parts[i]), partBinding(lin.biases!.parts[i])];
  const { constants, workgroups } = coopDispatch(rec, lin.desc as AffineLinearDesc, part.rows, 'main', lin.layout);
  // bindings 9-11 hold gate_up's second matrix; `main` gets its own again there, where single rows of R = 4
  // read their slots 2 and 3 (matmul_coop.wgsl row_slots). SEGMENTS = 1: the default pipeline.
  rec.run(
    'matmul_coop.wgsl',
    'main',
    segments === 1 ? constants : { ...constants, SEGMENTS: segments },
    [params, undefined, undefined, y, ...sb, xs, x, w, w, ...sb],
    workgroups,
  );
}

/** The coop pipeline's constants and workgroup count for one row part of a linear. */
export function coopDispatch(
  rec: Recorder,
  d: AffineLinearDesc,
  rows: number,
  entry: 'main' | 'gate_up',
  layout: AffineLayout | undefined,
): { constants: Record<string, number>; workgroups: number } {
  const { WG, T, R } = coopShape(rec.kernels.device.limits, d, entry, rec.kernels.coop);
  return {
    constants: { BITS: d.bits, WG, T, R, GS: d.groupSize, ...layoutConstants(layout) },
    workgroups: Math.ceil(rows / (R * (WG / T))),
  };
}

/**
 * y[m, :] = W x[m, :] for a whole linear (every row part).
 *
 * Exact path (split 0) of an affine linear. Every kernel gives a row the same arithmetic whatever M
 * is and wherever the row sits; `kernel` is chosen by phase, by the adapter's class
 * (src/gpu/kernel-class.ts) and by properties of the linear, never by M:
 * - 'coop' (matmul_coop.wgsl; decode steps and verify blocks on GPUs): a workgroup covers a few output
 *   features, T invocations per feature split its groups and add their partials in a fixed order; each
 *   weight is read once for all rows of a verify block. Bandwidth-bound on GPUs.
 * - 'lanes' (matmul_lanes_*.wgsl; decode steps and verify blocks on software adapters): four features
 *   per invocation, weights as vec4<u32>, x shared through subgroups where the device has them. On
 *   lavapipe about 3x faster than `affine` at M = 1 (bench --compare).
 * - 'tile' (matmul_lanes_*.wgsl `tile`; prefill): four features for a block of 8 rows, each chunk of
 *   weights loaded and unpacked once for the 8 rows. Prefill need not equal decode bit for bit:
 *   both arms of every comparison prefill alike.
 * - 'affine': one invocation per output; the fallback for linears the others cannot run.
 * The parity lab's split > 0 runs split-K (matmulSplitK): this same exact path once per K range; its
 * Rows.mlx runs MLX's own kernel for M rows instead (src/model/mlx-matmul.ts), a function of M by design.
 * `npm run bench` measures them on the current adapter (--compare).
 */
export function matmul(
  rec: Recorder,
  lin: GpuLinear,
  x: GPUBuffer,
  y: GPUBuffer,
  r: Rows,
  xStride = lin.desc.inFeatures,
  yStride = lin.desc.outFeatures,
  kernel?: AffineKernel,
  sums?: GroupSums,
): void {
  const { desc } = lin;
  const split = r.split ?? 0;
  if (r.mlx && desc.kind === 'affine') {
    mlxMatmul(rec, lin, x, y, r, r.mlx, xStride, yStride);
    return;
  }
  if (split > 0) {
    matmulSplitK(rec, lin, x, y, r, split, xStride, yStride, kernel);
    return;
  }
  const k = sumsKernel(rec, desc, r, xStride, kernel);
  if (desc.kind === 'affine' && k) {
    const xs = sumsFor(rec, lin, x, r, xStride, sums);
    const shader =
      k === 'coop'
        ? 'matmul_coop.wgsl'
        : rec.kernels.subgroupsOf8
          ? 'matmul_lanes_subgroupx.wgsl'
          : 'matmul_lanes_loadx.wgsl';
    const layout = layoutConstants(lin.layout);
    lin.weight.parts.forEach((part, i) => {
      const params = affineParams(rec, shader, desc, part, r, xStride, yStride);
      const sb = [partBinding(lin.scales!.parts[i]), partBinding(lin.biases!.parts[i])];
      const bindings = [params, undefined, undefined, y, ...sb, xs, x, partBinding(part)];
      if (k === 'coop') {
        coopMain(rec, lin, i, params, x, xs, y);
        return;
      }
      if (k === 'lanes') {
        rec.run(shader, 'main', { BITS: desc.bits, ...layout }, bindings, Math.ceil(part.rows / (4 * WG)));
      } else {
        rec.run(
          shader,
          'tile',
          { BITS: desc.bits, ...layout },
          bindings,
          Math.ceil(r.M / 8) * Math.ceil(part.rows / (4 * WG)),
        );
      }
    });
    return;
  }
  lin.weight.parts.forEach((part, i) => {
    if (desc.kind === 'affine') {
      const params = affineParams(rec, 'matmul.wgsl', desc, part, r, xStride, yStride);
      rec.run(
        'matmul.wgsl',
        'affine',
        { BITS: desc.bits, ...layoutConstants(lin.layout) },
        [params, x, partBinding(part), y, partBinding(lin.scales!.parts[i]), partBinding(lin.biases!.parts[i])],
        groups(r.M * part.rows),
      );
    } else {
      const params = rec.params('matmul_dense.wgsl', {
        M: r.M,
        N: part.rows,
        K: desc.inFeatures,
        n_offset: part.rowStart,
        x_stride: xStride,
        y_stride: yStride,
        round: r.round,
      });
      rec.run(
        'matmul_dense.wgsl',
        'main',
        { DTYPE: DENSE_DTYPE[desc.weight.dtype] },
        [params, x, partBinding(part), y],
        groups(r.M * part.rows),
      );
    }
  });
}

/**
 * The K ranges of a split-K matmul over `units` units (quantization groups, or single weights for a
 * dense linear): `split` contiguous ranges of ceil(units / split) units, the last one shorter and
 * none empty (so fewer than `split` when there are fewer units), as [first unit, end unit) pairs.
 */
export function splitRanges(units: number, split: number): [number, number][] {
  const per = Math.ceil(units / split);
  const ranges: [number, number][] = [];
  for (let lo = 0; lo < units; lo += per) ranges.push([lo, Math.min(units, lo + per)]);
  return ranges;
}

/**
 * Split-K, the inexact matmul of the policies matmul-m-split and prefill-chunk-mismatch (MLX picks a
 * split-K kernel by the row count, so a verify block's rows and a chain step's row are reduced
 * differently). The reduction over K is cut into `split` ranges (whole quantization groups; single
 * weights for a dense linear); each range is reduced by the exact kernel this matmul runs with split 0
 * (same pipeline, chosen the same way by phase, adapter class and linear) on a copy of x whose other
 * columns are zero, and the partials are added in range order in plain f32 (shaders/matmul_split.wgsl
 * says why zeroed columns leave the exact arithmetic unchanged). The only difference from `exact` is
 * therefore the named mechanism, and split 1 gives the exact bytes (test/gpu/policy-twins.test.ts). It
 * costs `split` full matmuls: acceptable for a diagnostic policy.
 */
function matmulSplitK(
  rec: Recorder,
  lin: GpuLinear,
  x: GPUBuffer,
  y: GPUBuffer,
  r: Rows,
  split: number,
  xStride: number,
  yStride: number,
  kernel?: AffineKernel,
): void {
  const { desc } = lin;
  if (!(Number.isInteger(split) && split >= 1)) throw new Error(`matmul split ${split} is not a positive integer`);
  const K = desc.inFeatures;
  const N = desc.outFeatures;
  const unit = desc.kind === 'affine' ? desc.groupSize : 1;
  const ranges = splitRanges(K / unit, split);
  const xr = rec.kernels.scratch('splitk.x', r.M * xStride * 4);
  const part = rec.kernels.scratch('splitk.part', r.M * N * 4);
  const exact: Rows = { ...r, round: false, split: 0 };
  ranges.forEach(([lo, hi], i) => {
    const maskParams = rec.params('matmul_split.wgsl', {
      M: r.M,
      K,
      x_stride: xStride,
      lo: lo * unit,
      hi: hi * unit,
      N: 0,
      y_stride: 0,
      flags: 0,
    });
    rec.run('matmul_split.wgsl', 'mask_x', {}, [maskParams, x, xr], groups(r.M * K));
    matmul(rec, lin, xr, part, exact, xStride, N, kernel);
    const flags = (i === 0 ? 1 : 0) | (i === ranges.length - 1 ? 2 : 0) | (r.round ? 4 : 0);
    const addParams = rec.params('matmul_split.wgsl', {
      M: r.M,
      K: 0,
      x_stride: 0,
      lo: 0,
      hi: 0,
      N,
      y_stride: yStride,
      flags,
    });
    rec.run('matmul_split.wgsl', 'add_part', {}, [addParams, undefined, undefined, part, y], groups(r.M * N));
  });
}

/** Group sums of x (what the exact affine kernels call sx) for linears of one group size over the same x. */
export interface GroupSums {
  buffer: GPUBuffer;
  x: GPUBuffer;
  M: number;
  K: number;
  xStride: number;
  groupSize: number;
}

/**
 * xs[m, g] = the compensated sum of x[m, :] over quantization group g (matmul.wgsl affine_xsum), in a
 * scratch buffer the device keeps under `slot` (a fresh buffer per call would make every bind group
 * new). Linears that read the same x with the same group size (q, k, v; gate, up) share one result:
 * pass it to matmul as `sums`, in the same recording, before anything rewrites x or the slot.
 */
export function groupSums(
  rec: Recorder,
  lin: GpuLinear,
  x: GPUBuffer,
  r: Rows,
  xStride = lin.desc.inFeatures,
  slot = 'shared',
): GroupSums {
  const d = lin.desc;
  if (d.kind !== 'affine') throw new Error(`groupSums: ${d.name} is not an affine linear`);
  const groupCount = d.inFeatures / d.groupSize;
  const buffer = rec.kernels.scratch(`xsums.${slot}`, r.M * groupCount * 4);
  const params = rec.params('matmul.wgsl', {
    M: r.M,
    N: 0,
    K: d.inFeatures,
    group_size: d.groupSize,
    n_offset: 0,
    x_stride: xStride,
    y_stride: 0,
    round: false,
  });
  rec.run('matmul.wgsl', 'affine_xsum', { BITS: d.bits }, [params, x, undefined, buffer], groups(r.M * groupCount));
  return { buffer, x, M: r.M, K: d.inFeatures, xStride, groupSize: d.groupSize };
}

/** The group sums `lin` reads from x: `sums` when they were computed for this x, M, stride and grouping, else fresh ones. */
export function sumsFor(
  rec: Recorder,
  lin: GpuLinear,
  x: GPUBuffer,
  r: Rows,
  xStride: number,
  sums?: GroupSums,
): GPUBuffer {
  const d = lin.desc;
  const fits =
    sums &&
    d.kind === 'affine' &&
    sums.x === x &&
    sums.M === r.M &&
    sums.xStride === xStride &&
    sums.groupSize === d.groupSize &&
    sums.K === d.inFeatures;
  return fits ? sums.buffer : groupSums(rec, lin, x, r, xStride, 'matmul').buffer;
}
