import type { Recorder } from '../gpu/recorder.ts';
import type { Binding } from '../gpu/kernels.ts';
import type { GpuLinear, GpuStackedQkv } from './gpu-weights.ts';
import { partBinding } from '../gpu/upload.ts';
import { layoutConstants, type AffineLayout } from '../gpu/weight-layout.ts';
import type { KernelClass } from '../gpu/kernel-class.ts';
import type { MlxMachine } from './mlx-dispatch.ts';
import { mlxMatmul } from './mlx-matmul.ts';
import { affineParams } from './affine-params.ts';

/**
 * Typed wrappers around the WGSL kernels: one function per op, taking buffers and sizes. The same
 * function (hence the same compiled pipeline) serves every M, which is what makes rows exact.
 */
const WG = 64;
const groups = (n: number) => Math.ceil(n / WG);
const DENSE_DTYPE: Record<string, number> = { BF16: 0, F16: 1, F32: 2 };

export interface Rows {
  /** Number of rows. */
  M: number;
  /** Round every output to bf16 (bf16 activation mode). */
  round: boolean;
  /** 0: the exact kernel. n > 0: the inexact split-K variant with n ranges (parity-lab policies). */
  split?: number;
  /** A prefill forward: matmuls may use the prefill kernel (both arms of a comparison prefill alike). */
  prefill?: boolean;
  /** Set: affine matmuls run the kernel MLX runs for M rows on this Apple GPU (src/model/mlx-matmul.ts). */
  mlx?: MlxMachine;
}

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

/** Tuning only (`bench --coop-threads N --coop-features R`): every coop linear uses these instead of the rules. */
let coopThreadsOverride: number | undefined;
let coopFeaturesOverride: number | undefined;

export function setCoopThreads(n: number | undefined): void {
  // matmul_coop.wgsl stages a whole round of T groups of 4 rows' x in 16 KiB: T * 64 <= 1024.
  if (n !== undefined && n !== 8 && n !== 16) throw new Error(`coop threads per feature must be 8 or 16, not ${n}`);
  coopThreadsOverride = n;
}

export function setCoopFeatures(r: number | undefined): void {
  if (r !== undefined && r !== 1 && r !== 2 && r !== 4)
    throw new Error(`coop features per invocation must be 1, 2 or 4, not ${r}`);
  coopFeaturesOverride = r;
}

/** Tests only: every coop linear runs in workgroups of this size (256 or 512) where the device allows it. */
let coopWorkgroupOverride: number | undefined;
export function setCoopWorkgroup(wg: number | undefined): void {
  if (wg !== undefined && wg !== 256 && wg !== 512) throw new Error(`coop workgroups must be 256 or 512, not ${wg}`);
  coopWorkgroupOverride = wg;
}

/** The device limits coopWorkgroup reads. */
type CoopLimits = Pick<
  GPUSupportedLimits,
  'maxComputeInvocationsPerWorkgroup' | 'maxComputeWorkgroupSizeX' | 'maxComputeWorkgroupStorageSize'
>;
/** What the coop rules read of a linear. */
export interface CoopLinear {
  outFeatures: number;
  inFeatures: number;
  bits: number;
}

/**
 * matmul_coop.wgsl's workgroup (WG invocations, T of them per output feature), a function of the linear's
 * shape and the device's limits, never of M: 512 for the MLP's 4-bit linears (gate/up: 12288 to 65535
 * outputs, `main` and the fused `gate_up` alike; down: 12288 inputs or more) where the device allows 512
 * invocations and the 32 KiB of workgroup memory they take (4 * WG vec4s of partials), 256 otherwise. Which
 * workgroup computes a feature changes none of its arithmetic (T and R do not change). Measured on an H200
 * (12B, cold weights, `scripts/coop-microbench.ts`; docs/PERFORMANCE.md, matvec; the NVIDIA driver gives this
 * kernel 128 registers at both sizes, so 16 warps share an SM either way): 512 makes the 4-bit gate/up
 * projection and the fused gate_up 1-8% faster at M = 1, 4 and 8, and the down projection's blocks 8% (the same
 * bytes). Kept at 256: the LM head and the 8-bit gate/up, where 512 made single rows 7-9% slower. 1024
 * invocations (64 registers, spilling) were slower everywhere.
 */
export function coopWorkgroup(limits: CoopLimits, d: CoopLinear): number {
  const fits =
    limits.maxComputeInvocationsPerWorkgroup >= 512 &&
    limits.maxComputeWorkgroupSizeX >= 512 &&
    limits.maxComputeWorkgroupStorageSize >= 512 * 64;
  if (coopWorkgroupOverride) return fits ? coopWorkgroupOverride : 256;
  const gateUp = d.outFeatures >= 12288 && d.outFeatures < 65536;
  const down = d.inFeatures >= 12288 && d.outFeatures < 12288;
  return fits && d.bits === 4 && (gateUp || down) ? 512 : 256;
}
/**
 * Invocations per output feature of matmul_coop.wgsl, a function of the linear's shape and entry only, never
 * of M (so every row count runs the same pipeline): 16, and 8 for the fused `gate_up` of wide MLPs (12288
 * outputs or more). Chosen on the H200 (microbenchmarks of the 4-bit LM head and MLP shapes at M = 1, 4, 8;
 * T = 8, 16, 32, 64; docs/PERFORMANCE.md, matvec): 16 was the fastest or within 5% at M = 1 for both the
 * 3840- and the 15360-wide inputs (8 made the 4-bit gate/up projection 16% slower, down 53%); for the fused
 * gate_up of the 12B's MLP 8 measured the same at M = 1 and 6-7% faster for blocks of 4 and 8, and it gives a
 * workgroup 64 consecutive features, a whole quantization group of the down projection, whose x sums
 * `gate_up_sums` then computes (gateUp). At least 8 (the kernel's final totals need SLOTS * ROWS = 8 of them).
 */
export function coopThreads(outFeatures = 0, entry: 'main' | 'gate_up' = 'main'): number {
  if (coopThreadsOverride) return coopThreadsOverride;
  return entry === 'gate_up' && outFeatures >= 12288 ? 8 : 16;
}

/**
 * Output features per invocation of `main` in matmul_coop.wgsl, a function of the linear's shape only
 * (which invocation computes a feature changes none of its arithmetic): 4 (every x load serves four
 * features: delivering x bounds the kernel on an H200) for linears of at least 12288 outputs (the MLP's
 * gate/up, the LM head), 2 from 6144 (a layer's stacked q, k and v), 1 for narrower ones, where fewer
 * workgroups would leave a GPU's cores idle. Measured on an H200 (12B shapes, cold weights; docs/PERFORMANCE.md,
 * matvec): at M = 1, R = 4 against 2 makes the LM head 16% faster, the 8-bit gate/up projection 19%, the
 * 4-bit one 5% (at M = 4 and 8 within 2%); the stacked q, k, v of a sliding layer (8192 x 3840) is fastest
 * with R = 2 at M = 1 and 4, and the down projection (3840 x 15360) with R = 1, also against workgroups of
 * 128. The fused `gate_up` entry serves two features of each matrix (four slots too) and takes at most 2.
 */
export function coopFeatures(outFeatures: number, entry: 'main' | 'gate_up' = 'main'): number {
  const r = coopFeaturesOverride ?? (outFeatures >= 12288 ? 4 : outFeatures >= 6144 ? 2 : 1);
  return entry === 'gate_up' ? Math.min(r, 2) : r;
}

/**
 * matmul_coop.wgsl's workgroup size, invocations per output feature and output features per invocation for a
 * linear on this device (coopWorkgroup, coopThreads, coopFeatures): what coopDispatch runs, what gate_up_sums'
 * workgroups span (downSumsFused) and what scripts/coop-microbench.ts times by default.
 */
export function coopShape(
  limits: CoopLimits,
  d: CoopLinear,
  entry: 'main' | 'gate_up',
): { WG: number; T: number; R: number } {
  return {
    WG: coopWorkgroup(limits, d),
    T: coopThreads(d.outFeatures, entry),
    R: coopFeatures(d.outFeatures, entry),
  };
}

/**
 * matmul_coop.wgsl `main` over row part i of an affine linear (ops.matmul's coop path, and a stacked q/k/v in
 * `segments` segments: stackedQkvMatmul), with its parameters and x group sums made by the caller.
 */
function coopMain(
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
function coopDispatch(
  rec: Recorder,
  d: AffineLinearDesc,
  rows: number,
  entry: 'main' | 'gate_up',
  layout: AffineLayout | undefined,
): { constants: Record<string, number>; workgroups: number } {
  const { WG, T, R } = coopShape(rec.kernels.device.limits, d, entry);
  return {
    constants: { BITS: d.bits, WG, T, R, GS: d.groupSize, ...layoutConstants(layout) },
    workgroups: Math.ceil(rows / (R * (WG / T))),
  };
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
function sumsKernel(
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
function sumsFor(rec: Recorder, lin: GpuLinear, x: GPUBuffer, r: Rows, xStride: number, sums?: GroupSums): GPUBuffer {
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

/**
 * g = GeGLU(gate x, up x) = gelu_tanh(gate x) * (up x), the MLP's first half. On GPUs, for linears the
 * coop kernel runs, one matmul_coop.wgsl `gate_up` dispatch computes both projections and the GeGLU,
 * with the arithmetic of two coop matmuls and elementwise.wgsl geglu; elsewhere (software adapters,
 * prefill, the split-K and MLX policies) exactly those three dispatches. `u` is the up projection's workspace.
 * `down`: the linear that reads g next; where its kernel reads x group sums and `gate_up_sums` can compute them
 * (downSumsFused), the same dispatch writes them, and they are returned for matmul(down, g, ...).
 */
export function gateUp(
  rec: Recorder,
  gate: GpuLinear,
  up: GpuLinear,
  x: GPUBuffer,
  g: GPUBuffer,
  u: GPUBuffer,
  r: Rows,
  sums?: GroupSums,
  down?: GpuLinear,
): GroupSums | undefined {
  if (!gateUpFused(rec, gate, up, r)) {
    matmul(rec, gate, x, g, r, undefined, undefined, undefined, sums);
    matmul(rec, up, x, u, r, undefined, undefined, undefined, sums);
    geglu(rec, g, u, r.M * gate.desc.outFeatures, r.round);
    return undefined;
  }
  const d = gate.desc as AffineLinearDesc;
  const K = d.inFeatures;
  const xs = sumsFor(rec, gate, x, r, K, sums);
  const out = down && downSumsFused(rec, gate, down, r) ? downSums(rec, down, g, r) : undefined;
  gate.weight.parts.forEach((part, i) => {
    const params = affineParams(rec, 'matmul_coop.wgsl', d, part, r, K, d.outFeatures);
    const bindings = [
      params,
      undefined,
      undefined,
      g,
      partBinding(gate.scales!.parts[i]),
      partBinding(gate.biases!.parts[i]),
      xs,
      x,
      partBinding(part),
      partBinding(up.weight.parts[i]),
      partBinding(up.scales!.parts[i]),
      partBinding(up.biases!.parts[i]),
      ...(out ? [out.buffer] : []),
    ];
    const { constants, workgroups } = coopDispatch(rec, d, part.rows, 'gate_up', gate.layout);
    if (out)
      rec.run('matmul_coop.wgsl', 'gate_up_sums', { ...constants, SUMS_GROUP: out.groupSize }, bindings, workgroups);
    else rec.run('matmul_coop.wgsl', 'gate_up', constants, bindings, workgroups);
  });
  return out;
}

/** Whether gateUp runs as matmul_coop.wgsl `gate_up` (else as two matmuls and a GeGLU). */
function gateUpFused(rec: Recorder, gate: GpuLinear, up: GpuLinear, r: Rows): boolean {
  return (
    !r.prefill &&
    (r.split ?? 0) === 0 &&
    !r.mlx &&
    stepKernel(rec, gate) === 'coop' &&
    stepKernel(rec, up) === 'coop' &&
    sameShape(gate, up) &&
    gate.layout === up.layout
  );
}

/** Storage bindings of matmul_coop.wgsl `gate_up_sums` (gate_up's nine and the sums). */
const GATE_UP_SUMS_STORAGE = 10;

/**
 * Whether the fused gate_up (gateUpFused) also writes the x group sums `down` reads of its output: down reads
 * sums (readsGroupSums), the stage takes the tenth storage binding, and every workgroup's features (R * WG / T
 * consecutive ones, from each row part's start) are whole quantization groups of down.
 */
export function downSumsFused(rec: Recorder, gate: GpuLinear, down: GpuLinear, r: Rows): boolean {
  const g = gate.desc;
  const d = down.desc;
  if (g.kind !== 'affine' || d.kind !== 'affine' || d.inFeatures !== g.outFeatures) return false;
  if (rec.kernels.device.limits.maxStorageBuffersPerShaderStage < GATE_UP_SUMS_STORAGE) return false;
  if (!readsGroupSums(rec, down, r)) return false;
  const { WG, T, R } = coopShape(rec.kernels.device.limits, g, 'gate_up');
  const span = R * (WG / T); // the features of one gate_up_sums workgroup
  return (
    span % d.groupSize === 0 &&
    gate.weight.parts.every((p) => p.rowStart % d.groupSize === 0 && p.rows % d.groupSize === 0)
  );
}

/** The scratch buffer of down's x group sums over the MLP hidden g (what gate_up_sums writes). */
function downSums(rec: Recorder, down: GpuLinear, g: GPUBuffer, r: Rows): GroupSums {
  const d = down.desc as AffineLinearDesc;
  const buffer = rec.kernels.scratch('xsums.down', r.M * (d.inFeatures / d.groupSize) * 4);
  return { buffer, x: g, M: r.M, K: d.inFeatures, xStride: d.inFeatures, groupSize: d.groupSize };
}

type AffineLinearDesc = Extract<GpuLinear['desc'], { kind: 'affine' }>;

/** Same quantization and the same row parts (so part i of one pairs with part i of the other). */
function sameShape(a: GpuLinear, b: GpuLinear): boolean {
  const [x, y] = [a.desc, b.desc];
  if (x.kind !== 'affine' || y.kind !== 'affine') return false;
  if (
    x.outFeatures !== y.outFeatures ||
    x.inFeatures !== y.inFeatures ||
    x.bits !== y.bits ||
    x.groupSize !== y.groupSize
  )
    return false;
  const pa = a.weight.parts,
    pb = b.weight.parts;
  return pa.length === pb.length && pa.every((p, i) => p.rowStart === pb[i].rowStart && p.rows === pb[i].rows);
}

/** h[m, :] = table[ids[m], :] * scale (a tied embedding, quantized or dense). */
export function embed(rec: Recorder, table: GpuLinear, ids: GPUBuffer, h: GPUBuffer, scale: number, r: Rows): void {
  const { desc } = table;
  const H = desc.inFeatures;
  table.weight.parts.forEach((part, i) => {
    if (desc.kind === 'affine') {
      const params = rec.params('embed.wgsl', {
        M: r.M,
        H,
        row_start: part.rowStart,
        rows: part.rows,
        group_size: desc.groupSize,
        scale,
        round: r.round,
      });
      rec.run(
        'embed.wgsl',
        'affine',
        { BITS: desc.bits, ...layoutConstants(table.layout) },
        [params, ids, partBinding(part), h, partBinding(table.scales!.parts[i]), partBinding(table.biases!.parts[i])],
        groups(r.M * H),
      );
    } else {
      const params = rec.params('embed.wgsl', {
        M: r.M,
        H,
        row_start: part.rowStart,
        rows: part.rows,
        group_size: 0,
        scale,
        round: r.round,
      });
      rec.run(
        'embed.wgsl',
        'dense',
        { DTYPE: DENSE_DTYPE[desc.weight.dtype] },
        [params, ids, partBinding(part), h],
        groups(r.M * H),
      );
    }
  });
}

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

/** a = gelu_tanh(a) * b over n elements. */
export function geglu(rec: Recorder, a: GPUBuffer, b: GPUBuffer, n: number, round: boolean): void {
  rec.run('elementwise.wgsl', 'geglu', {}, [rec.params('elementwise.wgsl', { n, round, cap: 0 }), a, b], groups(n));
}

/** a = cap * tanh(a / cap) over n elements. */
export function softcap(rec: Recorder, a: GPUBuffer, n: number, cap: number, round: boolean): void {
  rec.run('elementwise.wgsl', 'softcap', {}, [rec.params('elementwise.wgsl', { n, round, cap }), a], groups(n));
}

/** Indices per workgroup of argmax.wgsl `parts` (at least; more when a row has over ARGMAX_WG of them). */
const ARGMAX_SPAN = 4096;
/** argmax.wgsl's workgroup size, which bounds the ranges `merge` takes per row. */
const ARGMAX_WG = 256;

/**
 * ids[m] = the first index of the maximum of logits row m, or NAN_ROW_ID (nan-row.ts) if the row holds a NaN. Rows longer than
 * ARGMAX_SPAN (vocabularies) are cut into ranges, one workgroup each, whose bests one more dispatch
 * merges; shorter rows take one workgroup. Both are exact (argmax.wgsl).
 */
export function argmax(rec: Recorder, logits: GPUBuffer, ids: GPUBuffer, M: number, V: number): void {
  const span = Math.max(ARGMAX_SPAN, Math.ceil(V / ARGMAX_WG));
  if (V <= span) {
    rec.run('argmax.wgsl', 'main', {}, [rec.params('argmax.wgsl', { M, V, span, parts: 1 }), logits, ids], M);
    return;
  }
  const parts = Math.ceil(V / span);
  const cand = rec.kernels.scratch('argmax.cand', M * parts * 8);
  const params = rec.params('argmax.wgsl', { M, V, span, parts });
  rec.run('argmax.wgsl', 'parts', {}, [params, logits, undefined, cand], parts * M);
  rec.run('argmax.wgsl', 'merge', {}, [params, undefined, ids, cand], M);
}

export { ATTENTION_MODE, attention, maskedKeyCount, type AttentionArgs, type AttentionMode } from './attention-op.ts';

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
