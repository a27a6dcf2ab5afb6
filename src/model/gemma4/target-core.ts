import { concatF32 } from '../../util/concat.ts';
import type { TargetDescription } from '../../format/model-description.ts';
import { readMany, storageBuffer } from '../../gpu/buffers.ts';
import type { GpuContext } from '../../gpu/device.ts';
import { GpuError } from '../../gpu/errors.ts';
import { KernelCache } from '../../gpu/kernels.ts';
import type { KernelProfiler } from '../../gpu/profiler.ts';
import { Recorder } from '../../gpu/recorder.ts';
import {
  type ForwardEngine,
  type ForwardKind,
  ForwardPass,
  forcedLayerInputs,
  type HeadKernels,
  type TargetStats,
} from './forward-pass.ts';
import type { GpuWeights } from '../gpu-weights.ts';
import { KvCache, type CacheSnapshot } from './kv-cache.ts';
import * as op from '../ops.ts';
import type { ForwardResult, PrefillOptions, StepOptions, TargetOptions } from '../target.ts';
import { TargetWorkspace } from './target-workspace.ts';
import { refuseNanRows } from '../nan-row.ts';

/** What a family engine's layers need of the shared core beyond the description (see TargetCore's constructor). */
export interface TargetLayout {
  /** Layers 0 .. cacheLayers - 1 own a K/V cache (all of them, but for KV-shared models). */
  cacheLayers: number;
  /** The widest gate / up projection: the width of ws.g and ws.u. */
  mlpWidth: number;
}

/**
 * What every Gemma 4 target engine on the GPU shares (docs/MODEL.md section 2): the K/V caches and their commit,
 * rollback and snapshots, the workspace, the forward over M rows at positions p .. p+M-1 (prefill, whole or
 * chunked; a chain step, M = 1; a verify block, M = K) with its LM head, softcap and argmax, captures and
 * readback, GPU-fed greedy decoding, the logit lens, and the error scopes around every recording.
 * A family engine (dense: target.ts; E-series: gemma4/e-series/e-target.ts) supplies the layer in recordLayer() from
 * ForwardPass's blocks, plus hooks before and after the layers, so one family's change cannot drift the
 * others' shared arithmetic. Capture points copy intermediate buffers out and never change the arithmetic.
 */
export abstract class TargetCore<O extends TargetOptions = TargetOptions> {
  readonly desc: TargetDescription;
  readonly cache: KvCache;
  readonly kernels: KernelCache;
  /** Counters for the bench's breakdown of a step (TargetStats); bind groups created per step should be none. */
  readonly stats: TargetStats = { forwards: 0, dispatches: 0, submits: 0, encodeMs: 0, submitMs: 0, waitMs: 0 };
  /** When set, every dispatch is timed on the GPU (src/gpu/profiler.ts); slows the step down. */
  profiler?: KernelProfiler;
  protected readonly device: GPUDevice;
  protected readonly round: boolean;
  protected readonly work: TargetWorkspace;
  /** The workspace's buffers by name (work.buf). */
  protected readonly ws: Record<string, GPUBuffer>;
  /** Rows of the workspace. */
  protected readonly R: number;
  private readonly engine: ForwardEngine;
  /** Error scopes around every recording: a shader or validation error fails the call that caused it. */
  private readonly scopes: Promise<GPUError | null>[] = [];

  /** `layout` comes from the family's own check of the weights, made before anything is allocated. */
  constructor(
    ctx: GpuContext,
    readonly weights: GpuWeights<TargetDescription>,
    readonly opts: O,
    layout: TargetLayout,
  ) {
    this.device = ctx.device;
    const d = (this.desc = weights.desc);
    this.kernels = opts.kernels instanceof KernelCache ? opts.kernels : new KernelCache(this.device, opts.kernels);
    this.round = opts.precision === 'bf16';
    // KvCache reads only the window and the cache owners' geometry.
    const cacheDesc =
      layout.cacheLayers === d.layers.length ? d : { ...d, layers: d.layers.slice(0, layout.cacheLayers) };
    this.cache = new KvCache(this.device, cacheDesc, opts.maxContext, opts.maxBlock);
    this.work = new TargetWorkspace(this.device, d, opts, layout.mlpWidth);
    this.ws = this.work.buf;
    this.R = this.work.rows;
    this.engine = {
      device: this.device,
      desc: d,
      weights,
      cache: this.cache,
      work: this.work,
      round: this.round,
      stats: this.stats,
    };
  }

  /**
   * Records layer i of forward f, reading the layer's input rows in ws.h (forced ones already copied in) and
   * leaving its output there. Returns what its last norm returned: the next layer's input norm sums when it
   * fused f.fuseNext(i) in (see ForwardPass.endLayer).
   */
  protected abstract recordLayer(f: ForwardPass, i: number): op.GroupSums | undefined;

  /** Records what a family adds between the embedding (ws.h) and layer 0 (e.g. per-layer inputs). */
  protected afterEmbed(_f: ForwardPass): void {}

  /** Records what a family adds after the last layer, before the final norm (e.g. deferred cache writes). */
  protected afterLayers(_f: ForwardPass): void {}

  /**
   * Refuses token ids the embedding kernels would skip (leaving a row's old values). The dense engine takes its
   * callers' ids as they come; a family whose embedding tables differ in size overrides this.
   */
  protected checkTokens(_tokens: number[]): void {}

  /** Prefill `tokens` from position 0 in chunks of opts.prefillChunk (or `chunk`), then lay out the rings. */
  async prefill(tokens: number[], o: StepOptions & PrefillOptions = {}): Promise<ForwardResult> {
    if (this.cache.state.nextPos !== 0) throw new Error('prefill needs an empty cache (call reset())');
    this.checkContext(tokens.length);
    const chunk = Math.min(o.chunk ?? this.opts.prefillChunk, this.R);
    const out: ForwardResult = { captures: new Map() };
    const logitRows: Float32Array[] = [];
    const argmaxRows: number[] = [];
    const hidden: Float32Array[] = [];
    for (let p = 0; p < tokens.length; p += chunk) {
      const isLast = p + chunk >= tokens.length;
      const want = o.logits === 'all' ? 'all' : o.logits === 'last' && isLast ? 'last' : 'none';
      const r = await this.forward(tokens.slice(p, p + chunk), p, 'prefill', { ...o, logits: want });
      if (r.logits) logitRows.push(r.logits);
      if (r.argmax) argmaxRows.push(...r.argmax);
      if (r.finalHidden) hidden.push(r.finalHidden);
      for (const [k, v] of r.captures)
        out.captures.set(k, out.captures.has(k) ? concatF32([out.captures.get(k)!, v]) : v);
      // a chunk's work is queued, not done: wait for it, so that Cancel stops a long prefill within a chunk
      if (o.cancel && p + chunk < tokens.length) {
        await this.idle();
        o.cancel.throwIfCancelled();
      }
    }
    const rec = this.recorder('finish-prefill');
    this.cache.finishPrefill(rec, tokens.length);
    this.submit(rec);
    if (logitRows.length) out.logits = concatF32(logitRows);
    if (argmaxRows.length) out.argmax = Uint32Array.from(argmaxRows);
    if (hidden.length) out.finalHidden = concatF32(hidden);
    return out;
  }

  /**
   * A chain step (one token) or a verify block (K tokens) at nextPos. Writes the block's K/V to the
   * staging rows only: call commit(accepted) afterwards.
   */
  async step(tokens: number[], o: StepOptions = {}): Promise<ForwardResult> {
    if (tokens.length > this.opts.maxBlock)
      throw new Error(`block of ${tokens.length} rows exceeds maxBlock ${this.opts.maxBlock}`);
    this.checkContext(this.cache.state.nextPos + tokens.length);
    return this.forward(tokens, this.cache.state.nextPos, 'step', { logits: 'all', ...o });
  }

  /** Keeps the first `accepted` rows of the last step in the caches (rollback of the rest). */
  commit(accepted: number, blockStart = this.cache.state.nextPos): void {
    const rec = this.recorder('commit');
    this.cache.commit(rec, blockStart, accepted);
    this.submit(rec);
  }

  /** Classic decode of one token: step + commit. */
  async decode(token: number, o: StepOptions = {}): Promise<ForwardResult> {
    const r = await this.step([token], o);
    this.commit(1);
    return r;
  }

  /**
   * Greedy classic decode of `count` tokens after `first`, each step's argmax fed to the next step's
   * embedding on the GPU (a copy inside the step's command buffer). The CPU records step i + 1 while
   * the GPU runs step i, and reads the tokens back once at the end (no wait inside the loop). Each
   * step is the same forward (same pipelines, same arithmetic) as decode(); only where the token comes
   * from differs. Returns the `count` argmax tokens (the cache holds first and all but the last).
   */
  async decodeGreedy(first: number, count: number, o: StepOptions = {}): Promise<number[]> {
    if (count < 1) return [];
    this.checkContext(this.cache.state.nextPos + count);
    this.checkTokens([first]);
    const out = storageBuffer(this.device, count * 4, 'greedy-tokens');
    try {
      this.device.queue.writeBuffer(this.ws.ids, 0, Uint32Array.of(first));
      for (let i = 0; i < count; i++) {
        await this.forward([first], this.cache.state.nextPos, 'step', {
          ...o,
          logits: 'none',
          captures: undefined,
          finalHidden: false,
          chained: { argmaxOut: out, offset: 4 * i },
        });
        this.commit(1);
      }
      const tWait = performance.now();
      const [ids] = await readMany(this.device, [{ buffer: out, bytes: count * 4 }]);
      await this.checkErrors(`running ${count} chained decode steps`);
      this.stats.waitMs += performance.now() - tWait;
      const tokens = new Uint32Array(ids.buffer, ids.byteOffset, count);
      refuseNanRows(tokens, "the target's logits (chained decode steps)");
      return [...tokens];
    } finally {
      out.destroy();
    }
  }

  snapshot(): CacheSnapshot {
    const rec = this.recorder('snapshot');
    const s = this.cache.snapshot(rec);
    this.submit(rec);
    return s;
  }

  restore(s: CacheSnapshot): void {
    const rec = this.recorder('restore');
    this.cache.restore(rec, s);
    this.submit(rec);
  }

  reset(): void {
    this.cache.reset();
  }

  /** Resolves when the GPU has finished all work submitted so far (phase timings must not leak). */
  async idle(): Promise<void> {
    await this.device.queue.onSubmittedWorkDone();
  }

  destroy(): void {
    this.work.destroy();
    this.cache.layers.forEach((l) =>
      [l.k, l.v, l.kStage, l.vStage, l.kEvicted, l.vEvicted].forEach((b) => b.destroy()),
    );
  }

  /**
   * Logit lens: final norm + LM head (exact kernels) applied to arbitrary hidden rows [M, H], e.g. a
   * layer's output captured from either arm. Uses the workspace: call between forwards.
   */
  async lens(hidden: Float32Array, M: number): Promise<Float32Array> {
    const d = this.desc;
    if (M > this.R) throw new Error(`lens of ${M} rows exceeds the workspace (${this.R})`);
    this.device.queue.writeBuffer(this.ws.h, 0, hidden.buffer, hidden.byteOffset, M * d.hidden * 4);
    const rec = this.recorder('lens');
    op.rmsnorm(rec, this.ws.h, this.weights.finalNorm, this.ws.y, this.work.dummy, {
      rows: M,
      D: d.hidden,
      eps: d.eps,
      round: this.round,
    });
    this.submit(rec);
    const { logits } = await this.head(0, M, {});
    await this.checkErrors('running the logit lens');
    return logits;
  }

  protected checkContext(n: number): void {
    if (n > this.opts.maxContext) throw new Error(`sequence of ${n} tokens exceeds maxContext ${this.opts.maxContext}`);
  }

  /** Opens a recording inside error scopes; submit() closes them. */
  protected recorder(label: string): Recorder {
    this.device.pushErrorScope('out-of-memory');
    this.device.pushErrorScope('validation');
    const rec = new Recorder(this.device, this.kernels, label);
    rec.profiler = this.profiler;
    return rec;
  }

  protected submit(rec: Recorder): void {
    this.stats.dispatches += rec.dispatches;
    this.stats.submits++;
    const t = performance.now();
    rec.submit();
    this.scopes.push(this.device.popErrorScope(), this.device.popErrorScope());
    this.stats.submitMs += performance.now() - t;
  }

  /** Throws the first GPU error recorded since the last check. */
  protected async checkErrors(what: string): Promise<void> {
    const errors = await Promise.all(this.scopes.splice(0));
    const e = errors.find((x) => x !== null);
    if (!e) return;
    const oom = e.constructor?.name === 'GPUOutOfMemoryError' || /out of memory/i.test(e.message);
    throw new GpuError(
      oom ? 'out-of-memory' : 'validation',
      `${oom ? 'Out of GPU memory' : 'WebGPU error'} while ${what}: ${e.message}`,
    );
  }

  /**
   * LM head (+ softcap, argmax) over rows [first, M) of the final-norm output ws.y, in groups of at
   * most maxBlock rows (bounds the [rows, V] logits buffer).
   */
  private async head(
    first: number,
    M: number,
    kernels: HeadKernels,
  ): Promise<{ logits: Float32Array; argmax: Uint32Array }> {
    const V = this.desc.vocab;
    const logitChunks: Float32Array[] = [];
    const ids: number[] = [];
    for (let r0 = first; r0 < M; r0 += this.opts.maxBlock) {
      const n = Math.min(this.opts.maxBlock, M - r0);
      const rec = this.recorder('lm-head');
      this.recordHead(rec, r0, n, kernels);
      this.submit(rec);
      const [lg, am] = await readMany(this.device, [
        { buffer: this.ws.logits, bytes: n * V * 4 },
        { buffer: this.ws.argmax, bytes: n * 4 },
      ]);
      logitChunks.push(new Float32Array(lg.buffer, lg.byteOffset, n * V));
      ids.push(...new Uint32Array(am.buffer, am.byteOffset, n));
    }
    return { logits: concatF32(logitChunks), argmax: Uint32Array.from(ids) };
  }

  /** Records LM head (tied embedding) + softcap + argmax for n rows of ws.y from row r0 (n <= maxBlock). */
  private recordHead(rec: Recorder, r0: number, n: number, kernels: HeadKernels): void {
    const d = this.desc;
    const ws = this.ws;
    rec.copy(ws.y, r0 * d.hidden * 4, ws.headIn, 0, n * d.hidden * 4);
    op.matmul(
      rec,
      this.weights.embed,
      ws.headIn,
      ws.logits,
      { M: n, round: this.round, ...kernels },
      d.hidden,
      d.vocab,
    );
    if (d.finalSoftcap !== null) op.softcap(rec, ws.logits, n * d.vocab, d.finalSoftcap, this.round);
    op.argmax(rec, ws.logits, ws.argmax, n, d.vocab);
  }

  protected async forward(tokens: number[], p: number, kind: ForwardKind, o: StepOptions): Promise<ForwardResult> {
    const tEncode = performance.now();
    const M = tokens.length;
    const d = this.desc;
    const ws = this.ws;
    if (!o.chained) this.checkTokens(tokens); // chained: the ids buffer holds the previous step's argmax
    const forced = forcedLayerInputs(d, o, p, M);
    const f = new ForwardPass(this.engine, this.recorder(kind), M, p, kind, o, forced);
    const rec = f.rec;

    if (!o.chained) this.device.queue.writeBuffer(ws.ids, 0, Uint32Array.from(tokens));
    op.embed(rec, this.weights.embed, ws.ids, ws.h, d.embedScale, f.rows);
    this.afterEmbed(f);
    d.layers.forEach((_, i) => {
      f.forceInput(i);
      f.endLayer(i, this.recordLayer(f, i));
    });
    this.afterLayers(f);

    const result: ForwardResult = { captures: new Map() };
    const needHead =
      o.logits === 'all' || o.logits === 'last' || o.logits === 'argmax' || o.chained !== undefined || f.want('logits');
    if (needHead || o.finalHidden || f.want('final_norm')) {
      f.norm(ws.h, this.weights.finalNorm, ws.y, M, d.hidden);
      f.capture('final_norm', ws.y, M * d.hidden);
    }
    const first = o.logits === 'last' ? M - 1 : 0;
    // A chain step or verify block (at most maxBlock head rows) is one command buffer, LM head included.
    const headInline = needHead && M - first <= this.opts.maxBlock;
    if (headInline) this.recordHead(rec, first, M - first, f.kernels);
    if (o.chained) {
      // The next chained step embeds this step's argmax; decodeGreedy reads the ids back after the last step.
      rec.copy(ws.argmax, 0, ws.ids, 0, 4);
      rec.copy(ws.argmax, 0, o.chained.argmaxOut, o.chained.offset, 4);
    }
    this.stats.encodeMs += performance.now() - tEncode - f.midSubmitMs;
    this.stats.submitMs += f.midSubmitMs;
    this.submit(rec);
    if (o.chained) {
      this.stats.forwards++;
      return result;
    }
    const tWait = performance.now();

    const reads: { buffer: GPUBuffer; bytes: number }[] = [];
    const readLogits = o.logits !== 'argmax';
    if (headInline) {
      if (readLogits) reads.push({ buffer: ws.logits, bytes: (M - first) * d.vocab * 4 });
      reads.push({ buffer: ws.argmax, bytes: (M - first) * 4 });
    }
    if (o.finalHidden) reads.push({ buffer: ws.y, bytes: M * d.hidden * 4 });
    for (const c of f.captures.values()) reads.push({ buffer: c.buf, bytes: c.floats * 4 });
    const got = await readMany(this.device, reads);
    let at = 0;
    const f32 = (b: Uint8Array) => new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
    if (headInline) {
      if (readLogits) result.logits = f32(got[at++]);
      result.argmax = new Uint32Array(got[at].buffer, got[at++].byteOffset, M - first);
    } else if (needHead) {
      const head = await this.head(first, M, f.kernels);
      result.logits = head.logits;
      result.argmax = head.argmax;
    }
    if (result.argmax) refuseNanRows(result.argmax, "the target's logits");
    if (o.finalHidden) result.finalHidden = f32(got[at++]);
    for (const [name, c] of f.captures) {
      result.captures.set(name, f32(got[at++]));
      c.buf.destroy();
    }
    if (f.want('logits') && result.logits) result.captures.set('logits', result.logits);
    await this.checkErrors(`running a ${kind} forward of ${M} rows at position ${p}`);
    this.stats.waitMs += performance.now() - tWait;
    this.stats.forwards++;
    return result;
  }
}
