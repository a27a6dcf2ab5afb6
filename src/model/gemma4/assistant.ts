import type { AssistantDescription, TargetDescription } from '../../format/model-description.ts';
import type { GpuContext } from '../../gpu/device.ts';
import { readBytes, storageBuffer } from '../../gpu/buffers.ts';
import { Recorder } from '../../gpu/recorder.ts';
import { GpuError } from '../../gpu/errors.ts';
import type { GpuWeights } from '../gpu-weights.ts';
import type { Precision } from '../target.ts';
import type { TargetModel } from './dense/dense-target.ts';
import { RopeTables } from '../rope-tables.ts';
import * as op from '../ops.ts';
import { createAttentionScratch, SEG_MAX_EXACT } from '../attention-op.ts';
import { CentroidHeadOp, fullLogits, type CentroidCapture } from './e-series/centroid-head-op.ts';
import { refuseNanRows } from '../nan-row.ts';

/**
 * The MTP assistant (drafter) on the GPU, docs/MODEL.md section 5. One step:
 *   x = pre_projection([E_target[tok] * s_target, h_prev]); 4 layers whose attention is query-only
 *   over the target's K/V (its last sliding layer's ring for sliding layers, its last full layer's
 *   cache for the full layer) with RoPE on q at one frozen position per round; y = norm(x);
 *   logits = E_assistant y (no softcap); tok = argmax; h_prev = post_projection(y).
 * E-series assistants (E2B / E4B) read the donors' caches of an ETargetModel (the last owner of each type) and
 * score only the tokens of their top centroids (src/model/gemma4/e-series/centroid-head-op.ts); the step is otherwise the same.
 * All K-1 steps of a round are encoded in one command buffer: the argmax of a step feeds the next
 * step's embedding on the GPU, and only the drafted ids are read back.
 *
 * Conventions (reports record which):
 *   'hf'     (default): q at the position of the embedded token (the target's nextPos); sliding
 *            layers read W + 1 keys, as transformers' mask |q - kv| <= W does.
 *   'mlxcel': q at kv_valid_len - 1 (one less); sliding layers read the ring's W keys.
 */
export type DraftConvention = 'hf' | 'mlxcel';

export interface DraftResult {
  tokens: number[];
  /** [steps, V] when requested (centroid head: the scored tokens' logits, the fill elsewhere). */
  logits?: Float32Array;
  /** [steps, backboneHidden]: the projected state after each step, when requested. */
  hidden?: Float32Array;
  /** Centroid-head assistants, when requested: centroid logits, scored tokens and their logits per step. */
  centroid?: CentroidCapture;
}

/**
 * What the assistant reads of its target (TargetModel, or the E-series ETargetModel): the embedding, the caches
 * and their state. `donors[i]` is the layer whose cache layer i reads (E-series KV sharing; absent: itself).
 */
export type AssistantTarget = Pick<TargetModel, 'desc' | 'opts' | 'cache' | 'weights' | 'kernels'> & {
  readonly donors?: readonly number[];
};

export class AssistantModel {
  readonly desc: AssistantDescription;
  private readonly device: GPUDevice;
  private readonly ropes: RopeTables;
  private readonly ws: Record<string, GPUBuffer> = {};
  private readonly round: boolean;
  private readonly sources: { sliding: number; full: number };
  /** E-series assistants: the centroid LM head in place of the full tied-embedding head. */
  private readonly centroid?: CentroidHeadOp;

  constructor(
    ctx: GpuContext,
    readonly weights: GpuWeights<AssistantDescription>,
    private readonly target: AssistantTarget,
    readonly convention: DraftConvention = 'hf',
    precision: Precision = 'f32',
    private readonly maxSteps = 16,
  ) {
    this.device = ctx.device;
    this.desc = weights.desc;
    this.round = precision === 'bf16';
    this.ropes = new RopeTables(this.device, target.opts.maxContext + 1);
    const t: TargetDescription = target.desc;
    // The last layer of each type; on an E-series target the cache it reads (its donor's, the last owner's).
    const last = (type: 'sliding' | 'full') => {
      for (let i = t.layers.length - 1; i >= 0; i--) if (t.layers[i].type === type) return target.donors?.[i] ?? i;
      throw new Error(`the target has no ${type} layer for the assistant to read`);
    };
    this.sources = { sliding: last('sliding'), full: last('full') };
    const a = this.desc;
    const BB = a.backboneHidden;
    const qw = Math.max(...a.layers.map((l) => l.numHeads * l.headDim));
    const heads = Math.max(...a.layers.map((l) => l.numHeads));
    const f = (name: string, floats: number) =>
      (this.ws[name] = storageBuffer(this.device, floats * 4, `asst.${name}`));
    f('cat', 2 * BB);
    f('x', a.hidden);
    f('xn', a.hidden);
    f('q', qw);
    f('attn', qw);
    f('a', a.hidden);
    f('g', a.intermediate);
    f('u', a.intermediate);
    f('y', a.hidden);
    f('hprev', BB);
    if (a.centroidHead) {
      if (!weights.centroidHead) throw new Error(`${a.modelType}: the centroid head's weights were not uploaded`);
      this.centroid = new CentroidHeadOp(this.device, weights.centroidHead, weights.embed, maxSteps);
    } else f('logits', a.vocab);
    // One query row per draft step (a chain step: up to SEG_MAX_EXACT segments); in ws, so destroy() frees it.
    const attn = createAttentionScratch(
      this.device,
      { heads, qWidth: qw, maxKeys: Math.max(target.opts.maxContext, t.window + 1), prefillRows: 0, stepRows: 1 },
      'asst.attn',
    );
    [this.ws.scores, this.ws.attnStats, this.ws.attnPartial] = attn.buffers;
    if (!this.centroid) f('outLogits', maxSteps * a.vocab);
    f('outHidden', maxSteps * BB);
    this.ws.tok = storageBuffer(this.device, 16, 'asst.tok');
    this.ws.drafts = storageBuffer(this.device, maxSteps * 4, 'asst.drafts');
    this.ws.dummy = storageBuffer(this.device, 16, 'asst.dummy');
  }

  /** The frozen RoPE position of a round whose bonus token sits at the target's nextPos. */
  position(): number {
    const p = this.target.cache.state.nextPos;
    return this.convention === 'hf' ? p : p - 1;
  }

  /**
   * Drafts `steps` tokens after `bonus`, seeded with the target's post-final-norm hidden state at the
   * position that produced `bonus`. The target's caches must hold every position before the bonus.
   */
  async draft(
    bonus: number,
    seedHidden: Float32Array,
    steps: number,
    o: { capture?: boolean; fill?: 'min-minus-one' | number } = {},
  ): Promise<DraftResult> {
    if (steps > this.maxSteps) throw new Error(`at most ${this.maxSteps} draft steps per round`);
    const a = this.desc;
    const t = this.target.desc;
    const BB = a.backboneHidden;
    const ws = this.ws;
    const cache = this.target.cache;
    const state = cache.state;
    const rows: op.Rows = { M: 1, round: this.round };
    const pos = this.position();
    this.device.queue.writeBuffer(ws.tok, 0, Uint32Array.of(bonus));
    this.device.queue.writeBuffer(ws.hprev, 0, seedHidden.buffer, seedHidden.byteOffset, BB * 4);
    this.device.pushErrorScope('validation');
    const rec = new Recorder(this.device, this.target.kernels, 'draft');
    const norm = (
      x: GPUBuffer,
      w: GPUBuffer | null,
      out: GPUBuffer,
      n: number,
      D: number,
      extra: Partial<op.NormArgs> = {},
    ) => op.rmsnorm(rec, x, w, out, ws.dummy, { rows: n, D, eps: a.eps, round: this.round, ...extra });
    for (let s = 0; s < steps; s++) {
      op.embed(rec, this.target.weights.embed, ws.tok, ws.cat, t.embedScale, rows);
      rec.copy(ws.hprev, 0, ws.cat, BB * 4, BB * 4);
      op.matmul(rec, this.weights.preProjection!, ws.cat, ws.x, rows);
      a.layers.forEach((l, i) => {
        const w = this.weights.layers[i];
        const src = cache.layers[this.sources[l.type]];
        norm(ws.x, w.inputNorm, ws.xn, 1, a.hidden);
        op.matmul(rec, w.qProj, ws.xn, ws.attn, rows);
        norm(ws.attn, w.qNorm, ws.q, l.numHeads, l.headDim, {
          rope: { table: this.ropes.get(l.rope, l.headDim), heads: l.numHeads, pos0: pos },
        });
        const sliding = l.type === 'sliding';
        op.attention(rec, {
          M: 1,
          heads: l.numHeads,
          kvHeads: l.numKvHeads,
          d: l.headDim,
          mode: sliding ? 'draft' : 'linear',
          split: 0,
          window: t.window,
          base: state.base,
          p: sliding ? state.nextPos : state.nextPos - 1,
          span: this.convention === 'hf' ? t.window + 1 : t.window,
          round: this.round,
          q: ws.q,
          kCache: src.k,
          vCache: src.v,
          kStage: sliding ? src.kEvicted : src.k,
          vStage: sliding ? src.vEvicted : src.v,
          out: ws.attn,
          scratch: { scores: ws.scores, stats: ws.attnStats, partial: ws.attnPartial, segments: SEG_MAX_EXACT },
        });
        op.matmul(rec, w.oProj, ws.attn, ws.a, rows);
        // the same fused steps as the target's layers (ops.rmsnorm then/sums, ops.gateUp; one dispatch each on GPUs)
        const xsMlp = norm(ws.a, w.postAttnNorm, ws.x, 1, a.hidden, {
          residual: { postScale: 1 },
          nextNorm: { weight: w.preFfNorm, out: ws.xn },
          sums: { lin: w.gate, rows, slot: 'mlp' },
        });
        const xsDown = op.gateUp(rec, w.gate, w.up, ws.xn, ws.g, ws.u, rows, xsMlp, w.down);
        op.matmul(rec, w.down, ws.g, ws.a, rows, undefined, undefined, undefined, xsDown);
        norm(ws.a, w.postFfNorm, ws.x, 1, a.hidden, { residual: { postScale: w.layerScalar } });
      });
      norm(ws.x, this.weights.finalNorm, ws.y, 1, a.hidden);
      if (this.centroid) this.centroid.record(rec, ws.y, ws.tok, this.round);
      else {
        op.matmul(rec, this.weights.embed, ws.y, ws.logits, rows, a.hidden, a.vocab);
        op.argmax(rec, ws.logits, ws.tok, 1, a.vocab);
      }
      op.matmul(rec, this.weights.postProjection!, ws.y, ws.hprev, rows);
      rec.copy(ws.tok, 0, ws.drafts, s * 4, 4);
      if (o.capture) {
        if (this.centroid) this.centroid.capture(rec, s);
        else rec.copy(ws.logits, 0, ws.outLogits, s * a.vocab * 4, a.vocab * 4);
        rec.copy(ws.hprev, 0, ws.outHidden, s * BB * 4, BB * 4);
      }
    }
    rec.submit();
    const err = this.device.popErrorScope();
    const ids = await readBytes(this.device, ws.drafts, steps * 4);
    const e = await err;
    if (e) throw new GpuError('validation', `WebGPU error while drafting: ${e.message}`);
    const drafted = new Uint32Array(ids.buffer, ids.byteOffset, steps);
    refuseNanRows(drafted, "the MTP assistant's draft logits");
    const result: DraftResult = { tokens: [...drafted] };
    if (o.capture) {
      const hd = await readBytes(this.device, ws.outHidden, steps * BB * 4);
      if (this.centroid) {
        result.centroid = await this.centroid.read(steps);
        result.logits = fullLogits(result.centroid, steps, a.vocab, o.fill ?? 'min-minus-one');
      } else {
        const lg = await readBytes(this.device, ws.outLogits, steps * a.vocab * 4);
        result.logits = new Float32Array(lg.buffer, lg.byteOffset, steps * a.vocab);
      }
      result.hidden = new Float32Array(hd.buffer, hd.byteOffset, steps * BB);
    }
    return result;
  }

  destroy(): void {
    Object.values(this.ws).forEach((b) => b.destroy());
    this.centroid?.destroy();
    this.ropes.destroy();
  }
}
