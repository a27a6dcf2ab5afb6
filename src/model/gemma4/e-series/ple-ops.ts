/**
 * Per-layer embeddings (Gemma 4 E2B / E4B, docs/GEMMA4-FAMILY.md section 4) as recorded GPU ops. The dense
 * kernels do most of it (embed.wgsl for the table, the affine matmuls for the projections, rmsnorm.wgsl for the
 * norms and the residual adds); shaders/ple.wgsl holds the two element-wise ops they lack. CPU twin:
 * src/reference/gemma4/e-series/ple.ts.
 */
import type { Recorder } from '../../../gpu/recorder.ts';
import type { FamilyConstants } from '../../../numerics/family-constants.ts';
import type { GpuLayerPerLayerInput, GpuPerLayerEmbedding } from '../../gpu-weights.ts';
import * as op from '../../ops.ts';

const WG = 64;
const groups = (n: number) => Math.ceil(n / WG);

/** a = a * scale over n elements (ple.wgsl `scale`). */
export function scaleInPlace(rec: Recorder, a: GPUBuffer, n: number, scale: number, round: boolean): void {
  const params = rec.params('ple.wgsl', { n, width: 1, b_stride: 0, b_off: 0, scale, round });
  // binding 2 is read by `gate` only; `scale`'s layout does not list it
  rec.run('ple.wgsl', 'scale', {}, [params, a], groups(n));
}

/**
 * a[m, :] = gelu_tanh(a[m, :]) * inputs[m, off .. off + P) for M rows of width P (ple.wgsl `gate`): layer l's gate
 * times its slice of the combined per-layer inputs [M, L * P].
 */
export function gateInPlace(
  rec: Recorder,
  a: GPUBuffer,
  inputs: GPUBuffer,
  M: number,
  P: number,
  inputStride: number,
  off: number,
  round: boolean,
): void {
  const n = M * P;
  const params = rec.params('ple.wgsl', { n, width: P, b_stride: inputStride, b_off: off, scale: 1, round });
  rec.run('ple.wgsl', 'gate', {}, [params, a, inputs], groups(n));
}

export interface PleWorkspace {
  /** [rows, L * P]: the combined per-layer inputs of every layer (written by perLayerInputs). */
  inputs: GPUBuffer;
  /** [rows, L * P]: the projection of the scaled embedding (scratch). */
  proj: GPUBuffer;
  dummy: GPUBuffer;
}

/**
 * The combined per-layer inputs of M tokens (transformers' project_per_layer_inputs, mlx-lm
 * _project_per_layer_inputs), in the reference's order of operations:
 *   inputs = T[id] * sqrt(P)                                     (embed.wgsl, the table split by row ranges)
 *   proj   = (W_proj h0) * H^-0.5                                (h0: the scaled token embedding)
 *   inputs = (inputs + rmsnorm_P(proj) * w_norm) * 2^-0.5        (rmsnorm.wgsl residual mode, M * L rows of P)
 * (the residual mode adds the normed value to what `out` holds, then scales: the sum of the reference's
 * proj + table, whose order does not change an IEEE sum).
 */
export function perLayerInputs(
  rec: Recorder,
  w: GpuPerLayerEmbedding,
  ids: GPUBuffer,
  h0: GPUBuffer,
  ws: PleWorkspace,
  c: Pick<FamilyConstants, 'pleTableScale' | 'pleProjectionScale' | 'pleInputScale'>,
  layers: number,
  eps: number,
  rows: op.Rows,
): void {
  const P = w.width;
  const LP = layers * P;
  op.embed(rec, w.table, ids, ws.inputs, c.pleTableScale, rows);
  op.matmul(rec, w.modelProjection, h0, ws.proj, rows);
  scaleInPlace(rec, ws.proj, rows.M * LP, c.pleProjectionScale, rows.round);
  op.rmsnorm(rec, ws.proj, w.projectionNorm, ws.inputs, ws.dummy, {
    rows: rows.M * layers,
    D: P,
    eps,
    round: rows.round,
    residual: { postScale: c.pleInputScale },
  });
}

/**
 * Layer l's per-layer contribution before its post norm, y = W_up(gelu_tanh(W_gate h) * inputs_l), from the
 * residual h [M, H] (after the MLP's residual add) into y [M, H]; `g` is [M, P] scratch. The caller adds
 * post_norm(y) to the residual and applies layer_scalar in one residual-mode norm.
 */
export function contribution(
  rec: Recorder,
  lw: GpuLayerPerLayerInput,
  h: GPUBuffer,
  inputs: GPUBuffer,
  g: GPUBuffer,
  y: GPUBuffer,
  layer: number,
  layers: number,
  rows: op.Rows,
  sums?: op.GroupSums,
): void {
  const P = lw.gate.desc.outFeatures;
  op.matmul(rec, lw.gate, h, g, rows, undefined, undefined, undefined, sums);
  gateInPlace(rec, g, inputs, rows.M, P, layers * P, layer * P, rows.round);
  op.matmul(rec, lw.projection, g, y, rows);
}
