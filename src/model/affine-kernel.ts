/** Which exact affine matmul kernel (lanes, tile, affine or coop) runs a linear, by phase, adapter class and shape. */
import type { Recorder } from '../gpu/recorder.ts';
import type { KernelClass } from '../gpu/kernel-class.ts';
import type { GpuLinear } from './gpu-linear.ts';
import type { Rows } from './op-rows.ts';

/** The exact affine kernels ops.matmul can run (benchmarks compare them; the engine picks per phase and adapter class). */
export type AffineKernel = 'lanes' | 'tile' | 'affine' | 'coop';

/** What decides which affine kernel can run a linear (a GpuLinear's desc is one). */
export type LinearShape = { kind: 'dense' } | { kind: 'affine'; bits: number; groupSize: number; inFeatures: number };

/** Whether matmul_lanes.wgsl can run this linear: 4/8-bit, whole 32-weight chunks, vec4 rows of x. */
function lanesFit(d: LinearShape, xStride: number): boolean {
  return (
    d.kind === 'affine' &&
    (d.bits === 4 || d.bits === 8) &&
    d.groupSize % 32 === 0 &&
    d.inFeatures % 32 === 0 &&
    xStride % 4 === 0
  );
}

/** Whether matmul_coop.wgsl can run it: as lanes, with groups of 32 or 64 weights (held in registers). */
function coopFit(d: LinearShape, xStride: number): boolean {
  return d.kind === 'affine' && lanesFit(d, xStride) && (d.groupSize === 32 || d.groupSize === 64);
}

/**
 * The affine kernel ops.matmul runs for a linear (never a function of M): `wanted` where given (tests,
 * bench --compare), else the phase's kernel for the kernel class ('tile' for prefill; 'coop' on GPUs,
 * 'lanes' on software adapters for decode steps and verify blocks); 'affine' where the linear does not
 * fit that kernel (2/3/5/6-bit, odd strides, groups coop cannot hold) or is dense.
 */
export function affineKernel(
  kernelClass: KernelClass,
  d: LinearShape,
  xStride: number,
  prefill: boolean,
  wanted?: AffineKernel,
): AffineKernel {
  const k: AffineKernel =
    wanted ?? (prefill ? 'tile' : kernelClass === 'gpu' && coopFit(d, xStride) ? 'coop' : 'lanes');
  if (k === 'affine') return k;
  return (k === 'coop' ? coopFit(d, xStride) : lanesFit(d, xStride)) ? k : 'affine';
}

/** The exact kernel a decode step or verify block runs for this linear on this device (never a function of M). */
export function stepKernel(rec: Recorder, lin: GpuLinear, xStride = lin.desc.inFeatures): AffineKernel {
  return affineKernel(rec.kernels.kernelClass, lin.desc, xStride, false);
}

/**
 * The exact affine kernel (lanes, tile or coop) matmul runs for a linear over rows `r`, which reads the group
 * sums of x; undefined where matmul takes another path (MLX's kernel, split-K, 'affine', dense).
 */
export function sumsKernel(
  rec: Recorder,
  d: LinearShape,
  r: Rows,
  xStride: number,
  kernel?: AffineKernel,
): AffineKernel | undefined {
  if (d.kind !== 'affine' || r.mlx || (r.split ?? 0) > 0) return undefined;
  const k = affineKernel(rec.kernels.kernelClass, d, xStride, r.prefill ?? false, kernel);
  return k === 'affine' ? undefined : k;
}

/** Whether matmul(rec, lin, x, y, r) reads group sums of x (and so takes them as `sums`). */
export function readsGroupSums(rec: Recorder, lin: GpuLinear, r: Rows, xStride = lin.desc.inFeatures): boolean {
  return sumsKernel(rec, lin.desc, r, xStride) !== undefined;
}

/**
 * The exact affine kernels the engine runs on a device of this kernel class, for its usual linears
 * (4- or 8-bit, group size 32 or 64, inputs a multiple of 32: every Gemma 4 MLX checkpoint's): `step`
 * for decode steps and verify blocks, `prefill` for prefill forwards. Linears outside that (2-bit, say)
 * fall back to 'affine' (affineKernel says which, per linear). The bench reports these.
 */
export function engineKernels(kernelClass: KernelClass): { step: AffineKernel; prefill: AffineKernel } {
  const usual: LinearShape = { kind: 'affine', bits: 4, groupSize: 64, inFeatures: 3840 };
  return { step: affineKernel(kernelClass, usual, 3840, false), prefill: affineKernel(kernelClass, usual, 3840, true) };
}
