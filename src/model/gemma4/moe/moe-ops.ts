/**
 * The GPU ops of a Gemma 4 MoE layer's routed half (docs/GEMMA4-FAMILY.md section 6): the router's top-k and
 * weights (shaders/moe.wgsl route), each chosen expert's GeGLU MLP per (row, slot) (shaders/moe_experts.wgsl:
 * matmul_lanes.wgsl's exact arithmetic on the expert's rows of the stacked tensors) and the weighted sum
 * (moe.wgsl combine). Every op gives a row the same arithmetic whatever M is: the `exact` contract holds.
 * Policy moe-grouped (`grouped`) changes one thing: in verify blocks the expert matvecs reduce K in as many
 * ranges as the block has rows routed to the slot's expert (moe_experts.wgsl says why).
 */
import type { Recorder } from '../../../gpu/recorder.ts';
import type { GpuLinear } from '../../gpu-linear.ts';
import { partBinding } from '../../../gpu/upload.ts';
import * as op from '../../ops.ts';
import type { GpuExperts, GpuMoeBlock } from './moe-weights.ts';

const WG = 64;
const groups = (n: number) => Math.ceil(n / WG);

/**
 * The router conventions (reference moe.ts RouterOrder; MLX's is the default, as in the CPU reference):
 * 'mlx': top-k of the scores, softmax over the k; 'transformers': softmax over all E, top-k, renormalise.
 */
export type GpuRouterOrder = 'mlx' | 'transformers';
/**
 * How router.scale and H^-0.5 meet (reference RouterOptions.scaleProduct): 'mlx-bf16': rms_norm(h1, bf16(scale *
 * root)), MLX's weight vector formed in bf16; 'transformers': (rms_norm(h1) * scale) * root. Default: the order's.
 */
export type GpuRouterScale = 'mlx-bf16' | 'transformers';

/** Largest E and k the route kernel holds (moe.wgsl MAX_E_WORDS * 32, MAX_K). */
export const MAX_EXPERTS = 256;
export const MAX_TOP_K = 32;

/** Workspace of the routed half for R rows. */
export interface MoeWorkspace {
  /** [R, H]: the router's normed input, then (reused) the experts' input pre_ff_norm_2(h1). */
  rx: GPUBuffer;
  ex: GPUBuffer;
  /** [R, E] router.proj output. */
  scores: GPUBuffer;
  /** [R, k] chosen experts (u32) and weights. */
  ids: GPUBuffer;
  weights: GPUBuffer;
  /** [R, k] rows of the block sharing each slot's expert (moe-grouped). */
  counts: GPUBuffer;
  /** [R k, I] gate (then GeGLU) and up outputs per slot. */
  g: GPUBuffer;
  u: GPUBuffer;
  /** [R k, H] each slot's down projection. */
  ys: GPUBuffer;
  /** [R, H] the weighted sum (act.experts.i). */
  out: GPUBuffer;
}

export interface MoeRun {
  rows: op.Rows;
  eps: number;
  order: GpuRouterOrder;
  scale: GpuRouterScale;
  /** Policy moe-grouped in a verify block. */
  grouped: boolean;
  dummy: GPUBuffer;
}

/**
 * The routed half for M rows of h1 (the residual after attention): router scores, top-k and weights, the experts
 * and their weighted sum into ws.out (before post_feedforward_layernorm_2).
 */
export function moeExperts(rec: Recorder, m: GpuMoeBlock, h1: GPUBuffer, ws: MoeWorkspace, run: MoeRun): void {
  const { rows } = run;
  const M = rows.M;
  const H = m.routerProj.desc.inFeatures;
  const E = m.numExperts;
  const k = m.topK;
  const norm = (x: GPUBuffer, w: GPUBuffer, out: GPUBuffer) =>
    op.rmsnorm(rec, x, w, out, run.dummy, { rows: M, D: H, eps: run.eps, round: rows.round });
  // router input: MLX rms_norm(h1, bf16(scale * root)); transformers (rms_norm(h1) * scale) * root
  if (run.scale === 'mlx-bf16') norm(h1, m.routerNorm, ws.rx);
  else {
    op.rmsnorm(rec, h1, null, ws.rx, run.dummy, { rows: M, D: H, eps: run.eps, round: rows.round });
    const params = moeParams(rec, { M, E, k, H, order: 1, round: rows.round, root: m.rootSize });
    rec.run('moe.wgsl', 'scale_rows', {}, [params, undefined, m.routerScale, ...Array(4), ws.rx], groups(M * H));
  }
  // router.proj: the engine's matmul (policies apply to it as to any linear)
  op.matmul(rec, m.routerProj, ws.rx, ws.scores, rows);
  route(rec, m, ws, M, run.order, rows.round);
  if (run.grouped) {
    const params = moeParams(rec, { M, E, k, H: 0, order: 0, round: false, root: 0 });
    rec.run(
      'moe.wgsl',
      'group_counts',
      {},
      [params, undefined, undefined, ws.ids, undefined, ws.counts],
      groups(M * k),
    );
  }
  norm(h1, m.preFfNorm2, ws.ex);
  const I = m.gate.desc.outFeatures;
  const slots = M * k;
  expertMatvec(rec, m.gate, ws.ex, ws.g, M, k, rows.round, run.grouped, ws);
  expertMatvec(rec, m.up, ws.ex, ws.u, M, k, rows.round, run.grouped, ws);
  op.geglu(rec, ws.g, ws.u, slots * I, rows.round);
  expertMatvec(rec, m.down, ws.g, ws.ys, slots, 1, rows.round, run.grouped, ws);
  const params = moeParams(rec, { M, E, k, H, order: 0, round: rows.round, root: 0 });
  rec.run(
    'moe.wgsl',
    'combine',
    {},
    [params, undefined, undefined, ws.ids, ws.weights, undefined, ws.ys, ws.out],
    groups(M * H),
  );
}

/** ids / weights of M rows from ws.scores (moe.wgsl route: ties to the lower expert id). */
export function route(
  rec: Recorder,
  m: Pick<GpuMoeBlock, 'numExperts' | 'topK' | 'perExpertScale'>,
  ws: Pick<MoeWorkspace, 'scores' | 'ids' | 'weights'>,
  M: number,
  order: GpuRouterOrder,
  round: boolean,
): void {
  const params = moeParams(rec, {
    M,
    E: m.numExperts,
    k: m.topK,
    H: 0,
    order: order === 'transformers' ? 1 : 0,
    round,
    root: 0,
  });
  rec.run('moe.wgsl', 'route', {}, [params, ws.scores, m.perExpertScale, ws.ids, ws.weights], groups(M));
}

function moeParams(
  rec: Recorder,
  v: { M: number; E: number; k: number; H: number; order: number; round: boolean; root: number },
): ReturnType<Recorder['params']> {
  return rec.params('moe.wgsl', v);
}

/**
 * y[s, :] = W_{ids[s]} x[s / xDiv, :] for the `slots` slots (xDiv = k: the slots of a row share its x; 1: each slot
 * has its own x row), one dispatch per expert range (part) of the stacked tensors.
 */
export function expertMatvec(
  rec: Recorder,
  w: GpuExperts,
  x: GPUBuffer,
  y: GPUBuffer,
  xRows: number,
  xDiv: number,
  round: boolean,
  grouped: boolean,
  ws: Pick<MoeWorkspace, 'ids' | 'counts'>,
): void {
  const d = w.desc;
  const slots = xRows * xDiv;
  const K = d.inFeatures;
  const N = d.outFeatures;
  // the x group sums the lanes arithmetic reads (matmul.wgsl affine_xsum), one per x row
  const lin: GpuLinear = { desc: d, weight: w.weight, scales: w.scales, biases: w.biases };
  const xs = op.groupSums(rec, lin, x, { M: xRows, round: false }, K, 'moe').buffer;
  const blocks = Math.ceil(N / (4 * WG));
  w.weight.parts.forEach((part, i) => {
    const params = rec.params('moe_experts.wgsl', {
      M: slots,
      N,
      K,
      group_size: d.groupSize,
      n_offset: 0,
      x_stride: K,
      y_stride: N,
      round,
    });
    const constants = {
      BITS: d.bits,
      XDIV: xDiv,
      E0: part.rowStart,
      E1: part.rowStart + part.rows,
      GROUPED: grouped ? 1 : 0,
    };
    const bindings = [
      params,
      undefined,
      undefined,
      y,
      partBinding(w.scales.parts[i]),
      partBinding(w.biases.parts[i]),
      xs,
      x,
      partBinding(part),
      ws.ids,
      ws.counts,
    ];
    rec.run('moe_experts.wgsl', 'expert_lanes', constants, bindings, slots * blocks);
  });
}
