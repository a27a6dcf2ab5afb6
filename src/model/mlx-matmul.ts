/**
 * The MLX-predicting matmul (the mlx-* policies of src/model/mlx-policies.ts): for a decode step or
 * verify block of M rows, run the kernel MLX would run for this linear and this M on the policy's Apple
 * GPU (src/model/mlx-dispatch.ts), with that kernel's reduction order and the policy's reading of MLX's
 * a * b + c contraction (shaders/matmul_mlx.wgsl). Both
 * arms of a comparison use it, so a row differs between them exactly where MLX switches kernels with M.
 * ops.matmul calls it for affine linears when Rows.mlx is set; dense linears keep the exact kernels.
 */
import type { Recorder } from '../gpu/recorder.ts';
import type { AffineLinear } from '../format/model-description.ts';
import type { GpuLinear } from './gpu-linear.ts';
import { partBinding } from '../gpu/upload.ts';
import { layoutConstants } from '../gpu/weight-layout.ts';
import { mlxKernel, type MlxKernelChoice, type MlxMachine } from './mlx-dispatch.ts';
import { affineParams } from './affine-params.ts';

const WG = 64;
const SHADER = 'matmul_mlx.wgsl';

/** Bits whose packs matmul_mlx.wgsl reads (MLX's power-of-two packs; 3/5/6-bit straddle bytes). */
const MODELLED_BITS = new Set([2, 4, 8]);

/**
 * The kernel MLX runs for `lin` at M rows, or an error that says why the prediction cannot be made:
 * qmm (M at or above MLX's batch limit: a simdgroup-matrix GEMM whose accumulation order inside the
 * hardware MMA is not documented) and codes of 3, 5 or 6 bits are not modelled.
 */
export function mlxChoiceFor(machine: MlxMachine, d: AffineLinear, M: number): MlxKernelChoice {
  const choice = mlxKernel(machine, { N: d.outFeatures, K: d.inFeatures, bits: d.bits, groupSize: d.groupSize }, M);
  const where = `${d.name} (${d.bits}-bit, ${d.inFeatures} -> ${d.outFeatures}) on ${machine.gpu.label}`;
  if (choice.kernel === 'qmm')
    throw new Error(
      `${where}: MLX runs qmm for M = ${M} (at or above its batch limit), whose simdgroup-matrix reduction order is not modelled; use a smaller block`,
    );
  if (!MODELLED_BITS.has(d.bits))
    throw new Error(`${where}: the MLX kernel orders are modelled for 2-, 4- and 8-bit codes`);
  return choice;
}

/** y[m, :] = W x[m, :] with MLX's kernel for M rows (every row part of the linear). */
export function mlxMatmul(
  rec: Recorder,
  lin: GpuLinear,
  x: GPUBuffer,
  y: GPUBuffer,
  r: { M: number; round: boolean },
  machine: MlxMachine,
  xStride: number,
  yStride: number,
): void {
  const d = lin.desc as AffineLinear;
  const choice = mlxChoiceFor(machine, d, r.M);
  const wide = choice.kernel === 'qmv_wide';
  const constants: Record<string, number> = {
    ...(wide ? { BITS: d.bits } : { BITS: d.bits, LANES: choice.lanes, VPT: choice.valuesPerThread }),
    FMA: machine.fma ? 1 : 0,
    ...layoutConstants(lin.layout),
  };
  lin.weight.parts.forEach((part, i) => {
    const params = affineParams(rec, SHADER, d, part, r, xStride, yStride);
    const bindings = [
      params,
      x,
      partBinding(part),
      y,
      partBinding(lin.scales!.parts[i]),
      partBinding(lin.biases!.parts[i]),
    ];
    rec.run(SHADER, wide ? 'qmv_wide' : 'qmv', constants, bindings, Math.ceil((r.M * part.rows) / WG));
  });
}
