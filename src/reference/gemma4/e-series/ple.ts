/**
 * Per-layer embeddings (PLE) of Gemma 4 E2B / E4B (docs/GEMMA4-FAMILY.md, "Per-layer embeddings").
 * transformers: Gemma4TextModel.get_per_layer_inputs / project_per_layer_inputs and the tail of
 * Gemma4TextDecoderLayer.forward; mlx-lm gemma4_text.py: _get_per_layer_inputs / _project_per_layer_inputs and
 * DecoderLayer.__call__.
 *
 *   table_l   = T[id, l*P .. (l+1)*P) * sqrt(P)                     (T: [vocab_ple, L*P])
 *   proj_l    = norm_P( (W_proj (E[id] * sqrt(H)))[l*P ..] * H^-0.5 )  (W_proj: [L*P, H], norm weight [P])
 *   input_l   = (proj_l + table_l) * 2^-0.5
 * and in layer l, after the MLP's residual add and before layer_scalar:
 *   h = h + post_norm( W_up_l( gelu_tanh(W_gate_l h) * input_l ) )   (W_gate: [P, H], W_up: [H, P])
 */
import { linear, type RefLinear } from '../../linear.ts';
import { geluTanh, type NormFn } from '../../ops.ts';
import type { FamilyConstants } from '../../../numerics/family-constants.ts';

export interface PleModelWeights {
  numLayers: number;
  /** P, hidden_size_per_layer_input. */
  ple: number;
  hidden: number;
  /** embed_tokens_per_layer [vocab_size_per_layer_input, L*P], dequantized. */
  table: RefLinear;
  /** per_layer_model_projection [L*P, H]. */
  modelProjection: RefLinear;
  /** per_layer_projection_norm weight [P]. */
  projectionNorm: Float64Array;
}

export interface PleLayerWeights {
  /** per_layer_input_gate [P, H]. */
  gate: RefLinear;
  /** per_layer_projection [H, P]. */
  projection: RefLinear;
  /** post_per_layer_input_norm weight [H]. */
  postNorm: Float64Array;
}

/** The token-identity part: T[id] * sqrt(P), all L slices [L*P]. */
export function pleTableRow(
  w: PleModelWeights,
  token: number,
  c: Pick<FamilyConstants, 'pleTableScale'>,
): Float64Array {
  const n = w.numLayers * w.ple;
  if (w.table.in !== n) throw new Error(`per-layer table has ${w.table.in} columns, expected L*P = ${n}`);
  if (!Number.isInteger(token) || token < 0 || token >= w.table.out)
    throw new Error(`token ${token} outside the per-layer vocabulary [0, ${w.table.out})`);
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) out[i] = w.table.w[token * n + i] * c.pleTableScale;
  return out;
}

/**
 * The combined per-layer inputs of one token [L*P] (slice l at l*P): transformers' project_per_layer_inputs with
 * per_layer_inputs given. `scaledEmbedding` is the token embedding already multiplied by the embed scale (the
 * layer stack's input h0).
 */
export function perLayerInputs(
  w: PleModelWeights,
  token: number,
  scaledEmbedding: Float64Array,
  norm: NormFn,
  c: Pick<FamilyConstants, 'pleTableScale' | 'pleProjectionScale' | 'pleInputScale'>,
): Float64Array {
  const P = w.ple;
  const table = pleTableRow(w, token, c);
  const proj = linear(w.modelProjection, scaledEmbedding);
  for (let i = 0; i < proj.length; i++) proj[i] *= c.pleProjectionScale;
  const out = new Float64Array(w.numLayers * P);
  for (let l = 0; l < w.numLayers; l++) {
    norm(proj, l * P, P, w.projectionNorm, proj, l * P);
    for (let i = l * P; i < (l + 1) * P; i++) out[i] = (proj[i] + table[i]) * c.pleInputScale;
  }
  return out;
}

/**
 * One layer's per-layer contribution for one row: post_norm(W_up(gelu_tanh(W_gate h) * input_l)), where h is the
 * residual after the MLP block and input_l = inputs[off .. off + P).
 */
export function pleContribution(
  lw: PleLayerWeights,
  h: Float64Array,
  inputs: Float64Array,
  off: number,
  norm: NormFn,
): Float64Array {
  const g = linear(lw.gate, h);
  for (let i = 0; i < g.length; i++) g[i] = geluTanh(g[i]) * inputs[off + i];
  const y = linear(lw.projection, g);
  return norm(y, 0, y.length, lw.postNorm);
}
