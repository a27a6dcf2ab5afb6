/**
 * The MoE block of Gemma 4 26B-A4B (docs/GEMMA4-FAMILY.md, "MoE"): a dense MLP and a routed expert MLP in
 * parallel on the post-attention residual h1.
 *   dense   = post_ff_norm_1( mlp( pre_ff_norm(h1) ) )
 *   experts = post_ff_norm_2( sum_k w_k * down_e( gelu_tanh(gate_e x) * up_e x ) ),  x = pre_ff_norm_2(h1)
 *   h       = h1 + post_ff_norm( dense + experts )
 * Router on h1 (not normed by pre_ff_norm): scale-free RMSNorm, x router.scale x H^-0.5, router.proj, then
 *   'transformers' (Gemma4TextRouter.forward): softmax over all E, top-k of the probabilities, renormalise;
 *   'mlx' (gemma4_text.py Router.__call__): top-k of the raw scores (argpartition), softmax over the k;
 * both times per_expert_scale[e]. Equal in exact arithmetic, not bit-equal.
 */
import { linear, type RefLinear } from '../../linear.ts';
import { geluTanh, type NormFn } from '../../ops.ts';
import { roundBf16 } from '../../mlx-orders.ts';

export interface MoeWeights {
  numExperts: number;
  topK: number;
  /** router.proj [E, H]. */
  routerProj: RefLinear;
  /** router.scale [H]. */
  routerScale: Float64Array;
  /** router.per_expert_scale [E]. */
  perExpertScale: Float64Array;
  /** Per expert: switch_glu gate_proj / up_proj [I, H], down_proj [H, I]. */
  gate: RefLinear[];
  up: RefLinear[];
  down: RefLinear[];
  preFfNorm2: Float64Array;
  postFfNorm1: Float64Array;
  postFfNorm2: Float64Array;
}

export type RouterOrder = 'mlx' | 'transformers';

export interface RouterOptions {
  /** Default 'mlx'. */
  order?: RouterOrder;
  /** H^-0.5 as the runtime multiplies it (familyConstants().routerRootSize). */
  rootSize: number;
  /**
   * How router.scale and the root size meet. 'transformers': ((norm(x) * scale) * root); 'mlx': the weight
   * vector scale * root is formed first (in bf16 in MLX: `bf16` rounds each product, as a bf16 array times a
   * bf16 scalar does) and RMSNorm multiplies it in. Default: the one of `order`, without bf16.
   */
  scaleProduct?: 'transformers' | 'mlx' | 'mlx-bf16';
}

export interface RouterResult {
  /** router.proj output [E]. */
  scores: Float64Array;
  /** Chosen experts, by descending score (ties: lower index first). */
  experts: number[];
  /** Their weights (after per_expert_scale), same order. */
  weights: number[];
  /** transformers only: the softmax over all E. */
  probabilities?: Float64Array;
}

/** Top-k indices of v by descending value, ties to the lower index (torch.topk's order on distinct values). */
export function topKIndices(v: ArrayLike<number>, k: number): number[] {
  if (k < 1 || k > v.length) throw new Error(`top-${k} of ${v.length} values`);
  const idx = Array.from({ length: v.length }, (_, i) => i);
  idx.sort((a, b) => (v[b] !== v[a] ? v[b] - v[a] : a - b));
  return idx.slice(0, k);
}

function softmax(v: number[]): number[] {
  const m = Math.max(...v);
  const e = v.map((x) => Math.exp(x - m));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / s);
}

/** The router of one row; `residual` is h1 (the residual after attention). */
export function routeRow(w: MoeWeights, residual: Float64Array, norm: NormFn, opts: RouterOptions): RouterResult {
  const order = opts.order ?? 'mlx';
  const product = opts.scaleProduct ?? (order === 'mlx' ? 'mlx' : 'transformers');
  const H = residual.length;
  let x: Float64Array;
  if (product === 'transformers') {
    x = norm(residual, 0, H, null);
    for (let i = 0; i < H; i++) x[i] = x[i] * w.routerScale[i] * opts.rootSize;
  } else {
    const wv = new Float64Array(H);
    for (let i = 0; i < H; i++) {
      const p = w.routerScale[i] * opts.rootSize;
      wv[i] = product === 'mlx-bf16' ? roundBf16(p) : p;
    }
    x = norm(residual, 0, H, wv);
  }
  const scores = linear(w.routerProj, x);
  const k = w.topK;
  if (order === 'transformers') {
    const probs = Float64Array.from(softmax(Array.from(scores)));
    const experts = topKIndices(probs, k);
    const top = experts.map((e) => probs[e]);
    const sum = top.reduce((a, b) => a + b, 0);
    return {
      scores,
      experts,
      weights: top.map((p, j) => (p / sum) * w.perExpertScale[experts[j]]),
      probabilities: probs,
    };
  }
  const experts = topKIndices(scores, k);
  const sm = softmax(experts.map((e) => scores[e]));
  return { scores, experts, weights: sm.map((p, j) => p * w.perExpertScale[experts[j]]) };
}

/**
 * The experts' weighted sum for one row x (pre_ff_norm_2 output), before post_ff_norm_2. `sumOrder`:
 * 'expert-ascending' adds the chosen experts from the lowest id up, as transformers' eager experts do
 * (index_add_ per expert hit, in expert order); 'selection' adds them in route.experts order.
 */
export function expertsRow(
  w: MoeWeights,
  x: Float64Array,
  route: Pick<RouterResult, 'experts' | 'weights'>,
  sumOrder: 'expert-ascending' | 'selection' = 'expert-ascending',
): Float64Array {
  const js = route.experts.map((_, j) => j);
  if (sumOrder === 'expert-ascending') js.sort((a, b) => route.experts[a] - route.experts[b]);
  const out = new Float64Array(x.length);
  for (const j of js) {
    const e = route.experts[j];
    const g = linear(w.gate[e], x);
    const u = linear(w.up[e], x);
    for (let i = 0; i < g.length; i++) g[i] = geluTanh(g[i]) * u[i];
    const y = linear(w.down[e], g);
    for (let i = 0; i < out.length; i++) out[i] += route.weights[j] * y[i];
  }
  return out;
}

export interface MoeBlockResult {
  /** h1 + post_ff_norm(dense + experts). */
  h: Float64Array;
  /** Dense MLP output before post_ff_norm_1 (the fixture's act.mlp.i). */
  mlp: Float64Array;
  /** Experts output before post_ff_norm_2 (act.experts.i). */
  experts: Float64Array;
  route: RouterResult;
}

/**
 * The feed-forward half of a MoE decoder layer for one row. `dense` computes the dense MLP (gate/up/down of the
 * layer) on its input; `preFfNorm` / `postFfNorm` are the layer's usual norms.
 */
export function moeBlockRow(
  w: MoeWeights,
  layer: { preFfNorm: Float64Array; postFfNorm: Float64Array },
  dense: (x: Float64Array) => Float64Array,
  h1: Float64Array,
  norm: NormFn,
  opts: RouterOptions & { sumOrder?: 'expert-ascending' | 'selection' },
): MoeBlockResult {
  const H = h1.length;
  const mlp = dense(norm(h1, 0, H, layer.preFfNorm));
  const d = norm(mlp, 0, H, w.postFfNorm1);
  const route = routeRow(w, h1, norm, opts);
  const experts = expertsRow(w, norm(h1, 0, H, w.preFfNorm2), route, opts.sumOrder);
  const e = norm(experts, 0, H, w.postFfNorm2);
  const sum = new Float64Array(H);
  for (let i = 0; i < H; i++) sum[i] = d[i] + e[i];
  const f = norm(sum, 0, H, layer.postFfNorm);
  const h = new Float64Array(H);
  for (let i = 0; i < H; i++) h[i] = h1[i] + f[i];
  return { h, mlp, experts, route };
}
