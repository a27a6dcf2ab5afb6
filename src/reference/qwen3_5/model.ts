/**
 * CPU float64 reference of the Qwen3.5 text model (docs/QWEN35.md section 3): the oracle for the family's
 * tests and error reports. Plain loops in a fixed order.
 *
 * State is explicit (QwenState): per Gated DeltaNet layer the conv window (the last K-1 raw in_proj_qkv rows) and
 * the recurrent state S per value head; per attention layer the K/V of every position. qwenForward runs a block
 * of tokens from the state's position and updates it. Every row goes through exactly the arithmetic of a single
 * step (row-wise matvecs, the conv and the recurrence one token at a time, attention over the keys up to the
 * row), so a block of K tokens leaves the state and produces the logits bit for bit as K one-token calls do.
 */
import { matvec, rmsNorm } from '../ops.ts';
import type { RefLinear } from '../linear.ts';
import type { Qwen35Config } from '../../format/qwen3_5/config.ts';
import type { QwenRefAttentionLayer, QwenRefLinearLayer, QwenRefWeights } from './weights.ts';
import { sigmoid, silu, softplus } from './scalar.ts';
import { convCommit, convSilu, gates, gatedNorm, qkNorm, recurrence, type GdnShape } from './gdn-ops.ts';

/** Gated DeltaNet state of one layer. */
export interface GdnState {
  kind: 'linear';
  /** (K-1) x convDim, row r = raw in_proj_qkv output of position length - (K-1) + r (zeros before the start). */
  conv: Float64Array;
  /** numValueHeads x keyHeadDim x valueHeadDim (transformers' layout [Hv, Dk, Dv]). */
  S: Float64Array;
}

/** K/V of one full-attention layer: per position, numKvHeads * headDim values (keys normed and rotated). */
export interface KvState {
  kind: 'full';
  keys: Float64Array[];
  values: Float64Array[];
}

export interface QwenState {
  /** Tokens consumed: the position of the next token. */
  length: number;
  layers: (GdnState | KvState)[];
}

export function newKvState(): KvState {
  return { kind: 'full', keys: [], values: [] };
}

export function newQwenState(c: Qwen35Config): QwenState {
  const g = c.linear;
  return {
    length: 0,
    layers: c.layerTypes.map((t) =>
      t === 'full' || !g
        ? newKvState()
        : {
            kind: 'linear',
            conv: new Float64Array((g.convKernel - 1) * g.convDim),
            S: new Float64Array(g.numValueHeads * g.keyHeadDim * g.valueHeadDim),
          },
    ),
  };
}

/** A deep copy (snapshot); restoring is using the copy. */
export function cloneQwenState(s: QwenState): QwenState {
  return {
    length: s.length,
    layers: s.layers.map((l) =>
      l.kind === 'linear'
        ? { kind: 'linear', conv: l.conv.slice(), S: l.S.slice() }
        : { kind: 'full', keys: l.keys.map((k) => k.slice()), values: l.values.map((v) => v.slice()) },
    ),
  };
}

// ------------------------------------------------------------------------------------------------ scalar ops
export { silu, sigmoid, softplus };

/** rows x out = rows x in times W^T, row by row. */
export function linearRows(l: RefLinear, x: Float64Array, rows: number): Float64Array {
  const y = new Float64Array(rows * l.out);
  for (let t = 0; t < rows; t++) y.set(matvec(l.w, l.out, l.in, x, t * l.in), t * l.out);
  return y;
}

function normRows(x: Float64Array, rows: number, n: number, w: Float64Array, eps: number): Float64Array {
  const y = new Float64Array(rows * n);
  for (let t = 0; t < rows; t++) rmsNorm(x, t * n, n, w, eps, y, t * n);
  return y;
}

/** Partial RoPE, rotate-half over the first `rot` dims of a head (pairs i, i + rot/2); the rest pass through. */
export class PartialRope {
  readonly invFreq: Float64Array;
  constructor(
    readonly rot: number,
    theta: number,
  ) {
    this.invFreq = new Float64Array(rot / 2);
    for (let i = 0; i < rot / 2; i++) this.invFreq[i] = 1 / theta ** ((2 * i) / rot);
  }
  apply(x: Float64Array, off: number, pos: number): void {
    const half = this.rot / 2;
    for (let i = 0; i < half; i++) {
      const a = pos * this.invFreq[i];
      const c = Math.cos(a);
      const s = Math.sin(a);
      const x1 = x[off + i];
      const x2 = x[off + half + i];
      x[off + i] = x1 * c - x2 * s;
      x[off + half + i] = x2 * c + x1 * s;
    }
  }
}

/** Captured activations by golden name ("act.attn.3"), each rows x width, row-major. */
export type Captures = Map<string, Float64Array>;

// ------------------------------------------------------------------------------------------------ layers
/**
 * Gated full attention over `rows` rows at positions pos0.. (appending their K/V to `kv`): q_proj yields per
 * head [query, gate]; q/k RMSNorm per head; partial RoPE; causal softmax attention (GQA); output * sigmoid(gate);
 * o_proj.
 */
export function gatedAttention(
  L: QwenRefAttentionLayer,
  c: Qwen35Config,
  rope: PartialRope,
  kv: KvState,
  x: Float64Array,
  rows: number,
  pos0: number,
): Float64Array {
  const { numHeads: nh, numKvHeads: nkv, headDim: hd } = c.attention;
  const group = nh / nkv;
  const qg = linearRows(L.qProj, x, rows);
  const k = linearRows(L.kProj, x, rows);
  const v = linearRows(L.vProj, x, rows);
  const out = new Float64Array(rows * nh * hd);
  const scale = hd ** -0.5;
  for (let t = 0; t < rows; t++) {
    const pos = pos0 + t;
    const key = new Float64Array(nkv * hd);
    for (let g = 0; g < nkv; g++) {
      rmsNorm(k, (t * nkv + g) * hd, hd, L.kNorm, c.eps, key, g * hd);
      rope.apply(key, g * hd, pos);
    }
    kv.keys.push(key);
    kv.values.push(v.slice(t * nkv * hd, (t + 1) * nkv * hd));
    const n = kv.keys.length; // this row attends to every stored key up to and including itself
    const q = new Float64Array(hd);
    const p = new Float64Array(n);
    for (let h = 0; h < nh; h++) {
      const base = (t * nh + h) * 2 * hd;
      rmsNorm(qg, base, hd, L.qNorm, c.eps, q, 0);
      rope.apply(q, 0, pos);
      const g = Math.floor(h / group);
      let m = -Infinity;
      for (let j = 0; j < n; j++) {
        const kj = kv.keys[j];
        let s = 0;
        for (let i = 0; i < hd; i++) s += q[i] * kj[g * hd + i];
        p[j] = s * scale;
        if (p[j] > m) m = p[j];
      }
      let sum = 0;
      for (let j = 0; j < n; j++) {
        p[j] = Math.exp(p[j] - m);
        sum += p[j];
      }
      const o = (t * nh + h) * hd;
      for (let j = 0; j < n; j++) {
        const w = p[j] / sum;
        const vj = kv.values[j];
        for (let i = 0; i < hd; i++) out[o + i] += w * vj[g * hd + i];
      }
      for (let i = 0; i < hd; i++) out[o + i] *= sigmoid(qg[base + hd + i]);
    }
  }
  return linearRows(L.oProj, out, rows);
}

/**
 * Gated DeltaNet over `rows` rows (docs/QWEN35.md section 3.2): in_proj_qkv -> causal depthwise conv (window =
 * state + row) -> SiLU -> split q, k, v; q, k L2-normalised (eps 1e-6 on the sum of squares), q scaled by
 * Dk^-0.5; beta = sigmoid(b), g = exp(-exp(A_log) * softplus(a + dt_bias)); per value head (key head h / (Hv /
 * Hk)): S <- g S; delta = (v - S^T k) beta; S <- S + k delta^T; o = S^T q; RMSNormGated(o) * silu(z); out_proj.
 */
export function gatedDeltaNet(
  L: QwenRefLinearLayer,
  c: Qwen35Config,
  st: GdnState,
  x: Float64Array,
  rows: number,
  cap?: { conv?: Float64Array; recurrence?: Float64Array; gatedNorm?: Float64Array },
): Float64Array {
  const g = c.linear!;
  const shape: GdnShape = {
    C: g.convDim,
    K: g.convKernel,
    Hk: g.numKeyHeads,
    Hv: g.numValueHeads,
    Dk: g.keyHeadDim,
    Dv: g.valueHeadDim,
  };
  const qkv = linearRows(L.inProjQkv, x, rows);
  const z = linearRows(L.inProjZ, x, rows);
  const b = linearRows(L.inProjB, x, rows);
  const a = linearRows(L.inProjA, x, rows);
  // One op after the other over the rows, each row's arithmetic that of a single step (gdn-ops.ts, which the
  // GPU kernels mirror): the conv reads the window the row sees, the recurrence runs token after token.
  const conv = convSilu(st.conv, qkv, L.conv, rows, shape);
  if (shape.K > 1) st.conv.set(convCommit(st.conv, qkv, rows, shape));
  const qk = qkNorm(conv, rows, shape);
  const gb = gates(a, b, L.aLog, L.dtBias, rows, shape.Hv);
  const { o } = recurrence(st.S, qk, conv, gb, rows, shape);
  const y = gatedNorm(o, z, L.gatedNorm, rows * shape.Hv, shape.Dv, c.eps);
  cap?.conv?.set(conv);
  cap?.recurrence?.set(o);
  cap?.gatedNorm?.set(y);
  return linearRows(L.outProj, y, rows);
}

/** down(silu(gate x) * up x). */
export function mlpRows(L: { gate: RefLinear; up: RefLinear; down: RefLinear }, x: Float64Array, rows: number) {
  const g = linearRows(L.gate, x, rows);
  const u = linearRows(L.up, x, rows);
  for (let i = 0; i < g.length; i++) g[i] = silu(g[i]) * u[i];
  return linearRows(L.down, g, rows);
}

/** A full-attention decoder layer (target's or the MTP head's): x + attn(norm x), then + mlp(norm). */
export function attentionDecoderLayer(
  L: QwenRefAttentionLayer,
  c: Qwen35Config,
  rope: PartialRope,
  kv: KvState,
  x: Float64Array,
  rows: number,
  pos0: number,
  caps?: { attn?: (a: Float64Array) => void; mlp?: (m: Float64Array) => void },
): Float64Array {
  const H = c.hidden;
  const m = gatedAttention(L, c, rope, kv, normRows(x, rows, H, L.inputNorm, c.eps), rows, pos0);
  caps?.attn?.(m);
  const h = x.slice();
  for (let i = 0; i < h.length; i++) h[i] += m[i];
  const f = mlpRows(L, normRows(h, rows, H, L.postAttnNorm, c.eps), rows);
  caps?.mlp?.(f);
  for (let i = 0; i < h.length; i++) h[i] += f[i];
  return h;
}

export interface QwenForwardResult {
  rows: number;
  /** rows x vocab */
  logits: Float64Array;
  /** rows x hidden: the final norm's output (what the LM head scores and the MTP head reads). */
  hidden: Float64Array;
  /** Present when `capture` was asked: act.attn.i, act.mlp.i, act.layer.i, act.gdn.{conv,recurrence,gated_norm}.i, act.final_norm. */
  acts?: Captures;
}

export function ropeOf(c: Qwen35Config): PartialRope {
  return new PartialRope(c.attention.rope.rotaryDim, c.attention.rope.theta);
}

/** Embedding rows of `tokens` (rows x hidden). */
export function embedRows(w: QwenRefWeights, tokens: readonly number[]): Float64Array {
  const H = w.hidden;
  const x = new Float64Array(tokens.length * H);
  tokens.forEach((tok, t) => {
    if (!Number.isInteger(tok) || tok < 0 || tok >= w.vocab)
      throw new Error(`token ${tok} outside the vocabulary (${w.vocab})`);
    x.set(w.embed.w.subarray(tok * H, (tok + 1) * H), t * H);
  });
  return x;
}

/** Runs `tokens` from position state.length, updating `state` in place. */
export function qwenForward(
  w: QwenRefWeights,
  state: QwenState,
  tokens: readonly number[],
  opts: { capture?: boolean } = {},
): QwenForwardResult {
  const c = w.config;
  const H = w.hidden;
  const T = tokens.length;
  const rope = ropeOf(c);
  const acts: Captures | undefined = opts.capture ? new Map() : undefined;
  let x = embedRows(w, tokens);
  const pos0 = state.length;
  w.layers.forEach((L, i) => {
    const st = state.layers[i];
    if (L.type === 'full') {
      if (st.kind !== 'full') throw new Error(`state of layer ${i} is not a KV cache`);
      x = attentionDecoderLayer(L, c, rope, st, x, T, pos0, {
        attn: (m) => acts?.set(`act.attn.${i}`, m),
        mlp: (m) => acts?.set(`act.mlp.${i}`, m),
      });
    } else {
      if (st.kind !== 'linear') throw new Error(`state of layer ${i} is not a Gated DeltaNet state`);
      const g = c.linear!;
      const cap = acts
        ? {
            conv: new Float64Array(T * g.convDim),
            recurrence: new Float64Array(T * g.valueDim),
            gatedNorm: new Float64Array(T * g.valueDim),
          }
        : undefined;
      const m = gatedDeltaNet(L, c, st, normRows(x, T, H, L.inputNorm, c.eps), T, cap);
      const h = x.slice();
      for (let j = 0; j < h.length; j++) h[j] += m[j];
      const f = mlpRows(L, normRows(h, T, H, L.postAttnNorm, c.eps), T);
      for (let j = 0; j < h.length; j++) h[j] += f[j];
      x = h;
      if (acts && cap) {
        acts.set(`act.attn.${i}`, m);
        acts.set(`act.mlp.${i}`, f);
        acts.set(`act.gdn.conv.${i}`, cap.conv);
        acts.set(`act.gdn.recurrence.${i}`, cap.recurrence);
        acts.set(`act.gdn.gated_norm.${i}`, cap.gatedNorm);
      }
    }
    acts?.set(`act.layer.${i}`, x);
  });
  state.length += T;
  const hidden = normRows(x, T, H, w.finalNorm, c.eps);
  acts?.set('act.final_norm', hidden);
  return { rows: T, logits: linearRows(w.lmHead, hidden, T), hidden, acts };
}

export function argmaxRow(v: Float64Array, row: number, n: number): number {
  let best = 0;
  for (let i = 1; i < n; i++) if (v[row * n + i] > v[row * n + best]) best = i;
  return best;
}

export interface QwenGreedyResult {
  tokens: number[];
  /** n x vocab: the logits that chose tokens[j] (row 0 from the prefill). */
  logits: Float64Array;
  state: QwenState;
}

/** Prefill the prompt, then `n - 1` one-token steps: classic greedy decoding with the state. */
export function qwenGreedy(w: QwenRefWeights, prompt: readonly number[], n: number): QwenGreedyResult {
  const state = newQwenState(w.config);
  const V = w.vocab;
  const logits = new Float64Array(n * V);
  let r = qwenForward(w, state, prompt);
  const tokens: number[] = [];
  for (let j = 0; j < n; j++) {
    if (j > 0) r = qwenForward(w, state, [tokens[j - 1]]);
    const row = r.logits.subarray((r.rows - 1) * V, r.rows * V);
    logits.set(row, j * V);
    tokens.push(argmaxRow(row, 0, V));
  }
  return { tokens, logits, state };
}
