/**
 * CPU float64 reference of the Qwen3.5 MTP head (docs/QWEN35.md section 4), following vLLM's qwen3_5_mtp.py
 * (Qwen3_5MultiTokenPredictor) and its proposer: for a row that pairs token x_{p+1} with the target's hidden h_p
 * (the post-final-norm hidden, as vLLM's target forward returns it), at RoPE position p:
 *   e = RMSNorm(embed(x_{p+1}), pre_fc_norm_embedding); h = RMSNorm(h_p, pre_fc_norm_hidden)
 *   x = fc([e, h]); x = full-attention decoder layer (own KV cache); out = RMSNorm(x, norm); logits = lm_head(out)
 * Deeper drafts feed the head's own `out` back, one position further, reusing the one layer.
 */
import { rmsNorm } from '../ops.ts';
import { argmaxRow, attentionDecoderLayer, embedRows, linearRows, newKvState, ropeOf, type KvState } from './model.ts';
import type { QwenRefMtpHead, QwenRefWeights } from './weights.ts';

/** The head's KV cache: one entry per row it has run, in order. */
export interface QwenMtpState {
  kv: KvState;
}

export function newQwenMtpState(): QwenMtpState {
  return { kv: newKvState() };
}

export function cloneQwenMtpState(s: QwenMtpState): QwenMtpState {
  return { kv: { kind: 'full', keys: s.kv.keys.map((k) => k.slice()), values: s.kv.values.map((v) => v.slice()) } };
}

export interface QwenMtpResult {
  rows: number;
  /** rows x vocab */
  logits: Float64Array;
  /** rows x hidden: the head's post-norm hidden (fed to the next draft). */
  hidden: Float64Array;
}

function headOf(w: QwenRefWeights, head?: QwenRefMtpHead): QwenRefMtpHead {
  const h = head ?? w.mtp;
  if (!h) throw new Error("this Qwen3.5 checkpoint has no MTP head (see the description's mtpUnavailable)");
  return h;
}

/**
 * Runs the head over rows j = 0..n-1: token tokens[j] with hidden rows hiddens[j] at RoPE position pos0 + j,
 * appending to the head's KV cache. Row by row, so a block equals single rows bit for bit.
 */
export function qwenMtpForward(
  w: QwenRefWeights,
  st: QwenMtpState,
  tokens: readonly number[],
  hiddens: Float64Array,
  pos0: number,
  head?: QwenRefMtpHead,
): QwenMtpResult {
  const m = headOf(w, head);
  const c = w.config;
  const H = w.hidden;
  const n = tokens.length;
  if (hiddens.length !== n * H) throw new Error(`MTP head: ${n} tokens but ${hiddens.length / H} hidden rows`);
  const e = embedRows(w, tokens);
  const cat = new Float64Array(n * 2 * H);
  for (let j = 0; j < n; j++) {
    rmsNorm(e, j * H, H, m.preFcNormEmbedding, c.eps, cat, j * 2 * H);
    rmsNorm(hiddens, j * H, H, m.preFcNormHidden, c.eps, cat, j * 2 * H + H);
  }
  const x = attentionDecoderLayer(m.layer, c, ropeOf(c), st.kv, linearRows(m.fc, cat, n), n, pos0);
  const hidden = new Float64Array(n * H);
  for (let j = 0; j < n; j++) rmsNorm(x, j * H, H, m.norm, c.eps, hidden, j * H);
  return { rows: n, logits: linearRows(w.lmHead, hidden, n), hidden };
}

export interface QwenMtpDraft {
  tokens: number[];
  /** steps x vocab */
  logits: Float64Array;
  /** steps x hidden: the head's post-norm hidden that produced each draft. */
  hidden: Float64Array;
  /** T x hidden: the head's hidden over the prompt rows. */
  promptHidden: Float64Array;
  state: QwenMtpState;
}

/**
 * vLLM's proposer after a prefill of `prompt` (T tokens) whose target post-final-norm hidden rows are
 * `targetHidden` (T x hidden) and whose greedy next token is `bonus`: the head runs over the T prompt rows
 * (row p pairs token p+1, the bonus for p = T-1, with hidden p, at position p), then drafts `steps` tokens,
 * draft j+1 from draft j and the head's own hidden at position T-1+j.
 */
export function qwenMtpDraft(
  w: QwenRefWeights,
  prompt: readonly number[],
  targetHidden: Float64Array,
  bonus: number,
  steps: number,
  head?: QwenRefMtpHead,
): QwenMtpDraft {
  const T = prompt.length;
  const H = w.hidden;
  const V = w.vocab;
  const st = newQwenMtpState();
  const first = qwenMtpForward(w, st, [...prompt.slice(1), bonus], targetHidden, 0, head);
  const tokens: number[] = [];
  const logits = new Float64Array(steps * V);
  const hidden = new Float64Array(steps * H);
  let l = first.logits.subarray((T - 1) * V, T * V);
  let h = first.hidden.subarray((T - 1) * H, T * H);
  for (let j = 0; j < steps; j++) {
    const tok = argmaxRow(l, 0, V);
    tokens.push(tok);
    logits.set(l, j * V);
    hidden.set(h, j * H);
    if (j + 1 < steps) {
      const r = qwenMtpForward(w, st, [tok], h.slice(), T + j, head);
      l = r.logits;
      h = r.hidden;
    }
  }
  return { tokens, logits, hidden, promptHidden: first.hidden, state: st };
}
