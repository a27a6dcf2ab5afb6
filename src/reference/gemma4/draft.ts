import { centroidHead, type CentroidFill } from './e-series/centroid-head.ts';
import { headNorm, layerRow, attendRow } from './layer.ts';
import { linear } from '../linear.ts';
import { argmax, makeNorm, type Numerics } from '../ops.ts';
import type { Rope } from '../rope.ts';
import { ropeFor, type SharedKvByType } from './target.ts';
import type { AssistantWeights, TargetWeights } from './weights.ts';

export interface DraftInput {
  /** The last emitted token b (first assistant input). */
  bonusToken: number;
  /** Target post-final-norm hidden [backboneHidden] at the position that produced b. */
  seedHidden: Float64Array;
  /** The one frozen RoPE position of the round (transformers: b's position; mlxcel: kv_valid_len - 1). */
  positionId: number;
  /** The target's shared K/V (last sliding and last full layer). */
  sharedKv: SharedKvByType;
  steps: number;
  /**
   * How many of the most recent cached entries a sliding assistant layer reads. Default window + 1: transformers
   * builds the assistant's sliding mask with |q - kv| <= W (inclusive), one more key than the target's own
   * sliding layers see; the fixture goldens follow it.
   */
  slidingSpan?: number;
  /** Default 'transformers' (see ops.ts). */
  numerics?: Numerics;
  /**
   * Centroid-head assistants: the logit of every token outside the top clusters. Default 'min-minus-one'
   * (transformers, mlx-vlm); vLLM fills the dtype's minimum (DTYPE_MIN). Greedy tokens do not depend on it.
   */
  centroidFill?: CentroidFill;
}

export interface DraftResult {
  tokens: number[];
  /** [steps, vocab], no softcap. */
  logits: Float64Array;
  /** [steps, backboneHidden]: post_projection(normed), the next step's h_prev. */
  hidden: Float64Array;
  /** [steps, hidden]: the assistant's final-norm output (what the LM head reads). */
  normed: Float64Array;
  /** Centroid-head assistants: the centroid logits [steps, C] and the scored tokens [steps, topK * V / C]. */
  centroid?: { logits: Float64Array; selected: Int32Array };
}

/**
 * MTP drafting as transformers' Gemma4AssistantForCausalLM does it, one step per token:
 *   x = pre_projection([E_target[tok] * s_target, h_prev]); 4 layers whose attention is query-only over the
 *   target's K/V (sliding layers: the last W cached entries; full layers: all), RoPE on q at positionId;
 *   y = norm(x); logits = E_assistant y (no softcap; E-series assistants: the centroid head, gemma4/e-series/centroid-head.ts);
 *   h_prev = post_projection(y); tok = argmax.
 */
export function referenceDraft(target: TargetWeights, assistant: AssistantWeights, input: DraftInput): DraftResult {
  const BB = assistant.backboneHidden;
  const H = assistant.hidden;
  const V = assistant.vocab;
  if (input.seedHidden.length !== BB)
    throw new Error(`seedHidden has ${input.seedHidden.length} values, expected ${BB}`);
  const numerics = input.numerics ?? 'transformers';
  const ropes = { ropes: new Map<string, Rope>(), numerics };
  const norm = makeNorm(assistant.eps, numerics);
  const span = input.slidingSpan ?? assistant.window + 1;
  const tokens: number[] = [];
  const logits = new Float64Array(input.steps * V);
  const hidden = new Float64Array(input.steps * BB);
  const normed = new Float64Array(input.steps * H);
  const ch = assistant.centroidHead;
  const centroid = ch && {
    logits: new Float64Array(input.steps * ch.centroids.out),
    selected: new Int32Array((input.steps * ch.topK * V) / ch.centroids.out),
  };
  let tok = input.bonusToken;
  let hPrev = input.seedHidden;
  for (let step = 0; step < input.steps; step++) {
    const cat = new Float64Array(2 * BB);
    for (let i = 0; i < BB; i++) cat[i] = target.embed.w[tok * BB + i] * target.embedScale;
    cat.set(hPrev, BB);
    let h = linear(assistant.preProjection, cat);
    for (const l of assistant.layers) {
      const kv = input.sharedKv[l.type];
      const d = l.headDim;
      if (kv.headDim !== d || kv.numKvHeads !== l.numKvHeads) {
        throw new Error(
          `assistant layer ${l.index} (${l.type}) expects ${l.numKvHeads}x${d} K/V, target gives ${kv.numKvHeads}x${kv.headDim}`,
        );
      }
      // Sliding layers read the last `span` cached entries, full layers all of them (no causal mask: every
      // cached position precedes the drafted one).
      const from = l.type === 'sliding' ? Math.max(0, kv.length - span) : 0;
      const ks: Float64Array[] = [];
      const vs: Float64Array[] = [];
      for (let t = from; t < kv.length; t++) {
        const k = new Float64Array(l.numKvHeads * d);
        const v = new Float64Array(l.numKvHeads * d);
        for (let hh = 0; hh < l.numKvHeads; hh++) {
          k.set(kv.keys.subarray((hh * kv.length + t) * d, (hh * kv.length + t + 1) * d), hh * d);
          v.set(kv.values.subarray((hh * kv.length + t) * d, (hh * kv.length + t + 1) * d), hh * d);
        }
        ks.push(k);
        vs.push(v);
      }
      const rope = ropeFor(ropes, l);
      h = layerRow(l, norm, h, (x) => {
        const q = linear(l.q, x);
        headNorm(q, l.numHeads, d, l.qNorm, norm);
        for (let hh = 0; hh < l.numHeads; hh++) rope.apply(q, hh * d, input.positionId);
        return attendRow(q, ks, vs, l.numHeads, l.numKvHeads, d);
      }).h;
    }
    const y = norm(h, 0, H, assistant.finalNorm);
    normed.set(y, step * H);
    if (ch && centroid) {
      // Only the tokens of the top clusters are scored; the draft is the best of them (mlx-vlm, vLLM).
      const r = centroidHead(ch, y, input.centroidFill);
      logits.set(r.logits, step * V);
      centroid.logits.set(r.centroidLogits, step * r.centroidLogits.length);
      centroid.selected.set(r.selected, step * r.selected.length);
      tok = r.token;
    } else {
      const lg = linear(assistant.embed, y);
      logits.set(lg, step * V);
      tok = argmax(lg);
    }
    hPrev = linear(assistant.postProjection, y);
    hidden.set(hPrev, step * BB);
    tokens.push(tok);
  }
  return { tokens, logits, hidden, normed, ...(centroid ? { centroid } : {}) };
}
