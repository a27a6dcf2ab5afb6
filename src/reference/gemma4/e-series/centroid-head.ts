/**
 * The centroid LM head of the E2B / E4B assistants (`use_ordered_embeddings`; docs/GEMMA4-FAMILY.md,
 * "Centroid LM head"). transformers: Gemma4AssistantMaskedEmbedder.forward; mlx-vlm: speculative/drafters/
 * gemma4_assistant/masked_embedder.py MaskedEmbedder; vLLM: gemma4_mtp.py Gemma4MTPMaskedEmbedder.
 *   c = W_centroids h                          ([C], C = num_centroids, 2048 in the real models)
 *   clusters = top-k of c                      (k = centroid_intermediate_top_k, 32)
 *   selected = token_ordering[c*V/C .. (c+1)*V/C) for each cluster, in cluster order (32 x 128 = 4096 tokens)
 *   logits[selected] = E[selected] . h         (E: the assistant's tied embedding)
 *   every other logit = fill: min(selected logits) - 1 (transformers, mlx-vlm) or the dtype's minimum (vLLM)
 * Greedy drafting takes the argmax over the selected logits (mlx-vlm MaskedEmbedder.argmax, vLLM get_top_tokens).
 */
import { linear, type RefLinear } from '../../linear.ts';
import { topKIndices } from '../moe/moe.ts';

export interface CentroidHeadWeights {
  /** masked_embedding.centroids [C, h]. */
  centroids: RefLinear;
  /** masked_embedding.token_ordering [V]: a permutation of the vocabulary, V / C tokens per cluster. */
  tokenOrdering: Int32Array;
  /** The assistant's tied embedding [V, h]. */
  embed: RefLinear;
  /** centroid_intermediate_top_k. */
  topK: number;
}

/** The most negative finite value of a dtype (torch.finfo(dtype).min), vLLM's fill. */
export const DTYPE_MIN = {
  f32: -3.4028234663852886e38,
  bf16: -3.3895313892515355e38,
  f16: -65504,
} as const;

/** 'min-minus-one': min(selected) - 1 (transformers, mlx-vlm); a number: that value (e.g. DTYPE_MIN.bf16, vLLM). */
export type CentroidFill = 'min-minus-one' | number;

export interface CentroidHeadResult {
  centroidLogits: Float64Array;
  /** Chosen clusters by descending centroid logit (torch.topk order; ties to the lower index). */
  clusters: number[];
  /** Selected token ids, cluster after cluster, each cluster's tokens in token_ordering order. */
  selected: Int32Array;
  /** Their logits, same order. */
  selectedLogits: Float64Array;
  /** The full-vocabulary row with the fill elsewhere. */
  logits: Float64Array;
  /** The fill value used. */
  fill: number;
  /** Greedy token: argmax over the selected logits (first in selected order on ties). */
  token: number;
}

export function centroidHead(
  w: CentroidHeadWeights,
  h: Float64Array,
  fill: CentroidFill = 'min-minus-one',
): CentroidHeadResult {
  const C = w.centroids.out;
  const V = w.embed.out;
  if (w.tokenOrdering.length !== V) throw new Error(`token_ordering has ${w.tokenOrdering.length} ids, vocab is ${V}`);
  if (V % C !== 0) throw new Error(`vocab ${V} is not a multiple of ${C} centroids`);
  const per = V / C;
  const centroidLogits = linear(w.centroids, h);
  const clusters = topKIndices(centroidLogits, w.topK);
  const n = clusters.length * per;
  const selected = new Int32Array(n);
  clusters.forEach((c, j) => selected.set(w.tokenOrdering.subarray(c * per, (c + 1) * per), j * per));
  const selectedLogits = new Float64Array(n);
  const H = w.embed.in;
  let best = 0;
  let min = Infinity;
  for (let j = 0; j < n; j++) {
    const t = selected[j];
    if (t < 0 || t >= V) throw new Error(`token_ordering holds ${t}, outside [0, ${V})`);
    let s = 0;
    for (let i = 0; i < H; i++) s += w.embed.w[t * H + i] * h[i];
    selectedLogits[j] = s;
    if (s > selectedLogits[best]) best = j;
    if (s < min) min = s;
  }
  const fillValue = fill === 'min-minus-one' ? min - 1 : fill;
  const logits = new Float64Array(V).fill(fillValue);
  for (let j = 0; j < n; j++) logits[selected[j]] = selectedLogits[j];
  return { centroidLogits, clusters, selected, selectedLogits, logits, fill: fillValue, token: selected[best] };
}
