/**
 * The Gemma 4 family's CPU reference parts (src/reference/gemma4: the member layer, KV sharing, e-series/, moe/) on small random weights: the
 * documented formulas (docs/GEMMA4-FAMILY.md) written a second time, directly, against the reference functions.
 */
import { describe, expect, it } from 'vitest';
import type { LayerType } from '../../src/format/layer-type.ts';
import { layerRow } from '../../src/reference/gemma4/layer.ts';
import { geluTanh, makeNorm, rmsNorm } from '../../src/reference/ops.ts';
import type { RefLinear } from '../../src/reference/linear.ts';
import type { RefLayer } from '../../src/reference/gemma4/weights.ts';
import {
  DTYPE_MIN,
  SharedKvCache,
  cacheOwners,
  centroidHead,
  expertsRow,
  familyConstant,
  familyConstants,
  familyLayerRow,
  kvDonors,
  mlpWidth,
  moeBlockRow,
  perLayerInputs,
  pleContribution,
  routeRow,
  storedKvLayers,
  type MoeWeights,
  type PleLayerWeights,
  type PleModelWeights,
} from '../../src/reference/gemma4/index.ts';

/** mulberry32 + Box-Muller: deterministic normal samples. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  const u = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return () => Math.sqrt(-2 * Math.log(u() + 1e-300)) * Math.cos(2 * Math.PI * u());
}

const vec = (r: () => number, n: number, scale = 1, shift = 0) =>
  Float64Array.from({ length: n }, () => shift + scale * r());
const lin = (r: () => number, out: number, inF: number, scale = 1 / Math.sqrt(inF)): RefLinear => ({
  out,
  in: inF,
  w: vec(r, out * inF, scale),
});
const matvec = (l: RefLinear, x: ArrayLike<number>) =>
  Float64Array.from({ length: l.out }, (_, o) => {
    let s = 0;
    for (let i = 0; i < l.in; i++) s += l.w[o * l.in + i] * x[i];
    return s;
  });
const maxAbs = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
};
const eps = 1e-6;
const norm = makeNorm(eps, 'exact');
const rms = (x: ArrayLike<number>, w: ArrayLike<number> | null) => {
  let ss = 0;
  for (let i = 0; i < x.length; i++) ss += x[i] * x[i];
  const r = 1 / Math.sqrt(ss / x.length + eps);
  return Float64Array.from(x, (v, i) => v * r * (w ? w[i] : 1));
};

function denseLayer(r: () => number, H: number, I: number, scalar: number): RefLayer {
  return {
    index: 0,
    type: 'sliding',
    headDim: 8,
    numHeads: 1,
    numKvHeads: 1,
    kEqV: false,
    rope: { ropeType: 'default', theta: 10000, partialRotary: 1 } as any,
    inputNorm: vec(r, H, 0.25, 1),
    q: lin(r, 8, H),
    k: null,
    v: null,
    o: lin(r, H, 8),
    qNorm: vec(r, 8, 0.25, 1),
    kNorm: null,
    postAttnNorm: vec(r, H, 0.25, 1),
    preFfNorm: vec(r, H, 0.25, 1),
    gate: lin(r, I, H),
    up: lin(r, I, H),
    down: lin(r, H, I),
    postFfNorm: vec(r, H, 0.25, 1),
    layerScalar: scalar,
  };
}

describe('family constants: the bf16 values MLX multiplies in', () => {
  it('rounds each scalar to bf16 (mode mlx) or keeps it (exact)', () => {
    expect(familyConstant(2 ** -0.5)).toBe(0.70703125);
    expect(familyConstant(Math.sqrt(3840))).toBe(62);
    const e2b = familyConstants(1536, 256);
    expect(e2b).toEqual({
      embedScale: 39.25,
      pleTableScale: 16,
      pleProjectionScale: 0.0255126953125,
      pleInputScale: 0.70703125,
      routerRootSize: 0.0255126953125,
    });
    expect(familyConstants(2560, 256).embedScale).toBe(50.5);
    expect(familyConstants(2560, 256).pleProjectionScale).toBe(0.019775390625);
    expect(familyConstants(2816, 0).routerRootSize).toBe(0.018798828125);
    expect(familyConstants(2816, 0).embedScale).toBe(53);
    expect(familyConstants(1536, 256, 'exact').pleInputScale).toBe(2 ** -0.5);
  });
});

describe('KV sharing: which layers read which cache', () => {
  const types = (n: number, pattern: number): LayerType[] =>
    Array.from({ length: n }, (_, i) => ((i + 1) % pattern ? 'sliding' : 'full') as LayerType);

  it('E2B: 35 layers (4 sliding : 1 full), the last 20 read layer 13 (sliding) or 14 (full)', () => {
    const t = types(35, 5);
    const d = kvDonors(t, 20);
    for (let i = 0; i < 15; i++) expect(d[i]).toBe(i);
    for (let i = 15; i < 35; i++) expect(d[i]).toBe(t[i] === 'sliding' ? 13 : 14);
    expect(cacheOwners(35, 20)).toHaveLength(15);
    expect(storedKvLayers(t, 20)).toEqual({ sliding: 13, full: 14 });
    expect(mlpWidth(14, 35, 20, 6144, true)).toBe(6144);
    expect(mlpWidth(15, 35, 20, 6144, true)).toBe(12288);
  });

  it('E4B: 42 layers (5 : 1), the last 18 read layer 22 (sliding) or 23 (full); no double-wide MLP', () => {
    const t = types(42, 6);
    const d = kvDonors(t, 18);
    expect(d.slice(24).every((x, j) => x === (t[24 + j] === 'sliding' ? 22 : 23))).toBe(true);
    expect(mlpWidth(30, 42, 18, 10240, false)).toBe(10240);
  });

  it('an all-shared model (an assistant) has no donors of its own and never a double-wide MLP', () => {
    const t: LayerType[] = ['sliding', 'sliding', 'sliding', 'full'];
    expect(() => kvDonors(t, 4)).toThrow(/no earlier sliding layer/);
    expect(mlpWidth(2, 4, 4, 8192, true)).toBe(8192);
    expect(storedKvLayers(types(6, 6), 0)).toEqual({ sliding: 4, full: 5 });
  });

  it('SharedKvCache: owners append, shared layers read their donor, rollback truncates owners', () => {
    const t = types(10, 5); // s s s s f s s s s f, last 4 shared: donors 5 (sliding), 4 (full)
    const c = new SharedKvCache(t, 4);
    const row = (x: number) => Float64Array.of(x);
    for (let p = 0; p < 3; p++) for (let l = 0; l < 6; l++) c.append(l, row(100 * l + p), row(-p));
    expect(() => c.append(7, row(0), row(0))).toThrow(/KV-shared/);
    expect(c.kv(7).keys.map((k) => k[0])).toEqual([500, 501, 502]);
    expect(c.kv(9).keys).toBe(c.keys[4]);
    c.truncate(2);
    expect(c.kv(8).keys).toHaveLength(2);
  });
});

describe('per-layer embeddings', () => {
  const r = rng(7);
  const L = 3,
    P = 8,
    H = 16,
    V = 11;
  const w: PleModelWeights = {
    numLayers: L,
    ple: P,
    hidden: H,
    table: lin(r, V, L * P, 0.05),
    modelProjection: lin(r, L * P, H),
    projectionNorm: vec(r, P, 0.25, 1),
  };
  const c = familyConstants(H, P);
  const tok = 7;
  const emb = vec(r, H, 0.05 * c.embedScale);

  it('combines the scaled table row and the normalised projection of the scaled embedding, x 2^-0.5', () => {
    const got = perLayerInputs(w, tok, emb, norm, c);
    const proj = matvec(w.modelProjection, emb);
    for (let l = 0; l < L; l++) {
      const slice = Array.from({ length: P }, (_, i) => proj[l * P + i] * c.pleProjectionScale);
      const n = rms(slice, w.projectionNorm);
      for (let i = 0; i < P; i++) {
        const table = w.table.w[tok * L * P + l * P + i] * c.pleTableScale;
        expect(Math.abs(got[l * P + i] - (n[i] + table) * 0.70703125)).toBeLessThan(1e-14);
      }
    }
    expect(c.pleTableScale).toBe(2.828125); // bf16(sqrt(8)): P = 8 here; P = 256 gives exactly 16
  });

  it('gates the slice into the residual after the MLP, before the layer scalar', () => {
    const inputs = perLayerInputs(w, tok, emb, norm, c);
    const lw: PleLayerWeights = { gate: lin(r, P, H), projection: lin(r, H, P), postNorm: vec(r, H, 0.25, 1) };
    const base = denseLayer(r, H, 24, 0.75);
    const attention = (x: Float64Array) => Float64Array.from({ length: 8 }, (_, i) => Math.sin(x[i] + i));
    const h = vec(r, H);
    const got = familyLayerRow({ ...base, ple: lw }, norm, h, attention, { pleInputs: { inputs, off: P } });
    const h2 = layerRow({ ...base, layerScalar: 1 }, norm, h, attention).h; // dense layer without the scalar
    const g = matvec(lw.gate, h2).map((v, i) => geluTanh(v) * inputs[P + i]);
    const contrib = rms(matvec(lw.projection, g), lw.postNorm);
    const want = h2.map((v, i) => (v + contrib[i]) * 0.75);
    expect(maxAbs(got.h, want)).toBeLessThan(1e-13);
    expect(maxAbs(got.ple!, pleContribution(lw, h2, inputs, P, norm))).toBe(0);
  });
});

describe('MoE block', () => {
  const r = rng(11);
  const H = 16,
    I = 8,
    E = 8,
    K = 4;
  const w: MoeWeights = {
    numExperts: E,
    topK: K,
    routerProj: lin(r, E, H, 2),
    routerScale: vec(r, H, 0.25, 1),
    perExpertScale: Float64Array.from({ length: E }, (_, i) => 0.5 + i / E),
    gate: Array.from({ length: E }, () => lin(r, I, H)),
    up: Array.from({ length: E }, () => lin(r, I, H)),
    down: Array.from({ length: E }, () => lin(r, H, I)),
    preFfNorm2: vec(r, H, 0.25, 1),
    postFfNorm1: vec(r, H, 0.25, 1),
    postFfNorm2: vec(r, H, 0.25, 1),
  };
  const root = familyConstants(H, 0).routerRootSize;
  const rows = Array.from({ length: 64 }, () => vec(r, H, 3));

  it('transformers order: softmax over all experts, top-k, renormalised, x per_expert_scale', () => {
    for (const h of rows.slice(0, 8)) {
      const t = routeRow(w, h, norm, { order: 'transformers', rootSize: root });
      const x = rms(h, null).map((v, i) => v * w.routerScale[i] * root);
      const s = matvec(w.routerProj, x);
      expect(maxAbs(t.scores, s)).toBeLessThan(1e-13);
      const m = Math.max(...s);
      const z = s.reduce((a, v) => a + Math.exp(v - m), 0);
      const p = s.map((v) => Math.exp(v - m) / z);
      const top = [...p.keys()].sort((a, b) => p[b] - p[a]).slice(0, K);
      expect(t.experts).toEqual(top);
      const sp = top.reduce((a, e) => a + p[e], 0);
      top.forEach((e, j) => expect(Math.abs(t.weights[j] - (p[e] / sp) * w.perExpertScale[e])).toBeLessThan(1e-15));
    }
  });

  it('MLX order: top-k of the raw scores, softmax over the k, x per_expert_scale', () => {
    for (const h of rows.slice(0, 8)) {
      const m = routeRow(w, h, norm, { order: 'mlx', rootSize: root });
      const wv = w.routerScale.map((s) => s * root);
      const s = matvec(w.routerProj, rms(h, wv));
      expect(maxAbs(m.scores, s)).toBeLessThan(1e-13);
      const top = [...s.keys()].sort((a, b) => s[b] - s[a]).slice(0, K);
      expect(m.experts).toEqual(top);
      const mx = Math.max(...top.map((e) => s[e]));
      const z = top.reduce((a, e) => a + Math.exp(s[e] - mx), 0);
      top.forEach((e, j) =>
        expect(Math.abs(m.weights[j] - (Math.exp(s[e] - mx) / z) * w.perExpertScale[e])).toBeLessThan(1e-15),
      );
    }
  });

  it('the two orders choose the same experts and agree within 1e-12 (not necessarily bit for bit)', () => {
    let worst = 0;
    let bitEqual = 0;
    for (const h of rows) {
      const t = routeRow(w, h, norm, { order: 'transformers', rootSize: root, scaleProduct: 'transformers' });
      const m = routeRow(w, h, norm, { order: 'mlx', rootSize: root, scaleProduct: 'transformers' });
      expect(m.experts).toEqual(t.experts);
      worst = Math.max(worst, maxAbs(m.weights, t.weights));
      if (m.weights.every((v, j) => v === t.weights[j])) bitEqual++;
    }
    expect(worst).toBeLessThan(1e-12);
    expect(bitEqual).toBeLessThan(rows.length); // the orders really are different computations
  });

  it('MLX bf16 scale product: the weight vector is bf16(scale x root)', () => {
    const a = routeRow(w, rows[0], norm, { order: 'mlx', rootSize: root, scaleProduct: 'mlx-bf16' });
    const wv = w.routerScale.map((s) => familyConstant(s * root));
    expect(maxAbs(a.scores, matvec(w.routerProj, rmsNorm(rows[0], 0, H, wv, eps)))).toBe(0);
  });

  it('experts: the weighted sum of down(gelu(gate x) * up x), in either summation order', () => {
    const h = rows[3];
    const route = routeRow(w, h, norm, { rootSize: root });
    const x = rms(h, w.preFfNorm2);
    const a = expertsRow(w, x, route, 'expert-ascending');
    const b = expertsRow(w, x, route, 'selection');
    const want = new Float64Array(H);
    route.experts.forEach((e, j) => {
      const g = matvec(w.gate[e], x).map((v, i) => geluTanh(v) * matvec(w.up[e], x)[i]);
      matvec(w.down[e], g).forEach((v, i) => (want[i] += route.weights[j] * v));
    });
    expect(maxAbs(a, want)).toBeLessThan(1e-13);
    expect(maxAbs(b, want)).toBeLessThan(1e-13);
  });

  it('the block: h1 + post_ff_norm(post_ff_norm_1(dense) + post_ff_norm_2(experts)), router on h1', () => {
    const base = denseLayer(r, H, 12, 1);
    const h1 = rows[5];
    const dense = (x: Float64Array) => {
      const g = matvec(base.gate, x).map((v, i) => geluTanh(v) * matvec(base.up, x)[i]);
      return matvec(base.down, g);
    };
    const got = moeBlockRow(w, base, dense, h1, norm, { rootSize: root });
    const d = rms(dense(rms(h1, base.preFfNorm)), w.postFfNorm1);
    const route = routeRow(w, h1, norm, { rootSize: root });
    const e = rms(expertsRow(w, rms(h1, w.preFfNorm2), route), w.postFfNorm2);
    const f = rms(
      d.map((v, i) => v + e[i]),
      base.postFfNorm,
    );
    expect(
      maxAbs(
        got.h,
        h1.map((v, i) => v + f[i]),
      ),
    ).toBeLessThan(1e-13);
    expect(got.route.experts).toEqual(route.experts);
  });
});

describe('centroid LM head', () => {
  const r = rng(5);
  const V = 64,
    C = 8,
    h = 12,
    K = 2;
  const perm = Int32Array.from([...Array(V).keys()].map((i) => (i * 37 + 11) % V)); // a permutation (37 odd)
  const w = { centroids: lin(r, C, h, 1), tokenOrdering: perm, embed: lin(r, V, h, 1), topK: K };
  const x = vec(r, h, 2);

  it('selects the token_ordering slices of the top clusters and scores them against the tied embedding', () => {
    const res = centroidHead(w, x);
    const c = matvec(w.centroids, x);
    const top = [...c.keys()].sort((a, b) => c[b] - c[a]).slice(0, K);
    expect(res.clusters).toEqual(top);
    const want = top.flatMap((k) => [...perm.subarray(k * 8, k * 8 + 8)]);
    expect([...res.selected]).toEqual(want);
    want.forEach((t, j) => {
      const s = matvec({ out: 1, in: h, w: w.embed.w.subarray(t * h, (t + 1) * h) }, x)[0];
      expect(Math.abs(res.selectedLogits[j] - s)).toBeLessThan(1e-14);
      expect(res.logits[t]).toBe(res.selectedLogits[j]);
    });
    const best = want[[...res.selectedLogits.keys()].sort((a, b) => res.selectedLogits[b] - res.selectedLogits[a])[0]];
    expect(res.token).toBe(best);
  });

  it('fills the rest with min - 1 (transformers, mlx-vlm) or the dtype minimum (vLLM); same argmax', () => {
    const a = centroidHead(w, x, 'min-minus-one');
    const b = centroidHead(w, x, DTYPE_MIN.bf16);
    const sel = new Set(a.selected);
    const min = Math.min(...a.selectedLogits);
    for (let t = 0; t < V; t++) {
      if (sel.has(t)) continue;
      expect(a.logits[t]).toBe(min - 1);
      expect(b.logits[t]).toBe(-3.3895313892515355e38);
    }
    const argmax = (v: Float64Array) => v.indexOf(Math.max(...v));
    expect(argmax(a.logits)).toBe(a.token);
    expect(argmax(b.logits)).toBe(a.token);
    expect(b.token).toBe(a.token);
  });
});
