import { familyFeatures, type TargetDescription } from '../format/model-description.ts';
import type { GpuContext } from '../gpu/device.ts';
import { readMany, storageBuffer, uploadBuffer } from '../gpu/buffers.ts';
import { KernelCache } from '../gpu/kernels.ts';
import { Recorder } from '../gpu/recorder.ts';
import { GpuError } from '../gpu/errors.ts';
import type { KernelProfiler } from '../gpu/profiler.ts';
import type { GpuWeights } from './gpu-weights.ts';
import { KvCache, type CacheSnapshot } from './kv-cache.ts';
import { RopeTables } from './rope-tables.ts';
import * as op from './ops.ts';
import { createAttentionScratch } from './attention-op.ts';
import { EXACT, type AttentionPlan, type Policy } from './policy.ts';

/**
 * The Gemma 4 target forward on the GPU (GEMMA4.md section 2) over M rows at positions
 * p .. p+M-1: prefill (whole or chunked), a chain step (M = 1) or a verify block (M = K).
 * Capture points copy intermediate buffers out and never change the arithmetic.
 */
export type Precision = 'f32' | 'bf16';

export interface TargetOptions {
  /** Largest sequence length (full-attention cache rows, RoPE table). */
  maxContext: number;
  /** Largest block width K (staging rows). */
  maxBlock: number;
  /** Prefill chunk size (rows per forward during prefill). */
  prefillChunk: number;
  precision: Precision;
}

/** Capture names: q.i k.i v.i (after norm + RoPE), attn.i (after o_proj), mlp.i (before post-FF norm), layer.i, final_norm, logits. */
export type Captures = Set<string> | 'all';

export interface ForwardResult {
  /** Row-major [rows, V] for the rows requested. */
  logits?: Float32Array;
  /** Greedy argmax of each requested row. */
  argmax?: Uint32Array;
  /** Post-final-norm hidden state of every row [M, H] (the MTP seed). */
  finalHidden?: Float32Array;
  captures: Map<string, Float32Array>;
}

export interface StepOptions {
  /** Which rows' logits to return; 'argmax': the LM head runs for every row, only its argmax ids come back. */
  logits?: 'all' | 'last' | 'none' | 'argmax';
  captures?: Captures;
  policy?: Policy;
  finalHidden?: boolean;
  /**
   * Teacher forcing, for error analysis: the hidden rows [M, hidden] that enter layer `layer` in the forward
   * of rows at positions p .. p+M-1 (undefined: the rows the previous layer produced). Each layer then
   * shows its own error instead of the error it inherits; no op's arithmetic changes.
   */
  layerInputs?: (layer: number, p: number, M: number) => Float32Array | undefined;
  /**
   * A chained greedy step (decodeGreedy): the token to embed is already in the ids buffer (written by
   * the previous step's argmax on the GPU), and this step's argmax goes to the ids buffer and to
   * argmaxOut at byte `offset`. Nothing is read back and the call does not wait for the GPU.
   */
  chained?: { argmaxOut: GPUBuffer; offset: number };
}

/** Layers recorded per submit within one forward (see forward()). */
const SUBMIT_LAYERS = 6;

export class TargetModel {
  readonly desc: TargetDescription;
  readonly cache: KvCache;
  readonly kernels: KernelCache;
  private readonly ropes: RopeTables;
  private readonly device: GPUDevice;
  private readonly round: boolean;
  private readonly R: number; // rows of the workspace
  private readonly ws: Record<string, GPUBuffer> = {};
  private readonly dummy: GPUBuffer;
  /**
   * Counters for the bench's breakdown of a step: forwards, dispatches, submits, and wall time spent
   * recording commands (encodeMs), in queue.submit and parameter writes (submitMs), and waiting for
   * results (waitMs: readbacks and error scopes), plus bind groups created (ideally none per step).
   */
  readonly stats = { forwards: 0, dispatches: 0, submits: 0, encodeMs: 0, submitMs: 0, waitMs: 0 };
  /** When set, every dispatch is timed on the GPU (src/gpu/profiler.ts); slows the step down. */
  profiler?: KernelProfiler;

  constructor(
    ctx: GpuContext,
    readonly weights: GpuWeights<TargetDescription>,
    readonly opts: TargetOptions,
  ) {
    this.device = ctx.device;
    this.desc = weights.desc;
    // Gemma 4 family members run in their own engines (E-series: src/model/family/e-target.ts); run here as a
    // dense model they would be silently wrong.
    const family = familyFeatures(this.desc);
    if (family.length > 0)
      throw new Error(
        `${this.desc.modelType} target uses ${family.join(', ')}: the dense engine does not run it (E-series targets run in ETargetModel, src/model/family/e-target.ts)`,
      );
    this.kernels = new KernelCache(this.device);
    this.round = opts.precision === 'bf16';
    this.cache = new KvCache(this.device, this.desc, opts.maxContext, opts.maxBlock);
    this.ropes = new RopeTables(this.device, opts.maxContext);
    const d = this.desc;
    this.R = Math.max(opts.prefillChunk, opts.maxBlock);
    const qw = Math.max(...d.layers.map((l) => l.numHeads * l.headDim));
    const kvw = Math.max(...d.layers.map((l) => l.numKvHeads * l.headDim));
    const heads = Math.max(...d.layers.map((l) => l.numHeads));
    // Prefill rows (any chunk up to R) reduce in one segment each, step rows in up to SEG_MAX.
    this.attnScratch = createAttentionScratch(
      this.device,
      { heads, qWidth: qw, maxKeys: Math.max(d.window, opts.maxContext), prefillRows: this.R, stepRows: opts.maxBlock },
      'attn',
    );
    [this.ws.scores, this.ws.attnStats, this.ws.attnPartial] = this.attnScratch.buffers; // freed by destroy()
    const f = (name: string, floats: number) => (this.ws[name] = storageBuffer(this.device, floats * 4, name));
    const R = this.R;
    f('h', R * d.hidden);
    f('xn', R * d.hidden);
    f('q', R * qw);
    f('kraw', R * kvw);
    f('vraw', R * kvw);
    f('k', R * kvw);
    f('v', R * kvw);
    f('attn', R * qw);
    f('a', R * d.hidden);
    f('g', R * d.intermediate);
    f('u', R * d.intermediate);
    f('y', R * d.hidden);
    f('headIn', opts.maxBlock * d.hidden);
    f('logits', opts.maxBlock * d.vocab);
    this.ws.ids = storageBuffer(this.device, R * 4, 'ids');
    this.ws.argmax = storageBuffer(this.device, opts.maxBlock * 4, 'argmax');
    this.dummy = storageBuffer(this.device, 16, 'dummy');
  }
  private readonly attnScratch: ReturnType<typeof createAttentionScratch>;

  /** Prefill `tokens` from position 0 in chunks of opts.prefillChunk (or `chunk`), then lay out the rings. */
  async prefill(tokens: number[], o: StepOptions & { chunk?: number } = {}): Promise<ForwardResult> {
    if (this.cache.state.nextPos !== 0) throw new Error('prefill needs an empty cache (call reset())');
    this.checkContext(tokens.length);
    const chunk = Math.min(o.chunk ?? this.opts.prefillChunk, this.R);
    const out: ForwardResult = { captures: new Map() };
    const logitRows: Float32Array[] = [];
    const argmaxRows: number[] = [];
    const hidden: Float32Array[] = [];
    for (let p = 0; p < tokens.length; p += chunk) {
      const rows = tokens.slice(p, p + chunk);
      const isLast = p + chunk >= tokens.length;
      const want = o.logits === 'all' ? 'all' : o.logits === 'last' && isLast ? 'last' : 'none';
      const r = await this.forward(rows, p, 'prefill', { ...o, logits: want });
      if (r.logits) logitRows.push(r.logits);
      if (r.argmax) argmaxRows.push(...r.argmax);
      if (r.finalHidden) hidden.push(r.finalHidden);
      appendCaptures(out.captures, r.captures);
    }
    const rec = this.recorder('finish-prefill');
    this.cache.finishPrefill(rec, tokens.length);
    this.submit(rec);
    if (logitRows.length) out.logits = concat(logitRows);
    if (argmaxRows.length) out.argmax = Uint32Array.from(argmaxRows);
    if (hidden.length) out.finalHidden = concat(hidden);
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

  /** Keeps the first `accepted` rows of the last step (rollback of the rest). */
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
      return [...new Uint32Array(ids.buffer, ids.byteOffset, count)];
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
    Object.values(this.ws).forEach((b) => b.destroy());
    this.cache.layers.forEach((l) =>
      [l.k, l.v, l.kStage, l.vStage, l.kEvicted, l.vEvicted].forEach((b) => b.destroy()),
    );
    this.ropes.destroy();
    this.dummy.destroy();
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
    const d = this.desc;
    const logitChunks: Float32Array[] = [];
    const ids: number[] = [];
    for (let r0 = first; r0 < M; r0 += this.opts.maxBlock) {
      const n = Math.min(this.opts.maxBlock, M - r0);
      const rec = this.recorder('lm-head');
      this.recordHead(rec, r0, n, kernels);
      this.submit(rec);
      const [lg, am] = await readMany(this.device, [
        { buffer: this.ws.logits, bytes: n * d.vocab * 4 },
        { buffer: this.ws.argmax, bytes: n * 4 },
      ]);
      logitChunks.push(new Float32Array(lg.buffer, lg.byteOffset, n * d.vocab));
      ids.push(...new Uint32Array(am.buffer, am.byteOffset, n));
    }
    return { logits: concat(logitChunks), argmax: Uint32Array.from(ids) };
  }

  /** Records LM head + softcap + argmax for n rows of ws.y starting at row r0 (n <= maxBlock). */
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

  /**
   * Logit lens: final norm + LM head (exact kernels) applied to arbitrary hidden rows [M, H], e.g. a
   * layer's output captured from either arm. Uses the workspace: call between forwards.
   */
  async lens(hidden: Float32Array, M: number): Promise<Float32Array> {
    const d = this.desc;
    if (M > this.R) throw new Error(`lens of ${M} rows exceeds the workspace (${this.R})`);
    this.device.queue.writeBuffer(this.ws.h, 0, hidden.buffer, hidden.byteOffset, M * d.hidden * 4);
    const rec = this.recorder('lens');
    op.rmsnorm(rec, this.ws.h, this.weights.finalNorm, this.ws.y, this.dummy, {
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

  private checkContext(n: number): void {
    if (n > this.opts.maxContext) throw new Error(`sequence of ${n} tokens exceeds maxContext ${this.opts.maxContext}`);
  }

  /** Error scopes around every recording: a shader or validation error fails the call that caused it. */
  private readonly scopes: Promise<GPUError | null>[] = [];

  private recorder(label: string): Recorder {
    this.device.pushErrorScope('out-of-memory');
    this.device.pushErrorScope('validation');
    const rec = new Recorder(this.device, this.kernels, label);
    rec.profiler = this.profiler;
    return rec;
  }

  private submit(rec: Recorder): void {
    this.stats.dispatches += rec.dispatches;
    this.stats.submits++;
    const t = performance.now();
    rec.submit();
    this.scopes.push(this.device.popErrorScope(), this.device.popErrorScope());
    this.stats.submitMs += performance.now() - t;
  }

  /** Throws the first GPU error recorded since the last check. */
  private async checkErrors(what: string): Promise<void> {
    const errors = await Promise.all(this.scopes.splice(0));
    const e = errors.find((x) => x !== null);
    if (!e) return;
    const oom = e.constructor?.name === 'GPUOutOfMemoryError' || /out of memory/i.test(e.message);
    throw new GpuError(
      oom ? 'out-of-memory' : 'validation',
      `${oom ? 'Out of GPU memory' : 'WebGPU error'} while ${what}: ${e.message}`,
    );
  }

  private async forward(tokens: number[], p: number, kind: 'prefill' | 'step', o: StepOptions): Promise<ForwardResult> {
    const tEncode = performance.now();
    const M = tokens.length;
    const d = this.desc;
    const policy = o.policy ?? EXACT;
    const kernels: HeadKernels = { split: policy.matmulSplit(M, kind), mlx: kind === 'step' ? policy.mlx : undefined };
    const rows: op.Rows = { M, round: this.round, prefill: kind === 'prefill', ...kernels };
    const ws = this.ws;
    // Forced layer inputs are checked before anything is recorded (a throw must not leave a recorder open).
    const forcedInputs = d.layers.map((_, i) => o.layerInputs?.(i, p, M));
    forcedInputs.forEach((f, i) => {
      if (f && f.length !== M * d.hidden)
        throw new Error(`layerInputs(${i}): ${f.length} values, expected ${M} rows x ${d.hidden}`);
    });
    const rec = this.recorder(kind);
    const captures = new Map<string, { buf: GPUBuffer; floats: number }>();
    const want = (name: string) => o.captures === 'all' || (o.captures?.has(name) ?? false);
    const capture = (name: string, src: GPUBuffer, floats: number) => {
      if (!want(name)) return;
      const buf = storageBuffer(this.device, floats * 4, `cap.${name}`); // destroyed after readback
      rec.copy(src, 0, buf, 0, floats * 4);
      captures.set(name, { buf, floats });
    };

    if (!o.chained) this.device.queue.writeBuffer(ws.ids, 0, Uint32Array.from(tokens));
    op.embed(rec, this.weights.embed, ws.ids, ws.h, d.embedScale, rows);
    const state = this.cache.state;

    let inputNormed: { sums: op.GroupSums | undefined } | undefined; // set when layer i's input norm already ran
    let midSubmitMs = 0;
    d.layers.forEach((l, i) => {
      const w = this.weights.layers[i];
      const kv = this.cache.layers[i];
      const H = d.hidden;
      const qw = l.numHeads * l.headDim;
      const kvw = l.numKvHeads * l.headDim;
      const rope = this.ropes.get(l.rope, l.headDim);
      const norm = (
        x: GPUBuffer,
        weight: GPUBuffer | null,
        out: GPUBuffer,
        nrows: number,
        D: number,
        extra: Partial<op.NormArgs> = {},
      ) => op.rmsnorm(rec, x, weight, out, this.dummy, { rows: nrows, D, eps: d.eps, round: this.round, ...extra });

      const forced = forcedInputs[i];
      if (forced) {
        const src = uploadBuffer(this.device, forced, `forced-input.${i}`); // written before this submit runs
        rec.temporaries.push(src);
        rec.copy(src, 0, ws.h, 0, M * H * 4);
      }

      // Attention block.
      // The input norm (with the group sums q, k and v share) ran fused into the previous layer's last
      // norm unless this is layer 0 or its input is forced.
      const xsAttn = inputNormed
        ? inputNormed.sums
        : norm(ws.h, w.inputNorm, ws.xn, M, H, { sums: { lin: w.qProj, rows, slot: 'attn' } });
      op.matmul(rec, w.qProj, ws.xn, ws.attn, rows, undefined, undefined, undefined, xsAttn); // raw q; ws.attn is free until attention
      norm(ws.attn, w.qNorm, ws.q, M * l.numHeads, l.headDim, { rope: { table: rope, heads: l.numHeads, pos0: p } });
      // A sliding layer's step or block rows go straight to its staging rows (KvCache: attention reads
      // them there, commit() moves the accepted ones into the ring); a buffer copy would end the pass.
      const staged = l.type === 'sliding' && kind !== 'prefill';
      const [kOut, vOut] = staged ? [kv.kStage, kv.vStage] : [ws.k, ws.v];
      op.matmul(rec, w.kProj!, ws.xn, ws.kraw, rows, undefined, undefined, undefined, xsAttn);
      norm(ws.kraw, w.kNorm, kOut, M * l.numKvHeads, l.headDim, {
        rope: { table: rope, heads: l.numKvHeads, pos0: p },
      });
      let vSrc = ws.kraw; // k_eq_v: V = v_norm(raw K projection)
      if (w.vProj) {
        op.matmul(rec, w.vProj, ws.xn, ws.vraw, rows, undefined, undefined, undefined, xsAttn);
        vSrc = ws.vraw;
      }
      norm(vSrc, null, vOut, M * l.numKvHeads, l.headDim);
      capture(`q.${i}`, ws.q, M * qw);
      capture(`k.${i}`, kOut, M * kvw);
      capture(`v.${i}`, vOut, M * kvw);

      const rowBytes = kvw * 4;
      let plan: AttentionPlan;
      let kStage: GPUBuffer, vStage: GPUBuffer, base: number;
      if (l.type === 'full') {
        rec.copy(ws.k, 0, kv.k, p * rowBytes, M * rowBytes);
        rec.copy(ws.v, 0, kv.v, p * rowBytes, M * rowBytes);
        plan = kind === 'prefill' ? { mode: 'linear', split: 0 } : policy.fullStep(M);
        [kStage, vStage, base] = [kv.k, kv.v, 0];
      } else if (kind === 'prefill') {
        plan = { mode: 'chrono', split: 0 };
        [kStage, vStage, base] = [ws.k, ws.v, 0];
      } else {
        plan = policy.slidingStep(M, d.window, p);
        [kStage, vStage, base] = [kv.kStage, kv.vStage, state.base];
      }
      op.attention(rec, {
        M,
        heads: l.numHeads,
        kvHeads: l.numKvHeads,
        d: l.headDim,
        mode: plan.mode,
        split: plan.split,
        window: d.window,
        base,
        p,
        round: this.round,
        q: ws.q,
        kCache: kv.k,
        vCache: kv.v,
        kStage,
        vStage,
        out: ws.attn,
        scratch: kind === 'prefill' ? this.attnScratch.prefill : this.attnScratch.step,
      });
      if (l.type === 'sliding' && kind === 'prefill') this.cache.commitPrefillRows(rec, i, ws.k, ws.v, p, M);
      op.matmul(rec, w.oProj, ws.attn, ws.a, rows);
      capture(`attn.${i}`, ws.a, M * H);
      // post-attention residual, pre-feedforward norm and the group sums gate and up share: one dispatch on GPUs
      const xsMlp = norm(ws.a, w.postAttnNorm, ws.h, M, H, {
        residual: { postScale: 1 },
        nextNorm: { weight: w.preFfNorm, out: ws.xn },
        sums: { lin: w.gate, rows, slot: 'mlp' },
      });

      // MLP block.
      op.gateUp(rec, w.gate, w.up, ws.xn, ws.g, ws.u, rows, xsMlp);
      op.matmul(rec, w.down, ws.g, ws.a, rows);
      capture(`mlp.${i}`, ws.a, M * H);
      // post-feedforward residual, fused with the next layer's input norm (and its q/k/v group sums)
      const next = i + 1 < d.layers.length && !forcedInputs[i + 1] ? this.weights.layers[i + 1] : undefined;
      const fuseNext = next
        ? { nextNorm: { weight: next.inputNorm, out: ws.xn }, sums: { lin: next.qProj, rows, slot: 'attn' } }
        : {};
      const carried = norm(ws.a, w.postFfNorm, ws.h, M, H, { residual: { postScale: w.layerScalar }, ...fuseNext });
      inputNormed = next ? { sums: carried } : undefined;
      capture(`layer.${i}`, ws.h, M * H);
      // Submit every SUBMIT_LAYERS layers: the GPU starts on the first layers while the CPU records the
      // rest (recording a 12B step costs about as much CPU time as the GPU takes to run it). Only where
      // the commands go changes, not what they compute; the error scopes span all the submits.
      if ((i + 1) % SUBMIT_LAYERS === 0 && i + 1 < d.layers.length) {
        this.stats.dispatches += rec.dispatches;
        this.stats.submits++;
        rec.dispatches = 0;
        const t = performance.now();
        rec.submit();
        midSubmitMs += performance.now() - t;
      }
    });

    const result: ForwardResult = { captures: new Map() };
    const needHead =
      o.logits === 'all' || o.logits === 'last' || o.logits === 'argmax' || o.chained !== undefined || want('logits');
    if (needHead || o.finalHidden || want('final_norm')) {
      op.rmsnorm(rec, ws.h, this.weights.finalNorm, ws.y, this.dummy, {
        rows: M,
        D: d.hidden,
        eps: d.eps,
        round: this.round,
      });
      capture('final_norm', ws.y, M * d.hidden);
    }
    const first = o.logits === 'last' ? M - 1 : 0;
    // A chain step or verify block (at most maxBlock head rows) is one command buffer, LM head included.
    const headInline = needHead && M - first <= this.opts.maxBlock;
    if (headInline) this.recordHead(rec, first, M - first, kernels);
    if (o.chained) {
      // The next chained step embeds this step's argmax; the caller reads the ids back later.
      rec.copy(ws.argmax, 0, ws.ids, 0, 4);
      rec.copy(ws.argmax, 0, o.chained.argmaxOut, o.chained.offset, 4);
    }
    this.stats.encodeMs += performance.now() - tEncode - midSubmitMs;
    this.stats.submitMs += midSubmitMs;
    this.submit(rec);
    if (o.chained) {
      this.stats.forwards++;
      return result;
    }
    const tWait = performance.now();

    const reads: { buffer: GPUBuffer; bytes: number }[] = [];
    const logitsBytes = (M - first) * d.vocab * 4;
    const readLogits = o.logits !== 'argmax';
    if (headInline) {
      if (readLogits) reads.push({ buffer: ws.logits, bytes: logitsBytes });
      reads.push({ buffer: ws.argmax, bytes: (M - first) * 4 });
    }
    if (o.finalHidden) reads.push({ buffer: ws.y, bytes: M * d.hidden * 4 });
    for (const c of captures.values()) reads.push({ buffer: c.buf, bytes: c.floats * 4 });
    const got = await readMany(this.device, reads);
    let at = 0;
    const f32 = (b: Uint8Array) => new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
    if (headInline) {
      if (readLogits) result.logits = f32(got[at++]);
      result.argmax = new Uint32Array(got[at].buffer, got[at++].byteOffset, M - first);
    } else if (needHead) {
      const head = await this.head(first, M, kernels);
      result.logits = head.logits;
      result.argmax = head.argmax;
    }
    if (o.finalHidden) result.finalHidden = f32(got[at++]);
    for (const [name, c] of captures) {
      result.captures.set(name, f32(got[at++]));
      c.buf.destroy();
    }
    if (want('logits') && result.logits) result.captures.set('logits', result.logits);
    await this.checkErrors(`running a ${kind} forward of ${M} rows at position ${p}`);
    this.stats.waitMs += performance.now() - tWait;
    this.stats.forwards++;
    return result;
  }
}

/** The policy's matmul variant for a forward (split-K or MLX's kernels), which the LM head shares. */
type HeadKernels = Pick<op.Rows, 'split' | 'mlx'>;

function concat(parts: Float32Array[]): Float32Array {
  if (parts.length === 1) return parts[0];
  const out = new Float32Array(parts.reduce((a, p) => a + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

function appendCaptures(into: Map<string, Float32Array>, add: Map<string, Float32Array>): void {
  for (const [k, v] of add) into.set(k, into.has(k) ? concat([into.get(k)!, v]) : v);
}
