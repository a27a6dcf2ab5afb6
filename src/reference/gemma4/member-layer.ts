/**
 * One decoder layer of any Gemma 4 text model for one row: the dense layer of src/reference/gemma4/layer.ts
 * (layerRow) extended by the family's parts, in their place:
 *   h1 = h + post_attn_norm(attn(input_norm(h)))
 *   h2 = h1 + post_ff_norm(mlp(pre_ff_norm(h1)))        dense layers
 *      = moeBlockRow(...).h                             MoE layers (dense MLP and experts in parallel)
 *   h3 = h2 + pleContribution(h2, input_l)              E-series (per-layer embeddings)
 *   out = h3 * layer_scalar
 * Written to be called from the reference target's layer loop (which keeps its attention and cache; KV-shared
 * layers pass an attention that reads the donor's K/V, see kv-sharing.ts).
 */
import { layerRow, type LayerRowCapture } from './layer.ts';
import { linear } from '../linear.ts';
import { geluTanh, type NormFn } from '../ops.ts';
import type { RefLayer } from './weights.ts';
import { moeBlockRow, type RouterOptions, type RouterResult } from './moe/moe.ts';
import { pleContribution } from './e-series/ple.ts';

/** A reference layer: its optional `ple` and `moe` hold the per-layer input and MoE weights. */
export type FamilyLayer = RefLayer;

export interface FamilyLayerOptions {
  /** The layer's combined per-layer inputs (perLayerInputs) and the offset of its slice (l * P). */
  pleInputs?: { inputs: Float64Array; off: number };
  router?: RouterOptions & { sumOrder?: 'expert-ascending' | 'selection' };
}

export interface FamilyLayerCapture extends LayerRowCapture {
  experts?: Float64Array;
  route?: RouterResult;
  /** The per-layer contribution after post_per_layer_input_norm (act.ple.i). */
  ple?: Float64Array;
}

export function familyLayerRow(
  l: FamilyLayer,
  norm: NormFn,
  h: Float64Array,
  attention: (x: Float64Array) => Float64Array,
  opts: FamilyLayerOptions = {},
): { h: Float64Array } & FamilyLayerCapture {
  const H = h.length;
  if (!l.moe && !l.ple) return layerRow(l, norm, h, attention);
  const x = norm(h, 0, H, l.inputNorm);
  const attn = linear(l.o, attention(x));
  const a = norm(attn, 0, H, l.postAttnNorm);
  let h2: Float64Array = new Float64Array(H);
  for (let i = 0; i < H; i++) h2[i] = h[i] + a[i];
  const dense = (xin: Float64Array) => {
    const g = linear(l.gate, xin);
    const u = linear(l.up, xin);
    for (let i = 0; i < g.length; i++) g[i] = geluTanh(g[i]) * u[i];
    return linear(l.down, g);
  };
  const cap: FamilyLayerCapture = { attn, mlp: new Float64Array(0) };
  if (l.moe) {
    if (!opts.router) throw new Error(`layer ${l.index} is a MoE layer: router options (root size) are required`);
    const r = moeBlockRow(l.moe, l, dense, h2, norm, opts.router);
    h2 = r.h;
    cap.mlp = r.mlp;
    cap.experts = r.experts;
    cap.route = r.route;
  } else {
    const mlp = dense(norm(h2, 0, H, l.preFfNorm));
    const f = norm(mlp, 0, H, l.postFfNorm);
    for (let i = 0; i < H; i++) h2[i] += f[i];
    cap.mlp = mlp;
  }
  if (l.ple) {
    if (!opts.pleInputs) throw new Error(`layer ${l.index} has per-layer input weights but no per-layer inputs`);
    const p = pleContribution(l.ple, h2, opts.pleInputs.inputs, opts.pleInputs.off, norm);
    for (let i = 0; i < H; i++) h2[i] += p[i];
    cap.ple = p;
  }
  const out = new Float64Array(H);
  for (let i = 0; i < H; i++) out[i] = h2[i] * l.layerScalar;
  return { h: out, ...cap };
}
