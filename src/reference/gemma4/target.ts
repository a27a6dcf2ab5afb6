import type { LayerType } from '../../format/layer-type.ts';
import { familyConstants } from '../../numerics/family-constants.ts';
import { familyLayerRow } from './member-layer.ts';
import type { RouterOptions } from './moe/moe.ts';
import { perLayerInputs } from './e-series/ple.ts';
import { headNorm, attendRow } from './layer.ts';
import { linear } from '../linear.ts';
import { argmax, makeNorm, softcap, type NormFn, type Numerics } from '../ops.ts';
import { Rope } from '../rope.ts';
import type { RefLayer, TargetWeights } from './weights.ts';

/**
 * A plain contiguous KV cache: per layer, one entry per position in chronological order (the reference does
 * not model ring slot order; the sliding window is applied by position when reading). KV-shared layers
 * (RefLayer.kvDonor) keep no entries: they read their donor's.
 */
export interface ReferenceKvCache {
  /** Positions held, in order (0..n-1 for a normal sequence). */
  positions: number[];
  /** Per layer: keys after k_norm + RoPE, values after v_norm, each [numKvHeads * headDim] per position. */
  keys: Float64Array[][];
  values: Float64Array[][];
  ropes: Map<string, Rope>;
  numerics: Numerics;
}

export interface ReferenceOptions {
  /**
   * Keep per-layer activations ('act.attn.i', 'act.mlp.i', 'act.layer.i', 'act.final_norm'; E-series also
   * 'act.ple_inputs' [n, L*P] and 'act.ple.i'), named as the fixtures' goldens.
   */
  captures?: boolean;
  /** Rounding model; default 'transformers' (f32 RMSNorm and RoPE tables, as the goldens), see ops.ts. */
  numerics?: Numerics;
  /**
   * MoE targets: the router convention and the experts' summation order (moe.ts; defaults there: MLX's router,
   * transformers' expert-ascending sum). The root size H^-0.5 is familyConstants' (bf16 as MLX uses it).
   */
  router?: Omit<RouterOptions, 'rootSize'> & { sumOrder?: 'expert-ascending' | 'selection' };
}

export function newKvCache(w: TargetWeights, numerics: Numerics = 'transformers'): ReferenceKvCache {
  return { positions: [], keys: w.layers.map(() => []), values: w.layers.map(() => []), ropes: new Map(), numerics };
}

export function ropeFor(
  cache: { ropes: Map<string, Rope>; numerics: Numerics },
  l: Pick<RefLayer, 'headDim' | 'rope'>,
): Rope {
  const key = `${l.headDim}/${l.rope.ropeType}/${l.rope.theta}/${l.rope.partialRotary}`;
  let r = cache.ropes.get(key);
  if (!r) {
    r = new Rope(l.headDim, l.rope, cache.numerics === 'transformers' ? 'f32' : 'f64');
    cache.ropes.set(key, r);
  }
  return r;
}

export interface StepResult {
  /** [n, vocab] after softcap. */
  logits: Float64Array;
  /** Post-final-norm hidden states [n, hidden]. */
  finalHidden: Float64Array;
  acts?: Map<string, Float64Array>;
}

/**
 * Runs the target over `tokens` at positions cache.positions.length.. and appends their K/V to the cache.
 * Rows of one call see each other causally, exactly as if fed one at a time (f64, fixed summation order),
 * so prefill + one-token decode equal a single full forward up to the last bits of float64.
 */
export function targetStep(
  w: TargetWeights,
  tokens: readonly number[],
  cache: ReferenceKvCache,
  opts: ReferenceOptions = {},
): StepResult {
  const H = w.hidden;
  const n = tokens.length;
  const start = cache.positions.length;
  const positions = tokens.map((_, i) => start + i);
  cache.positions.push(...positions);
  const acts = opts.captures ? new Map<string, Float64Array>() : undefined;
  const norm = makeNorm(w.eps, cache.numerics);

  // h = E[id] * s (s = bf16-rounded sqrt(H))
  let rows: Float64Array[] = tokens.map((t) => {
    if (!Number.isInteger(t) || t < 0 || t >= w.vocab) throw new Error(`token ${t} outside vocab [0, ${w.vocab})`);
    const h = new Float64Array(H);
    for (let i = 0; i < H; i++) h[i] = w.embed.w[t * H + i] * w.embedScale;
    return h;
  });
  const pleRows = perLayerRows(w, tokens, rows, norm);
  const pleWidth = w.ple?.ple ?? 0;
  const router = { ...opts.router, rootSize: familyConstants(H, pleWidth).routerRootSize };
  if (acts && pleRows) acts.set('act.ple_inputs', concat(pleRows, pleRows[0].length));

  w.layers.forEach((l, li) => {
    const rope = ropeFor(cache, l);
    const d = l.headDim;
    const newRows: Float64Array[] = [];
    const attnCap = acts ? new Float64Array(n * H) : undefined;
    const mlpCap = acts ? new Float64Array(n * H) : undefined;
    const pleCap = acts && l.ple ? new Float64Array(n * H) : undefined;
    const moeCap = acts && l.moe ? moeCapture(n, H, l.moe.numExperts, l.moe.topK) : undefined;
    // A KV-shared layer reads the cache of its donor, an earlier layer, which already holds this step's rows.
    const kvLayer = l.kvDonor ?? li;
    if (l.kvDonor === undefined) {
      // K/V of every new row go into the cache before any query reads (causality is by position below).
      const xs = rows.map((h) => norm(h, 0, H, l.inputNorm));
      xs.forEach((x, r) => {
        const { k, v } = keyValue(l, x, positions[r], rope, norm);
        cache.keys[li].push(k);
        cache.values[li].push(v);
      });
    }
    rows.forEach((h, r) => {
      const p = positions[r];
      const attention = (x: Float64Array) => {
        const q = linear(l.q, x);
        headNorm(q, l.numHeads, d, l.qNorm, norm);
        for (let hh = 0; hh < l.numHeads; hh++) rope.apply(q, hh * d, p);
        const lo = l.type === 'sliding' ? p - w.window + 1 : 0;
        const ks: Float64Array[] = [];
        const vs: Float64Array[] = [];
        for (let s = 0; s < cache.positions.length; s++) {
          const ps = cache.positions[s];
          if (ps >= lo && ps <= p) {
            ks.push(cache.keys[kvLayer][s]);
            vs.push(cache.values[kvLayer][s]);
          }
        }
        return attendRow(q, ks, vs, l.numHeads, l.numKvHeads, d);
      };
      const pleInputs = pleRows && { inputs: pleRows[r], off: li * pleWidth };
      const res = familyLayerRow(l, norm, h, attention, { router, ...(pleInputs ? { pleInputs } : {}) });
      newRows.push(res.h);
      attnCap?.set(res.attn, r * H);
      mlpCap?.set(res.mlp, r * H);
      if (res.ple) pleCap?.set(res.ple, r * H);
      if (moeCap && res.route && res.experts) {
        const { experts, weights, scores } = res.route;
        moeCap.scores.set(scores, r * scores.length);
        moeCap.weights.set(weights, r * weights.length);
        moeCap.ids.set(experts, r * experts.length);
        moeCap.experts.set(res.experts, r * H);
      }
    });
    rows = newRows;
    if (acts) {
      acts.set(`act.attn.${li}`, attnCap!);
      acts.set(`act.mlp.${li}`, mlpCap!);
      if (pleCap) acts.set(`act.ple.${li}`, pleCap);
      if (moeCap) {
        acts.set(`act.router_scores.${li}`, moeCap.scores);
        acts.set(`act.router_weights.${li}`, moeCap.weights);
        acts.set(`act.router_experts.${li}`, moeCap.ids);
        acts.set(`act.experts.${li}`, moeCap.experts);
      }
      acts.set(`act.layer.${li}`, concat(rows, H));
    }
  });

  const finalHidden = new Float64Array(n * H);
  rows.forEach((h, r) => norm(h, 0, H, w.finalNorm, finalHidden, r * H));
  acts?.set('act.final_norm', finalHidden);
  const logits = new Float64Array(n * w.vocab);
  for (let r = 0; r < n; r++) {
    const y = linear(w.embed, finalHidden, r * H); // tied head, no embedding scale
    for (let v = 0; v < w.vocab; v++)
      logits[r * w.vocab + v] = w.finalSoftcap === null ? y[v] : softcap(y[v], w.finalSoftcap);
  }
  return { logits, finalHidden, acts };
}

/**
 * MoE captures as the fixture script names them: router.proj output [n, E], the chosen experts' weights and ids
 * [n, k] by descending score (transformers' torch.topk order), and the experts' output before
 * post_feedforward_layernorm_2 [n, H].
 */
function moeCapture(n: number, H: number, E: number, k: number) {
  return {
    scores: new Float64Array(n * E),
    weights: new Float64Array(n * k),
    ids: new Float64Array(n * k),
    experts: new Float64Array(n * H),
  };
}

/**
 * E-series: the combined per-layer inputs [L*P] of each row (null without per-layer embeddings), from the token
 * and its scaled embedding, with the constants as MLX multiplies them (familyConstants, 'mlx' mode; the fixtures
 * set the same bf16 values in transformers).
 */
function perLayerRows(
  w: TargetWeights,
  tokens: readonly number[],
  scaled: readonly Float64Array[],
  norm: NormFn,
): Float64Array[] | null {
  const ple = w.ple;
  if (!ple) return null;
  const c = familyConstants(w.hidden, ple.ple);
  return tokens.map((t, r) => perLayerInputs(ple, t, scaled[r], norm, c));
}

/** K after k_norm + RoPE, V after v_norm (V = raw K projection on k_eq_v full layers). */
function keyValue(
  l: RefLayer,
  x: Float64Array,
  pos: number,
  rope: Rope,
  norm: NormFn,
): { k: Float64Array; v: Float64Array } {
  const d = l.headDim;
  const kRaw = linear(l.k!, x);
  const v = l.kEqV ? Float64Array.from(kRaw) : linear(l.v!, x);
  const k = kRaw;
  headNorm(k, l.numKvHeads, d, l.kNorm, norm);
  for (let h = 0; h < l.numKvHeads; h++) rope.apply(k, h * d, pos);
  headNorm(v, l.numKvHeads, d, null, norm);
  return { k, v };
}

function concat(rows: Float64Array[], H: number): Float64Array {
  const out = new Float64Array(rows.length * H);
  rows.forEach((r, i) => out.set(r, i * H));
  return out;
}

/** The K/V an assistant reads: [numKvHeads, T, headDim] of the target's last layer of one type. */
export interface SharedKv {
  layerIndex: number;
  numKvHeads: number;
  headDim: number;
  length: number;
  keys: Float64Array;
  values: Float64Array;
}

export type SharedKvByType = Record<LayerType, SharedKv>;

/**
 * Extracts the cache of the last sliding and last full layer that own one (on E-series targets, the donors of the
 * KV-shared layers, which transformers exports as shared_kv_states) as [kvHeads, T, headDim]: the assistant's input.
 */
export function sharedKvFromCache(w: TargetWeights, cache: ReferenceKvCache): SharedKvByType {
  const pick = (type: LayerType): SharedKv => {
    let li = -1;
    for (let i = w.layers.length - 1; i >= 0; i--)
      if (w.layers[i].type === type && w.layers[i].kvDonor === undefined) {
        li = i;
        break;
      }
    if (li < 0) throw new Error(`target has no ${type} layer`);
    const l = w.layers[li];
    const T = cache.positions.length;
    const d = l.headDim;
    const keys = new Float64Array(l.numKvHeads * T * d);
    const values = new Float64Array(l.numKvHeads * T * d);
    for (let h = 0; h < l.numKvHeads; h++) {
      for (let t = 0; t < T; t++) {
        keys.set(cache.keys[li][t].subarray(h * d, (h + 1) * d), (h * T + t) * d);
        values.set(cache.values[li][t].subarray(h * d, (h + 1) * d), (h * T + t) * d);
      }
    }
    return { layerIndex: li, numKvHeads: l.numKvHeads, headDim: d, length: T, keys, values };
  };
  return { sliding: pick('sliding'), full: pick('full') };
}

export interface ForwardResult extends StepResult {
  sharedKv: SharedKvByType;
  cache: ReferenceKvCache;
}

/** One full-sequence forward of the target from position 0. */
export function referenceForward(
  w: TargetWeights,
  tokens: readonly number[],
  opts: ReferenceOptions = {},
): ForwardResult {
  const cache = newKvCache(w, opts.numerics);
  const r = targetStep(w, tokens, cache, opts);
  return { ...r, sharedKv: sharedKvFromCache(w, cache), cache };
}

export interface GreedyResult {
  tokens: number[];
  /** [n, vocab]: the logits each emitted token was the argmax of. */
  logits: Float64Array;
}

/** Classic greedy decode: prefill the prompt, then one token at a time with the KV cache (no stop on EOS). */
export function referenceGreedy(
  w: TargetWeights,
  prompt: readonly number[],
  n: number,
  opts: Omit<ReferenceOptions, 'captures'> = {},
): GreedyResult {
  const cache = newKvCache(w, opts.numerics);
  const V = w.vocab;
  const out: number[] = [];
  const logits = new Float64Array(n * V);
  const step = { router: opts.router };
  let last = targetStep(w, prompt, cache, step).logits.subarray((prompt.length - 1) * V);
  for (let i = 0; i < n; i++) {
    const tok = argmax(last, 0, V);
    out.push(tok);
    logits.set(last.subarray(0, V), i * V);
    if (i + 1 < n) last = targetStep(w, [tok], cache, step).logits;
  }
  return { tokens: out, logits };
}
