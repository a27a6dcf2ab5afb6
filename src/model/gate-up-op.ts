/** The MLP's first half, g = GeGLU(gate x, up x): one fused coop dispatch where it fits, else two matmuls and a GeGLU. */
import type { Recorder } from '../gpu/recorder.ts';
import { partBinding } from '../gpu/upload.ts';
import type { GpuLinear } from './gpu-linear.ts';
import { affineParams } from './affine-params.ts';
import type { AffineLinearDesc, Rows } from './op-rows.ts';
import { coopShape } from './coop-shape.ts';
import { readsGroupSums, stepKernel } from './affine-kernel.ts';
import { coopDispatch, matmul, sumsFor, type GroupSums } from './matmul-op.ts';
import { geglu } from './elementwise-op.ts';

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
  const { WG, T, R } = coopShape(rec.kernels.device.limits, g, 'gate_up', rec.kernels.coop);
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
