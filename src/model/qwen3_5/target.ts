import type { Qwen35Description } from '../../format/qwen3_5/description.ts';
import type { KernelCache, KernelCacheOptions } from '../../gpu/kernels.ts';
import { readMany } from '../../gpu/buffers.ts';
import type { GpuContext } from '../../gpu/device.ts';
import type * as op from '../ops.ts';
import { EXACT, type Policy } from '../policy.ts';
import type { Captures, ForwardResult, PrefillOptions, Precision } from '../target.ts';
import { CaptureSet, type Phase, QwenEngine } from './engine.ts';
import { concatF32 } from '../../util/concat.ts';
import { checkMemory, planLimitsOf } from '../memory-budget.ts';
import { planQwenMemory } from './memory.ts';
import { policyFor } from '../policy-registry.ts';
import type { StageStep } from '../stages.ts';
import { qwenStageOrder } from './stages.ts';
import { QwenState, type QwenStateSnapshot } from './state.ts';
import type { QwenGpuWeights } from './weights.ts';

/**
 * The Qwen3.5 target forward on the GPU (docs/QWEN35.md section 3) over M rows at positions p .. p+M-1:
 * prefill (in chunks), a chain step (M = 1) or a verify block (M = K), with TargetModel's contract: step()
 * stages the block's state, commit(n) keeps the first n rows (QwenState). Every op runs one pipeline for every
 * M, so a verify row equals the chain's bytes (tests: test/gpu/qwen-target.test.ts).
 *
 * Capture names (the goldens' act.* without the prefix): attn.i (token mixer output), mlp.i, layer.i,
 * q.i, k.i, v.i (full-attention layers), gdn.proj.i, gdn.conv.i, gdn.recurrence.i, gdn.gated_norm.i (Gated
 * DeltaNet layers), final_norm, logits.
 */
export interface QwenTargetOptions {
  maxContext: number;
  maxBlock: number;
  prefillChunk: number;
  precision: Precision;
  /** Bytes the whole model may take (weights, state, workspace); refused before allocating when over it. */
  memoryBudget?: number;
  /** The engine's kernel cache, or the options of its own (as TargetOptions.kernels). */
  kernels?: KernelCache | KernelCacheOptions;
}

export interface QwenStepOptions {
  /** 'argmax': the LM head runs for every row (logits come back too; the Gemma engine's chained mode is not mirrored). */
  logits?: 'all' | 'last' | 'none' | 'argmax';
  captures?: Captures;
  /** Matmul split and full-attention plan (the family has no sliding ring); default exact. */
  policy?: Policy;
  finalHidden?: boolean;
}

export class QwenTargetModel {
  readonly desc: Qwen35Description;
  readonly state: QwenState;
  /** Workspace, pipelines and the layer program; the MTP head (src/model/qwen3_5/mtp.ts) runs on it too. */
  readonly engine: QwenEngine;

  constructor(
    ctx: GpuContext,
    readonly weights: QwenGpuWeights,
    readonly opts: QwenTargetOptions,
  ) {
    this.desc = weights.desc;
    // Every buffer planned first: one over the adapter's limits (or a total over the budget) is refused here
    // with the numbers, before the state (maxBlock copies of each recurrent state) is allocated. The weights are
    // uploaded by now, so the plan leaves out the k-major rewrite's extra part (MemoryOptions.layout): it is freed.
    checkMemory(planQwenMemory(this.desc, opts, planLimitsOf(ctx)), opts.memoryBudget);
    this.state = new QwenState(ctx.device, this.desc.config, opts.maxContext, opts.maxBlock);
    this.engine = new QwenEngine(ctx.device, this.desc, {
      maxContext: opts.maxContext,
      maxBlock: opts.maxBlock,
      rows: Math.max(opts.prefillChunk, opts.maxBlock),
      round: opts.precision === 'bf16',
      ...(opts.kernels ? { kernels: opts.kernels } : {}),
    });
  }

  /** Prefill `tokens` from position 0 in chunks of opts.prefillChunk (or `chunk`). */
  async prefill(tokens: number[], o: QwenStepOptions & PrefillOptions = {}): Promise<ForwardResult> {
    if (this.state.nextPos !== 0) throw new Error('prefill needs an empty state (call reset())');
    this.checkContext(tokens.length);
    const chunk = Math.min(o.chunk ?? this.opts.prefillChunk, this.engine.opts.rows);
    const out: ForwardResult = { captures: new Map() };
    const logits: Float32Array[] = [];
    const argmax: number[] = [];
    const hidden: Float32Array[] = [];
    for (let p = 0; p < tokens.length; p += chunk) {
      const rows = tokens.slice(p, p + chunk);
      const last = p + chunk >= tokens.length;
      const want = o.logits === 'all' ? 'all' : o.logits === 'last' && last ? 'last' : 'none';
      const r = await this.forward(rows, p, 'prefill', { ...o, logits: want });
      if (r.logits) logits.push(r.logits);
      if (r.argmax) argmax.push(...r.argmax);
      if (r.finalHidden) hidden.push(r.finalHidden);
      for (const [k, v] of r.captures)
        out.captures.set(k, out.captures.has(k) ? concatF32([out.captures.get(k)!, v]) : v);
      // a chunk's work is queued, not done: wait for it, so that Cancel stops a long prefill within a chunk
      if (o.cancel && p + chunk < tokens.length) {
        await this.idle();
        o.cancel.throwIfCancelled();
      }
    }
    this.state.nextPos = tokens.length;
    if (logits.length) out.logits = concatF32(logits);
    if (argmax.length) out.argmax = Uint32Array.from(argmax);
    if (hidden.length) out.finalHidden = concatF32(hidden);
    return out;
  }

  /** A chain step (one token) or verify block (K tokens) at nextPos; call commit(accepted) afterwards. */
  async step(tokens: number[], o: QwenStepOptions = {}): Promise<ForwardResult> {
    if (tokens.length > this.opts.maxBlock)
      throw new Error(`block of ${tokens.length} rows exceeds maxBlock ${this.opts.maxBlock}`);
    this.checkContext(this.state.nextPos + tokens.length);
    return this.forward(tokens, this.state.nextPos, 'step', { logits: 'all', ...o });
  }

  /** Keeps the first `accepted` rows of the last step (rollback of the rest). */
  commit(accepted: number, blockStart = this.state.nextPos): void {
    const rec = this.engine.recorder('commit');
    this.state.commit(rec, blockStart, accepted);
    this.engine.submit(rec);
  }

  async decode(token: number, o: QwenStepOptions = {}): Promise<ForwardResult> {
    const r = await this.step([token], o);
    this.commit(1);
    return r;
  }

  /**
   * Classic greedy decode of `count` tokens after `first` (generation's classic arm): decode() per token,
   * reading each argmax back (TargetModel chains them on the GPU; the arithmetic of a step is the same).
   */
  async decodeGreedy(first: number, count: number, o: QwenStepOptions = {}): Promise<number[]> {
    const out: number[] = [];
    let t = first;
    for (let i = 0; i < count; i++) {
      t = (await this.decode(t, { ...o, logits: 'argmax' })).argmax![0];
      out.push(t);
    }
    return out;
  }

  /** Localization stages in execution order and their capture names (the probe's, src/model/qwen3_5/stages.ts). */
  stageOrder(): StageStep[] {
    return qwenStageOrder(this.desc);
  }

  /**
   * Logit lens: the final norm and the LM head over `M` rows of a hidden state (a layer.i capture), on the
   * workspace only (the state is not touched). Exact matmul plan, as the probe's arms use for the head.
   */
  async lens(hidden: Float32Array, M: number): Promise<Float32Array> {
    const e = this.engine;
    const H = this.desc.hidden;
    if (M > e.opts.rows) throw new Error(`lens of ${M} rows exceeds the workspace (${e.opts.rows})`);
    e.device.queue.writeBuffer(e.ws.h, 0, hidden.buffer, hidden.byteOffset, M * H * 4);
    const rec = e.recorder('lens');
    e.norm(rec, e.ws.h, this.weights.finalNorm, e.ws.y, M, H);
    e.submit(rec);
    const { logits } = await e.head(this.weights.lmHead, 0, M, 0);
    await e.checkErrors('running the logit lens');
    return logits;
  }

  snapshot(): QwenStateSnapshot {
    const rec = this.engine.recorder('snapshot');
    const s = this.state.snapshot(rec);
    this.engine.submit(rec);
    return s;
  }

  restore(s: QwenStateSnapshot): void {
    const rec = this.engine.recorder('restore');
    this.state.restore(rec, s);
    this.engine.submit(rec);
  }

  reset(): void {
    this.state.reset();
  }

  /** Resolves when the GPU has finished all work submitted so far (phase timings must not leak). */
  async idle(): Promise<void> {
    await this.engine.device.queue.onSubmittedWorkDone();
  }

  destroy(): void {
    this.engine.destroy();
    this.state.destroy();
  }

  private checkContext(n: number): void {
    if (n > this.opts.maxContext) throw new Error(`sequence of ${n} tokens exceeds maxContext ${this.opts.maxContext}`);
  }

  private async forward(tokens: number[], p: number, phase: Phase, o: QwenStepOptions): Promise<ForwardResult> {
    const M = tokens.length;
    const H = this.desc.hidden;
    const e = this.engine;
    const policy = o.policy ?? EXACT;
    policyFor('qwen3_5', policy.name); // throws for a policy this family does not take
    const split = policy.matmulSplit(M, phase);
    const rows: op.Rows = { M, round: e.opts.round, prefill: phase === 'prefill', split };
    const rec = e.recorder(phase);
    const caps = new CaptureSet(e.device, rec, o.captures);
    e.embed(rec, this.weights.embed, tokens, rows);
    this.weights.layers.forEach((L, i) =>
      e.layer(rec, i, L, this.state.layers[i], { M, p, phase, rows, policy, caps, state: this.state }),
    );
    const needHead = o.logits === 'all' || o.logits === 'argmax' || o.logits === 'last' || caps.want('logits');
    if (needHead || o.finalHidden || caps.want('final_norm')) {
      e.norm(rec, e.ws.h, this.weights.finalNorm, e.ws.y, M, H);
      caps.capture('final_norm', e.ws.y, M * H);
    }
    e.submit(rec);
    const result: ForwardResult = { captures: await caps.read() };
    if (o.finalHidden) {
      const [y] = await readMany(e.device, [{ buffer: e.ws.y, bytes: M * H * 4 }]);
      result.finalHidden = new Float32Array(y.buffer, y.byteOffset, M * H);
    }
    if (needHead) {
      const head = await e.head(this.weights.lmHead, o.logits === 'last' ? M - 1 : 0, M, split);
      result.logits = head.logits;
      result.argmax = head.argmax;
      if (caps.want('logits')) result.captures.set('logits', head.logits);
    }
    await e.checkErrors(`running a ${phase} forward of ${M} rows at position ${p}`);
    return result;
  }
}
