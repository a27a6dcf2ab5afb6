import { geluTanh, softmaxInPlace, type NormFn } from '../ops.ts';
import { linear } from '../linear.ts';
import type { RefLayer } from './weights.ts';

/** Per-head RMSNorm in place over `numHeads` heads of size d. */
export function headNorm(x: Float64Array, numHeads: number, d: number, w: Float64Array | null, norm: NormFn): void {
  for (let h = 0; h < numHeads; h++) norm(x, h * d, d, w, x, h * d);
}

/**
 * Scaled-dot-product attention of one query row (numHeads x d) over the given keys/values (each numKvHeads x d).
 * Score scale 1.0, no softcap, grouped-query: head j reads KV head floor(j / (numHeads / numKvHeads)).
 * CPU twin of shaders/attention.wgsl (run by src/model/attention-op.ts attention), compared with it in
 * test/gpu/kernels-attention.test.ts (which keys a row reads: test/gpu/helpers/attention.ts).
 */
export function attendRow(
  q: Float64Array,
  keys: readonly Float64Array[],
  values: readonly Float64Array[],
  numHeads: number,
  numKvHeads: number,
  d: number,
): Float64Array {
  const out = new Float64Array(numHeads * d);
  const group = numHeads / numKvHeads;
  const scores = new Float64Array(keys.length);
  for (let h = 0; h < numHeads; h++) {
    const kvh = Math.floor(h / group);
    for (let s = 0; s < keys.length; s++) {
      let dot = 0;
      for (let i = 0; i < d; i++) dot += q[h * d + i] * keys[s][kvh * d + i];
      scores[s] = dot;
    }
    softmaxInPlace(scores, keys.length);
    for (let s = 0; s < keys.length; s++) {
      const p = scores[s];
      for (let i = 0; i < d; i++) out[h * d + i] += p * values[s][kvh * d + i];
    }
  }
  return out;
}

/** Activations of one layer for one row, when captured (docs/MODEL.md section 6 capture points). */
export interface LayerRowCapture {
  /** Attention output after o_proj. */
  attn: Float64Array;
  /** MLP output before the post-feed-forward norm. */
  mlp: Float64Array;
}

/**
 * The residual block of a Gemma 4 decoder layer for one row, given the attention (which differs between
 * target and assistant): h += post_attn_norm(attn(input_norm(h))); h += post_ff_norm(mlp(pre_ff_norm(h)));
 * h *= layer_scalar. Returns the new h and the captures.
 */
export function layerRow(
  l: RefLayer,
  norm: NormFn,
  h: Float64Array,
  attention: (x: Float64Array) => Float64Array,
): { h: Float64Array } & LayerRowCapture {
  const H = h.length;
  const x = norm(h, 0, H, l.inputNorm);
  const attn = linear(l.o, attention(x));
  const a = norm(attn, 0, H, l.postAttnNorm);
  const h1 = new Float64Array(H);
  for (let i = 0; i < H; i++) h1[i] = h[i] + a[i];
  const x2 = norm(h1, 0, H, l.preFfNorm);
  const g = linear(l.gate, x2);
  const u = linear(l.up, x2);
  for (let i = 0; i < g.length; i++) g[i] = geluTanh(g[i]) * u[i];
  const mlp = linear(l.down, g);
  const f = norm(mlp, 0, H, l.postFfNorm);
  const out = new Float64Array(H);
  for (let i = 0; i < H; i++) out[i] = (h1[i] + f[i]) * l.layerScalar;
  return { h: out, attn, mlp };
}
