import { readMany, storageBuffer, uploadBuffer } from '../../gpu/buffers.ts';
import type { DraftSource } from '../generate.ts';
import * as op from '../ops.ts';
import { EXACT } from '../policy.ts';
import { CaptureSet, type Phase } from './engine.ts';
import type { KvLayerState } from './state.ts';
import type { QwenTargetModel } from './target.ts';
import type { QwenGpuMtpHead } from './weights.ts';

/**
 * The Qwen3.5 MTP head on the GPU (docs/QWEN35.md section 4, vLLM's qwen3_5_mtp.py): for rows that pair token
 * x_{p+1} with the target's post-final-norm hidden h_p at RoPE position p,
 *   x = fc([RMSNorm(embed(x_{p+1}), pre_fc_norm_embedding), RMSNorm(h_p, pre_fc_norm_hidden)])
 *   x = the full-attention decoder layer mtp.layers.0 (its own KV cache, row = position)
 *   out = RMSNorm(x, mtp.norm); logits = the target's lm_head(out).
 * It runs on the target's engine (same workspace, pipelines and layer program), between target forwards. Its
 * KV rows are written at their positions, so a forward at an earlier position is the rollback (as the
 * target's full-attention layers). CPU twin: src/reference/qwen3_5/mtp.ts; tests: test/gpu/qwen-mtp.test.ts.
 */
export interface MtpResult {
  /** rows x vocab */
  logits: Float32Array;
  argmax: Uint32Array;
  /** rows x hidden: the head's post-norm hidden, which feeds the next draft. */
  hidden: Float32Array;
}

export class QwenMtpHead {
  private readonly w: QwenGpuMtpHead;
  private readonly kv: KvLayerState;
  /** [rows, 2 hidden]: the fc input, [normed embedding, normed hidden] per row. */
  private readonly cat: GPUBuffer;

  constructor(private readonly target: QwenTargetModel) {
    const d = target.desc;
    if (!target.weights.mtp)
      throw new Error(`this Qwen3.5 checkpoint has no MTP head: ${d.mtpUnavailable ?? 'no mtp.* tensors'}`);
    this.w = target.weights.mtp;
    const dev = target.engine.device;
    const { numKvHeads, headDim } = d.config.attention;
    const rowBytes = numKvHeads * headDim * 4;
    this.kv = {
      kind: 'full',
      k: storageBuffer(dev, target.opts.maxContext * rowBytes, 'mtp.k'),
      v: storageBuffer(dev, target.opts.maxContext * rowBytes, 'mtp.v'),
    };
    this.cat = storageBuffer(dev, target.engine.opts.rows * 2 * d.hidden * 4, 'mtp.cat');
  }

  /**
   * Rows j = 0..n-1: token tokens[j] with target hidden row j of `hidden` at position pos0 + j. 'prefill'
   * for the prompt pass (both arms of a comparison run it alike), 'step' for drafts and verify catch-up.
   */
  async forward(tokens: number[], hidden: Float32Array, pos0: number, phase: Phase = 'step'): Promise<MtpResult> {
    const e = this.target.engine;
    const H = this.target.desc.hidden;
    const n = tokens.length;
    if (hidden.length !== n * H) throw new Error(`MTP head: ${n} tokens but ${hidden.length / H} hidden rows`);
    if (n > e.opts.rows || (phase === 'step' && n > e.opts.maxBlock))
      throw new Error(`MTP head: ${n} rows exceed the workspace`);
    if (pos0 + n > this.target.opts.maxContext) throw new Error(`MTP head: position ${pos0 + n} exceeds maxContext`);
    const rows: op.Rows = { M: n, round: e.opts.round, prefill: phase === 'prefill', split: 0 };
    const { ws } = e;
    const rec = e.recorder('mtp');
    const hin = uploadBuffer(e.device, hidden, 'mtp.hidden-in'); // written before this submit runs
    rec.temporaries.push(hin);
    e.embed(rec, this.target.weights.embed, tokens, rows);
    e.norm(rec, ws.h, this.w.preFcNormEmbedding, ws.xn, n, H);
    e.norm(rec, hin, this.w.preFcNormHidden, ws.y, n, H);
    for (let j = 0; j < n; j++) {
      rec.copy(ws.xn, j * H * 4, this.cat, j * 2 * H * 4, H * 4);
      rec.copy(ws.y, j * H * 4, this.cat, (j * 2 + 1) * H * 4, H * 4);
    }
    op.matmul(rec, this.w.fc, this.cat, ws.h, rows);
    const caps = new CaptureSet(e.device, rec, undefined);
    e.layer(rec, 0, this.w.layer, this.kv, { M: n, p: pos0, phase, rows, policy: EXACT, caps });
    e.norm(rec, ws.h, this.w.norm, ws.y, n, H);
    e.submit(rec);
    const [y] = await readMany(e.device, [{ buffer: ws.y, bytes: n * H * 4 }]);
    const out = new Float32Array(y.buffer, y.byteOffset, n * H).slice();
    const head = await e.head(this.target.weights.lmHead, 0, n, 0);
    await e.checkErrors(`running the MTP head over ${n} rows at position ${pos0}`);
    return { logits: head.logits, argmax: head.argmax, hidden: out };
  }

  destroy(): void {
    [this.kv.k, this.kv.v, this.cat].forEach((b) => b.destroy());
  }
}

/**
 * The head as generation's draft source (vLLM's proposer): accept() runs the head over the positions the
 * target just consumed, pairing each with its next token and the target's hidden (after the prefill: every
 * prompt row; after a verify: the accepted rows, overwriting the KV rows the drafts
 * wrote there); draft() takes the first draft from the last of those rows and each further one from the
 * head's own hidden, one position on.
 */
export function qwenHeadSource(head: QwenMtpHead, maxBlock: number): DraftSource {
  let last: { argmax: number; hidden: Float32Array; pos: number } | undefined;
  return {
    name: 'qwen-mtp-head',
    async accept(next, hidden, pos0) {
      const H = hidden.length / next.length;
      // in verify-sized pieces (the prompt pass may be longer): rows are row-invariant, so the split is free
      let r: MtpResult | undefined;
      let n = 0;
      for (let j = 0; j < next.length; j += maxBlock) {
        n = Math.min(maxBlock, next.length - j);
        r = await head.forward(next.slice(j, j + n), hidden.slice(j * H, (j + n) * H), pos0 + j);
      }
      last = { argmax: r!.argmax[n - 1], hidden: r!.hidden.slice((n - 1) * H), pos: pos0 + next.length - 1 };
    },
    async draft(_bonus, _seed, _emitted, count) {
      if (!last) throw new Error('the MTP head drafts only after accept() has seen the prompt');
      const drafts = [last.argmax];
      let { hidden, pos } = last;
      while (drafts.length < count) {
        pos++;
        const r = await head.forward([drafts[drafts.length - 1]], hidden, pos);
        drafts.push(r.argmax[0]);
        hidden = r.hidden;
      }
      return drafts;
    },
  };
}
