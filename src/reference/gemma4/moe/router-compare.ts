/**
 * CPU float64 twin of the router comparison (src/parity/router-compare.ts): the target's prompt forward under a
 * base router convention, then each layer's router run on that forward's h1 (the residual after attention) under
 * the base convention, with the other softmax order, and with the other scalar convention. Independent of the GPU:
 * h1 is rebuilt from the reference's own captures, h1 = input + post_attention_layernorm(act.attn.i), as
 * familyLayerRow forms it.
 */
import type { NormFn, Numerics } from '../../ops.ts';
import { makeNorm } from '../../ops.ts';
import { referenceForward } from '../target.ts';
import type { TargetWeights } from '../weights.ts';
import { familyConstants } from '../../../numerics/family-constants.ts';
import { routeRow, type RouterOrder, type RouterResult } from './moe.ts';

/** RouterOptions.scaleProduct values the GPU engine offers ('mlx-bf16': MLX's; 'transformers'). */
export type RouterScale = 'mlx-bf16' | 'transformers';

export interface ReferenceRouterLayer {
  layer: number;
  order: {
    /** Rows whose chosen sets agree between MLX's and transformers' softmax order. */
    setsAgree: number;
    /** Largest |w_mlx - w_transformers| over the slots of agreeing rows, matched by expert id. */
    maxWeightDiff: number;
  };
  scale: {
    /** Largest |score_base - score_other| over the layer's rows. */
    maxScoreDiff: number;
    setsAgree: number;
    /** Rows whose sets differ, with both sets (ascending) and both top-k gaps. */
    flips: { row: number; base: number[]; other: number[]; gapBase: number; gapOther: number }[];
  };
  /** Per row: the base convention's top-k gap (k-th minus (k+1)-th score). */
  gaps: number[];
  /** Per row: the base convention's experts (by descending score) and their weights under each softmax order. */
  routes: { experts: number[]; mlx: number[]; transformers: number[] }[];
}

export function referenceRouterComparison(
  w: TargetWeights,
  tokens: readonly number[],
  base: { order: RouterOrder; scale: RouterScale } = { order: 'mlx', scale: 'mlx-bf16' },
  numerics: Numerics = 'exact',
): ReferenceRouterLayer[] {
  const H = w.hidden;
  const T = tokens.length;
  const root = familyConstants(H, 0).routerRootSize;
  const fwd = referenceForward(w, tokens, {
    captures: true,
    numerics,
    router: { order: base.order, scaleProduct: base.scale },
  });
  const acts = fwd.acts!;
  const norm: NormFn = makeNorm(w.eps, numerics);
  const otherOrder: RouterOrder = base.order === 'mlx' ? 'transformers' : 'mlx';
  const otherScale: RouterScale = base.scale === 'mlx-bf16' ? 'transformers' : 'mlx-bf16';
  return w.layers.map((l, i) => {
    if (!l.moe) throw new Error(`layer ${i} has no MoE block: not a mixture-of-experts target`);
    const moe = l.moe;
    const k = moe.topK;
    const input = i === 0 ? embedRows(w, tokens) : acts.get(`act.layer.${i - 1}`)!;
    const attn = acts.get(`act.attn.${i}`)!;
    const out: ReferenceRouterLayer = {
      layer: i,
      order: { setsAgree: 0, maxWeightDiff: 0 },
      scale: { maxScoreDiff: 0, setsAgree: 0, flips: [] },
      gaps: [],
      routes: [],
    };
    for (let t = 0; t < T; t++) {
      const a = norm(attn.subarray(t * H, (t + 1) * H), 0, H, l.postAttnNorm);
      const h1 = new Float64Array(H);
      for (let j = 0; j < H; j++) h1[j] = input[t * H + j] + a[j];
      const route = (order: RouterOrder, scale: RouterScale) =>
        routeRow(moe, h1, norm, { order, scaleProduct: scale, rootSize: root });
      const b = route(base.order, base.scale);
      const o = route(otherOrder, base.scale);
      const s = route(base.order, otherScale);
      out.gaps.push(gap(b.scores, k));
      const byExpert = (r: RouterResult) => b.experts.map((e) => r.weights[r.experts.indexOf(e)] ?? Number.NaN);
      const [m, tf] = base.order === 'mlx' ? [b, o] : [o, b];
      out.routes.push({ experts: [...b.experts], mlx: byExpert(m), transformers: byExpert(tf) });
      if (sameSet(b, o)) {
        out.order.setsAgree++;
        b.experts.forEach((e, j) => {
          const d = Math.abs(b.weights[j] - o.weights[o.experts.indexOf(e)]);
          out.order.maxWeightDiff = Math.max(out.order.maxWeightDiff, d);
        });
      }
      for (let e = 0; e < b.scores.length; e++)
        out.scale.maxScoreDiff = Math.max(out.scale.maxScoreDiff, Math.abs(b.scores[e] - s.scores[e]));
      if (sameSet(b, s)) out.scale.setsAgree++;
      else
        out.scale.flips.push({
          row: t,
          base: ascending(b.experts),
          other: ascending(s.experts),
          gapBase: gap(b.scores, k),
          gapOther: gap(s.scores, k),
        });
    }
    return out;
  });
}

/** The layer-0 input rows: the scaled token embedding (MoE targets have no per-layer embeddings). */
function embedRows(w: TargetWeights, tokens: readonly number[]): Float64Array {
  if (w.ple) throw new Error('router comparison: per-layer embeddings on a MoE target are not a Gemma 4 variant');
  const H = w.hidden;
  const out = new Float64Array(tokens.length * H);
  tokens.forEach((tok, t) => {
    for (let j = 0; j < H; j++) out[t * H + j] = w.embed.w[tok * H + j] * w.embedScale;
  });
  return out;
}

function gap(scores: Float64Array, k: number): number {
  if (k >= scores.length) return 0;
  const s = Array.from(scores).sort((x, y) => y - x);
  return s[k - 1] - s[k];
}

const ascending = (ids: number[]) => [...ids].sort((x, y) => x - y);
const sameSet = (a: RouterResult, b: RouterResult) => ascending(a.experts).join() === ascending(b.experts).join();
