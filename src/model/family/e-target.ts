/**
 * The Gemma 4 E-series target (E2B / E4B; docs/GEMMA4-FAMILY.md sections 4 and 5) on the GPU: the dense
 * forward of src/model/target.ts with
 * - per-layer embeddings: the combined per-layer inputs of each row are computed once after the embedding
 *   (ple-ops.ts perLayerInputs), and each layer adds post_norm(W_up(gelu_tanh(W_gate h) * input_l)) to its
 *   residual after the MLP, before layer_scalar;
 * - KV sharing: the last N layers have no K/V of their own; they attend to their donor's cache (the last owner
 *   of their type) with the donor's staging rows, so only the first L - N layers own caches, commit and roll back;
 * - double-wide MLPs on the shared layers (the workspace is as wide as the widest layer).
 * Every op is a dense-engine op or a shaders/ple.wgsl op, each with a row's arithmetic independent of M, so
 * the exactness contract of the dense engine holds unchanged: block rows == chain rows, byte for byte.
 * CPU twin: src/reference/target.ts targetStep with src/reference/family/{ple,layer,kv-sharing}.ts.
 */
import type { TargetDescription } from '../../format/model-description.ts';
import { cacheOwners } from '../../format/kv-sharing.ts';
import { readMany, storageBuffer, uploadBuffer } from '../../gpu/buffers.ts';
import type { GpuContext } from '../../gpu/device.ts';
import { GpuError } from '../../gpu/errors.ts';
import { KernelCache } from '../../gpu/kernels.ts';
import { Recorder } from '../../gpu/recorder.ts';
import { captureName, finalStages, type StageStep } from '../../parity/localize.ts';
import { familyConstants, type FamilyConstants } from '../../reference/family/constants.ts';
import { createAttentionScratch } from '../attention-op.ts';
import type { GpuWeights } from '../gpu-weights.ts';
import { KvCache, type CacheSnapshot } from '../kv-cache.ts';
import * as op from '../ops.ts';
import { EXACT, type AttentionPlan } from '../policy.ts';
import { RopeTables } from '../rope-tables.ts';
import type { ForwardResult, StepOptions, TargetOptions } from '../target.ts';
import * as ple from './ple-ops.ts';

/** Layers recorded per submit within one forward (as src/model/target.ts). */
const SUBMIT_LAYERS = 6;

/** Whether a target description is an E-series model (per-layer embeddings or KV-shared layers) without MoE. */
export function isESeriesTarget(desc: TargetDescription): boolean {
  return !desc.config.moe && (desc.perLayer !== undefined || desc.config.kvSharedLayers > 0);
}

/** The step options this engine takes: the dense engine's (StepOptions), chained greedy steps included. */
export type EStepOptions = StepOptions;

export class ETargetModel {
  readonly desc: TargetDescription;
  /** Caches of the owner layers 0 .. L - N - 1 only; a shared layer reads cache.layers[its donor]. */
  readonly cache: KvCache;
  readonly kernels: KernelCache;
  /** Per layer, the layer whose K/V it reads (itself for an owner). */
  readonly donors: number[];
  private readonly ropes: RopeTables;
  private readonly device: GPUDevice;
  private readonly round: boolean;
  private readonly R: number;
  private readonly ws: Record<string, GPUBuffer> = {};
  private readonly dummy: GPUBuffer;
  private readonly attnScratch: ReturnType<typeof createAttentionScratch>;
  private readonly constants: FamilyConstants;
  /**
   * Sliding donors' K/V of the current prefill chunk. A shared sliding layer reads the chunk's keys from its
   * donor's staging binding (chrono mode) after layers in between have rewritten ws.k, and the donor's ring
   * may only take the chunk once every reader is done (an early row still needs the entries it overwrites).
   */
  private readonly donorChunk = new Map<number, { k: GPUBuffer; v: GPUBuffer }>();
  private readonly scopes: Promise<GPUError | null>[] = [];

  constructor(
    ctx: GpuContext,
    readonly weights: GpuWeights<TargetDescription>,
    readonly opts: TargetOptions,
  ) {
    this.device = ctx.device;
    const d = (this.desc = weights.desc);
    if (d.config.moe)
      throw new Error(
        `${d.modelType}: mixture-of-experts targets run in MoETargetModel (src/model/family/moe-target.ts), not the E-series engine`,
      );
    if (!!d.perLayer !== !!weights.perLayer)
      throw new Error(`${d.modelType}: per-layer embedding weights ${d.perLayer ? 'were not uploaded' : 'unexpected'}`);
    d.layers.forEach((l, i) => {
      if (!!l.perLayerInput !== !!weights.layers[i].perLayerInput)
        throw new Error(`layer ${i}: per-layer input weights do not match the description`);
      if (!!d.perLayer !== !!l.perLayerInput)
        throw new Error(
          `layer ${i}: ${d.perLayer ? 'has no per-layer input gate, but the model has per-layer embeddings' : 'has a per-layer input gate, but the model has no per-layer embeddings'}`,
        );
    });
    this.kernels = new KernelCache(this.device);
    this.round = opts.precision === 'bf16';
    this.donors = d.layers.map((l, i) => l.kvDonor ?? i);
    const owners = cacheOwners(d.layers.length, d.config.kvSharedLayers).length;
    this.donors.forEach((dn, i) => {
      if (dn >= owners || d.layers[dn].type !== d.layers[i].type)
        throw new Error(`layer ${i} reads the K/V of layer ${dn}, which is not a ${d.layers[i].type} cache owner`);
    });
    // KvCache reads only the window and the owner layers' geometry.
    this.cache = new KvCache(this.device, { ...d, layers: d.layers.slice(0, owners) }, opts.maxContext, opts.maxBlock);
    this.ropes = new RopeTables(this.device, opts.maxContext);
    this.constants = familyConstants(d.hidden, d.perLayer?.width ?? 0);
    this.R = Math.max(opts.prefillChunk, opts.maxBlock);
    const R = this.R;
    const qw = Math.max(...d.layers.map((l) => l.numHeads * l.headDim));
    const kvw = Math.max(...d.layers.map((l) => l.numKvHeads * l.headDim));
    const heads = Math.max(...d.layers.map((l) => l.numHeads));
    const mlpWidth = Math.max(...d.layers.map((l) => l.gate.outFeatures));
    this.attnScratch = createAttentionScratch(
      this.device,
      { heads, qWidth: qw, maxKeys: Math.max(d.window, opts.maxContext), prefillRows: R, stepRows: opts.maxBlock },
      'attn',
    );
    const f = (name: string, floats: number) => (this.ws[name] = storageBuffer(this.device, floats * 4, name));
    f('h', R * d.hidden);
    f('xn', R * d.hidden);
    f('q', R * qw);
    f('kraw', R * kvw);
    f('vraw', R * kvw);
    f('k', R * kvw);
    f('v', R * kvw);
    f('attn', R * qw);
    f('a', R * d.hidden);
    f('g', R * mlpWidth);
    f('u', R * mlpWidth);
    f('y', R * d.hidden);
    f('headIn', opts.maxBlock * d.hidden);
    f('logits', opts.maxBlock * d.vocab);
    if (d.perLayer) {
      const LP = d.layers.length * d.perLayer.width;
      f('pleInputs', R * LP);
      f('pleProj', R * LP);
      f('pleGate', R * d.perLayer.width);
    }
    for (const dn of new Set(this.donors.filter((dn, i) => dn !== i))) {
      const l = d.layers[dn];
      if (l.type !== 'sliding') continue;
      const floats = R * l.numKvHeads * l.headDim;
      this.donorChunk.set(dn, {
        k: storageBuffer(this.device, floats * 4, `donor-k.${dn}`),
        v: storageBuffer(this.device, floats * 4, `donor-v.${dn}`),
      });
    }
    this.ws.ids = storageBuffer(this.device, R * 4, 'ids');
    this.ws.argmax = storageBuffer(this.device, opts.maxBlock * 4, 'argmax');
    this.dummy = storageBuffer(this.device, 16, 'dummy');
  }

  /** Prefill `tokens` from position 0 in chunks of opts.prefillChunk (or `chunk`), then lay out the rings. */
  async prefill(tokens: number[], o: EStepOptions & { chunk?: number } = {}): Promise<ForwardResult> {
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
      for (const [k, v] of r.captures) out.captures.set(k, out.captures.has(k) ? concat([out.captures.get(k)!, v]) : v);
    }
    const rec = this.recorder('finish-prefill');
    this.cache.finishPrefill(rec, tokens.length);
    this.submit(rec);
    if (logitRows.length) out.logits = concat(logitRows);
    if (argmaxRows.length) out.argmax = Uint32Array.from(argmaxRows);
    if (hidden.length) out.finalHidden = concat(hidden);
    return out;
  }

  /** A chain step (one token) or a verify block (K tokens) at nextPos; call commit(accepted) afterwards. */
  async step(tokens: number[], o: EStepOptions = {}): Promise<ForwardResult> {
    if (tokens.length > this.opts.maxBlock)
      throw new Error(`block of ${tokens.length} rows exceeds maxBlock ${this.opts.maxBlock}`);
    this.checkContext(this.cache.state.nextPos + tokens.length);
    return this.forward(tokens, this.cache.state.nextPos, 'step', { logits: 'all', ...o });
  }

  /** Keeps the first `accepted` rows of the last step in the owners' caches (rollback of the rest). */
  commit(accepted: number, blockStart = this.cache.state.nextPos): void {
    const rec = this.recorder('commit');
    this.cache.commit(rec, blockStart, accepted);
    this.submit(rec);
  }

  /** Classic decode of one token: step + commit. */
  async decode(token: number, o: EStepOptions = {}): Promise<ForwardResult> {
    const r = await this.step([token], o);
    this.commit(1);
    return r;
  }

  /**
   * Greedy classic decode of `count` tokens after `first`, each step's argmax fed to the next step's embedding on
   * the GPU (TargetModel.decodeGreedy's contract: the same forward as decode(), read back once at the end).
   * Returns the `count` argmax tokens (the cache holds first and all but the last).
   */
  async decodeGreedy(first: number, count: number, o: EStepOptions = {}): Promise<number[]> {
    if (count < 1) return [];
    this.checkContext(this.cache.state.nextPos + count);
    this.checkTokens([first]);
    const d = this.desc;
    if (d.perLayer && d.perLayer.table.outFeatures < d.vocab) {
      // An argmax past the per-layer table would be embedded without its per-layer row (embed.wgsl skips it): step
      // one token at a time, where checkTokens refuses it.
      const out: number[] = [];
      for (let t = first; out.length < count; ) out.push((t = (await this.decode(t, o)).argmax![0]));
      return out;
    }
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
      const [ids] = await readMany(this.device, [{ buffer: out, bytes: count * 4 }]);
      await this.checkErrors(`running ${count} chained decode steps`);
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

  async idle(): Promise<void> {
    await this.device.queue.onSubmittedWorkDone();
  }

  destroy(): void {
    Object.values(this.ws).forEach((b) => b.destroy());
    this.attnScratch.buffers.forEach((b) => b.destroy());
    for (const b of this.donorChunk.values()) [b.k, b.v].forEach((x) => x.destroy());
    this.cache.layers.forEach((l) =>
      [l.k, l.v, l.kStage, l.vStage, l.kEvicted, l.vEvicted].forEach((b) => b.destroy()),
    );
    this.ropes.destroy();
    this.dummy.destroy();
  }

  /**
   * The localization stages in execution order: q, k, v (owners only: a shared layer computes no K/V), attention,
   * MLP and layer output per layer, then final norm and logits.
   */
  stageOrder(): StageStep[] {
    const out: StageStep[] = [];
    this.desc.layers.forEach((l, i) => {
      const stages =
        this.donors[i] === i
          ? (['q', 'k', 'v', 'attn', 'mlp', 'layer'] as const)
          : (['q', 'attn', 'mlp', 'layer'] as const);
      for (const stage of stages) out.push({ layer: i, layerKind: l.type, stage, capture: captureName(i, stage) });
    });
    return [...out, ...finalStages()];
  }

  /** Logit lens: final norm + LM head applied to hidden rows [M, H]. Uses the workspace: call between forwards. */
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
    return { logits: concat(logitChunks), argmax: Uint32Array.from(ids) };
  }

  /** LM head (tied embedding) + softcap + argmax for n rows of ws.y from row r0, as the dense engine. */
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

  private checkContext(n: number): void {
    if (n > this.opts.maxContext) throw new Error(`sequence of ${n} tokens exceeds maxContext ${this.opts.maxContext}`);
  }

  private recorder(label: string): Recorder {
    this.device.pushErrorScope('out-of-memory');
    this.device.pushErrorScope('validation');
    return new Recorder(this.device, this.kernels, label);
  }

  private submit(rec: Recorder): void {
    rec.submit();
    this.scopes.push(this.device.popErrorScope(), this.device.popErrorScope());
  }

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

  private checkTokens(tokens: number[]): void {
    const d = this.desc;
    // The embedding kernels skip an id outside every row part, which would leave the row's old values.
    const limit = Math.min(d.vocab, d.perLayer ? d.perLayer.table.outFeatures : d.vocab);
    const bad = tokens.find((t) => !Number.isInteger(t) || t < 0 || t >= limit);
    if (bad !== undefined)
      throw new Error(
        `token ${bad} outside [0, ${limit}) (vocab ${d.vocab}${d.perLayer ? `, per-layer vocabulary ${d.perLayer.table.outFeatures}` : ''})`,
      );
  }

  private async forward(
    tokens: number[],
    p: number,
    kind: 'prefill' | 'step',
    o: EStepOptions,
  ): Promise<ForwardResult> {
    const M = tokens.length;
    const d = this.desc;
    const H = d.hidden;
    const L = d.layers.length;
    const policy = o.policy ?? EXACT;
    const kernels: HeadKernels = { split: policy.matmulSplit(M, kind), mlx: kind === 'step' ? policy.mlx : undefined };
    const rows: op.Rows = { M, round: this.round, prefill: kind === 'prefill', ...kernels };
    const ws = this.ws;
    if (!o.chained) this.checkTokens(tokens); // chained: the ids buffer holds the previous step's argmax
    // Forced layer inputs are checked before anything is recorded (a throw must not leave a recorder open).
    const forcedInputs = d.layers.map((_, i) => o.layerInputs?.(i, p, M));
    forcedInputs.forEach((f, i) => {
      if (f && f.length !== M * H) throw new Error(`layerInputs(${i}): ${f.length} values, expected ${M} rows x ${H}`);
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
    const norm = (
      x: GPUBuffer,
      weight: GPUBuffer | null,
      out: GPUBuffer,
      nrows: number,
      D: number,
      extra: Partial<op.NormArgs> = {},
    ) => op.rmsnorm(rec, x, weight, out, this.dummy, { rows: nrows, D, eps: d.eps, round: this.round, ...extra });

    if (!o.chained) this.device.queue.writeBuffer(ws.ids, 0, Uint32Array.from(tokens));
    op.embed(rec, this.weights.embed, ws.ids, ws.h, d.embedScale, rows);
    const pw = this.weights.perLayer;
    if (pw) {
      const pleWs = { inputs: ws.pleInputs, proj: ws.pleProj, dummy: this.dummy };
      ple.perLayerInputs(rec, pw, ws.ids, ws.h, pleWs, this.constants, L, d.eps, rows);
      capture('ple_inputs', ws.pleInputs, M * L * pw.width);
    }
    const state = this.cache.state;
    const deferredCommits: number[] = [];

    let inputNormed: { sums: op.GroupSums | undefined } | undefined; // set when layer i's input norm already ran
    d.layers.forEach((l, i) => {
      const w = this.weights.layers[i];
      const donor = this.donors[i];
      const owner = donor === i;
      const kv = this.cache.layers[donor];
      const qw = l.numHeads * l.headDim;
      const kvw = l.numKvHeads * l.headDim;
      const rope = this.ropes.get(l.rope, l.headDim);

      const forced = forcedInputs[i];
      if (forced) {
        const src = uploadBuffer(this.device, forced, `forced-input.${i}`); // written before this submit runs
        rec.temporaries.push(src);
        rec.copy(src, 0, ws.h, 0, M * H * 4);
      }

      // Attention block: q always; k and v on owner layers only (a shared layer reads its donor's).
      const xsAttn = inputNormed
        ? inputNormed.sums
        : norm(ws.h, w.inputNorm, ws.xn, M, H, { sums: { lin: w.qProj, rows, slot: 'attn' } });
      op.matmul(rec, w.qProj, ws.xn, ws.attn, rows, undefined, undefined, undefined, xsAttn);
      norm(ws.attn, w.qNorm, ws.q, M * l.numHeads, l.headDim, { rope: { table: rope, heads: l.numHeads, pos0: p } });
      capture(`q.${i}`, ws.q, M * qw);
      const chunkRows = this.donorChunk.get(i);
      if (owner) {
        if (!w.kProj) throw new Error(`layer ${i} owns a cache but has no k_proj`);
        // Sliding step / block rows go to the staging rows (KvCache); a sliding donor's prefill rows to its own
        // chunk buffers (see donorChunk); everything else to the workspace.
        const staged = l.type === 'sliding' && kind !== 'prefill';
        const [kOut, vOut] = staged
          ? [kv.kStage, kv.vStage]
          : l.type === 'sliding' && chunkRows
            ? [chunkRows.k, chunkRows.v]
            : [ws.k, ws.v];
        op.matmul(rec, w.kProj, ws.xn, ws.kraw, rows, undefined, undefined, undefined, xsAttn);
        norm(ws.kraw, w.kNorm, kOut, M * l.numKvHeads, l.headDim, {
          rope: { table: rope, heads: l.numKvHeads, pos0: p },
        });
        let vSrc = ws.kraw; // k_eq_v: V = v_norm(raw K projection)
        if (w.vProj) {
          op.matmul(rec, w.vProj, ws.xn, ws.vraw, rows, undefined, undefined, undefined, xsAttn);
          vSrc = ws.vraw;
        }
        norm(vSrc, null, vOut, M * l.numKvHeads, l.headDim);
        capture(`k.${i}`, kOut, M * kvw);
        capture(`v.${i}`, vOut, M * kvw);
        if (l.type === 'full') {
          const rowBytes = kvw * 4;
          rec.copy(ws.k, 0, kv.k, p * rowBytes, M * rowBytes);
          rec.copy(ws.v, 0, kv.v, p * rowBytes, M * rowBytes);
        }
      }

      let plan: AttentionPlan;
      let kStage: GPUBuffer, vStage: GPUBuffer, base: number;
      if (l.type === 'full') {
        plan = kind === 'prefill' ? { mode: 'linear', split: 0 } : policy.fullStep(M);
        [kStage, vStage, base] = [kv.k, kv.v, 0];
      } else if (kind === 'prefill') {
        // The chunk's own keys: this layer's (an owner that lends none), or its donor's chunk buffers.
        const chunk = this.donorChunk.get(donor);
        plan = { mode: 'chrono', split: 0 };
        [kStage, vStage, base] = chunk ? [chunk.k, chunk.v, 0] : [ws.k, ws.v, 0];
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
      if (owner && l.type === 'sliding' && kind === 'prefill') {
        if (chunkRows) deferredCommits.push(i);
        else this.cache.commitPrefillRows(rec, i, ws.k, ws.v, p, M);
      }
      op.matmul(rec, w.oProj, ws.attn, ws.a, rows);
      capture(`attn.${i}`, ws.a, M * H);
      const xsMlp = norm(ws.a, w.postAttnNorm, ws.h, M, H, {
        residual: { postScale: 1 },
        nextNorm: { weight: w.preFfNorm, out: ws.xn },
        sums: { lin: w.gate, rows, slot: 'mlp' },
      });

      // MLP block (double width on the shared layers of E2B: the weights say how wide).
      op.gateUp(rec, w.gate, w.up, ws.xn, ws.g, ws.u, rows, xsMlp);
      op.matmul(rec, w.down, ws.g, ws.a, rows);
      capture(`mlp.${i}`, ws.a, M * H);
      const next = i + 1 < L && !forcedInputs[i + 1] ? this.weights.layers[i + 1] : undefined;
      const fuseNext = next
        ? { nextNorm: { weight: next.inputNorm, out: ws.xn }, sums: { lin: next.qProj, rows, slot: 'attn' } }
        : {};
      const pl = w.perLayerInput;
      let carried: op.GroupSums | undefined;
      if (pl && pw) {
        // h2 = h1 + post_ff_norm(mlp); then h = (h2 + post_norm(W_up(gelu_tanh(W_gate h2) * input_i))) * layer_scalar
        const xsGate = norm(ws.a, w.postFfNorm, ws.h, M, H, {
          residual: { postScale: 1 },
          sums: { lin: pl.gate, rows, slot: 'ple' },
        });
        ple.contribution(rec, pl, ws.h, ws.pleInputs, ws.pleGate, ws.a, i, L, rows, xsGate);
        if (want(`ple.${i}`)) {
          // The contribution as added (act.ple.i): a separate norm into the capture, the residual is untouched.
          norm(ws.a, pl.postNorm, ws.y, M, H);
          capture(`ple.${i}`, ws.y, M * H);
        }
        carried = norm(ws.a, pl.postNorm, ws.h, M, H, { residual: { postScale: w.layerScalar }, ...fuseNext });
      } else {
        carried = norm(ws.a, w.postFfNorm, ws.h, M, H, { residual: { postScale: w.layerScalar }, ...fuseNext });
      }
      inputNormed = next ? { sums: carried } : undefined;
      capture(`layer.${i}`, ws.h, M * H);
      // Submit every SUBMIT_LAYERS layers, as the dense engine (where the commands go, not what they compute).
      if ((i + 1) % SUBMIT_LAYERS === 0 && i + 1 < L) rec.submit();
    });
    // The sliding donors' chunk rows go into their rings once every shared layer has read the ring without them.
    for (const i of deferredCommits) {
      const c = this.donorChunk.get(i)!;
      this.cache.commitPrefillRows(rec, i, c.k, c.v, p, M);
    }

    const result: ForwardResult = { captures: new Map() };
    const needHead =
      o.logits === 'all' || o.logits === 'last' || o.logits === 'argmax' || o.chained !== undefined || want('logits');
    if (needHead || o.finalHidden || want('final_norm')) {
      norm(ws.h, this.weights.finalNorm, ws.y, M, H);
      capture('final_norm', ws.y, M * H);
    }
    const first = o.logits === 'last' ? M - 1 : 0;
    const headInline = needHead && M - first <= this.opts.maxBlock;
    if (headInline) this.recordHead(rec, first, M - first, kernels);
    if (o.chained) {
      // The next chained step embeds this step's argmax; decodeGreedy reads the ids back after the last step.
      rec.copy(ws.argmax, 0, ws.ids, 0, 4);
      rec.copy(ws.argmax, 0, o.chained.argmaxOut, o.chained.offset, 4);
    }
    this.submit(rec);
    if (o.chained) return result;

    const reads: { buffer: GPUBuffer; bytes: number }[] = [];
    const readLogits = o.logits !== 'argmax';
    if (headInline) {
      if (readLogits) reads.push({ buffer: ws.logits, bytes: (M - first) * d.vocab * 4 });
      reads.push({ buffer: ws.argmax, bytes: (M - first) * 4 });
    }
    if (o.finalHidden) reads.push({ buffer: ws.y, bytes: M * H * 4 });
    for (const c of captures.values()) reads.push({ buffer: c.buf, bytes: c.floats * 4 });
    const got = await readMany(this.device, reads);
    let at = 0;
    const f32 = (b: Uint8Array) => new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
    if (headInline) {
      if (readLogits) result.logits = f32(got[at++]);
      result.argmax = new Uint32Array(got[at].buffer, got[at++].byteOffset, M - first);
    } else if (needHead) {
      const h = await this.head(first, M, kernels);
      result.logits = h.logits;
      result.argmax = h.argmax;
    }
    if (o.finalHidden) result.finalHidden = f32(got[at++]);
    for (const [name, c] of captures) {
      result.captures.set(name, f32(got[at++]));
      c.buf.destroy();
    }
    if (want('logits') && result.logits) result.captures.set('logits', result.logits);
    await this.checkErrors(`running a ${kind} forward of ${M} rows at position ${p}`);
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
