import type { TargetDescription } from '../../format/model-description.ts';
import { storageBuffer, uploadBuffer } from '../../gpu/buffers.ts';
import type { Recorder } from '../../gpu/recorder.ts';
import type { Binding } from '../../gpu/kernels.ts';
import type { GpuWeights } from '../gpu-weights.ts';
import type { KvCache, LayerKv } from './kv-cache.ts';
import * as op from '../ops.ts';
import { EXACT, type AttentionPlan, type Policy } from '../policy.ts';
import type { StepOptions } from '../target.ts';
import type { TargetWorkspace } from './target-workspace.ts';

/** A prefill chunk, or a chain step / verify block at the cache's nextPos. */
export type ForwardKind = 'prefill' | 'step';

/** The policy's matmul variant for a forward (split-K or MLX's kernels), which the LM head shares. */
export type HeadKernels = Pick<op.Rows, 'split' | 'mlx'>;

/**
 * Counters for the bench's breakdown of a step: forwards, dispatches, submits, and wall time spent recording
 * commands (encodeMs), in queue.submit and parameter writes (submitMs), and waiting for results (waitMs:
 * readbacks and error scopes).
 */
export interface TargetStats {
  forwards: number;
  dispatches: number;
  submits: number;
  encodeMs: number;
  submitMs: number;
  waitMs: number;
}

/** What a forward reads of its engine: the model, the caches and the workspace (TargetCore's own). */
export interface ForwardEngine {
  device: GPUDevice;
  desc: TargetDescription;
  weights: GpuWeights<TargetDescription>;
  cache: KvCache;
  work: TargetWorkspace;
  round: boolean;
  stats: TargetStats;
}

/**
 * The prefix of the op-level capture names (`op:xn.3`): each kernel's output between the stages (the input norm,
 * the raw q / k / v projections, attention before o_proj, the pre-feedforward norm, gate_up). Only named captures
 * take them (ForwardPass.want).
 */
export const OP_CAPTURE = 'op:';

/** Layers recorded per submit within one forward (see endLayer()). */
const SUBMIT_LAYERS = 6;

/**
 * The teacher-forced inputs of each layer (StepOptions.layerInputs), checked before anything is recorded: a
 * throw must not leave a recorder open.
 */
export function forcedLayerInputs(
  d: TargetDescription,
  o: StepOptions,
  p: number,
  M: number,
): (Float32Array | undefined)[] {
  const forced = d.layers.map((_, i) => o.layerInputs?.(i, p, M));
  forced.forEach((f, i) => {
    if (f && f.length !== M * d.hidden)
      throw new Error(`layerInputs(${i}): ${f.length} values, expected ${M} rows x ${d.hidden}`);
  });
  return forced;
}

/**
 * One forward of a Gemma 4 target engine (TargetCore) while it is recorded: its rows and kernels, the capture
 * copies, teacher-forced layer inputs, the fused input norm carried from a layer to the next, and the recording
 * blocks every family's layer is made of (input norm, q / k / v projections, attention, o_proj with the
 * post-attention norm, the MLP). A family's layer (TargetCore.recordLayer) strings the blocks together with its
 * own pieces in its own order; each block records exactly the dispatches the dense engine records, so what the
 * exactness contract says of one engine's rows holds for every engine built from them.
 */
export class ForwardPass {
  readonly policy: Policy;
  readonly kernels: HeadKernels;
  readonly rows: op.Rows;
  readonly ws: Record<string, GPUBuffer>;
  /** Capture copies recorded so far; TargetCore reads them back after the submit and frees them. */
  readonly captures = new Map<string, { buf: GPUBuffer; floats: number }>();
  /** Wall time of the submits between layers (TargetCore counts it as submit time, not encode time). */
  midSubmitMs = 0;
  /** Set when layer i's input norm already ran, fused into layer i - 1's last norm (with its group sums). */
  private inputNormed: { sums: op.GroupSums | undefined } | undefined;

  constructor(
    private readonly e: ForwardEngine,
    readonly rec: Recorder,
    readonly M: number,
    readonly p: number,
    readonly kind: ForwardKind,
    readonly o: StepOptions,
    private readonly forced: (Float32Array | undefined)[],
  ) {
    this.policy = o.policy ?? EXACT;
    this.kernels = { split: this.policy.matmulSplit(M, kind), mlx: kind === 'step' ? this.policy.mlx : undefined };
    this.rows = { M, round: e.round, prefill: kind === 'prefill', ...this.kernels };
    this.ws = e.work.buf;
  }

  /**
   * Whether the capture `name` is wanted. The op-level captures (OP_CAPTURE prefix: the output of each kernel
   * between the stages, which the exactness self-test reads to name a kernel) only when named: 'all' means the
   * stages localization reads.
   */
  want(name: string): boolean {
    if (name.startsWith(OP_CAPTURE)) return this.o.captures instanceof Set && this.o.captures.has(name);
    return this.o.captures === 'all' || (this.o.captures?.has(name) ?? false);
  }

  /**
   * Copies `floats` values of `src` (a buffer, or a range of one) out when the capture `name` is wanted; never
   * changes the arithmetic.
   */
  capture(name: string, src: GPUBuffer | Binding, floats: number): void {
    if (!this.want(name)) return;
    const buf = storageBuffer(this.e.device, floats * 4, `cap.${name}`); // destroyed after readback
    if ('buffer' in src) this.rec.copy(src.buffer, src.offset ?? 0, buf, 0, floats * 4);
    else this.rec.copy(src, 0, buf, 0, floats * 4);
    this.captures.set(name, { buf, floats });
  }

  /** RMSNorm of `nrows` rows of width D with the model's eps and rounding (op.rmsnorm; `extra` fuses more). */
  norm(
    x: GPUBuffer,
    weight: GPUBuffer | null,
    out: GPUBuffer,
    nrows: number,
    D: number,
    extra: Partial<op.NormArgs> = {},
  ): op.GroupSums | undefined {
    const d = this.e.desc;
    return op.rmsnorm(this.rec, x, weight, out, this.e.work.dummy, {
      rows: nrows,
      D,
      eps: d.eps,
      round: this.e.round,
      ...extra,
    });
  }

  /** Overwrites the rows entering layer i with its teacher-forced input, if any. */
  forceInput(i: number): void {
    const forced = this.forced[i];
    if (!forced) return;
    const src = uploadBuffer(this.e.device, forced, `forced-input.${i}`); // written before this submit runs
    this.rec.temporaries.push(src);
    this.rec.copy(src, 0, this.ws.h, 0, this.M * this.e.desc.hidden * 4);
  }

  /**
   * Layer i's input norm into ws.xn, returning the group sums q, k and v share. It ran fused into the previous
   * layer's last norm unless this is layer 0 or its input is forced.
   */
  attentionInput(i: number): op.GroupSums | undefined {
    if (this.inputNormed) return this.inputNormed.sums;
    const w = this.e.weights.layers[i];
    return this.norm(this.ws.h, w.inputNorm, this.ws.xn, this.M, this.e.desc.hidden, {
      sums: { lin: w.qProj, rows: this.rows, slot: 'attn' },
    });
  }

  /**
   * Layer i's whole attention block over its own cache, as a layer that owns its K/V records it (dense and MoE
   * layers; the E-series' shared layers read a donor's): q, k, v, their captures, the cache write, attention,
   * o_proj and the post-attention norm. Returns the group sums the MLP's gate and up share.
   */
  selfAttention(i: number): op.GroupSums | undefined {
    const l = this.e.desc.layers[i];
    const kv = this.e.cache.layers[i];
    const { M, ws } = this;
    const kvw = l.numKvHeads * l.headDim;
    const xs = this.attentionInput(i);
    this.capture(`${OP_CAPTURE}xn.${i}`, ws.xn, M * this.e.desc.hidden);
    // A sliding layer's step or block rows go straight to its staging rows (KvCache: attention reads
    // them there, commit() moves the accepted ones into the ring); a buffer copy would end the pass.
    const staged = l.type === 'sliding' && this.kind !== 'prefill';
    const [kOut, vOut] = staged ? [kv.kStage, kv.vStage] : [ws.k, ws.v];
    this.projectQkv(i, xs, kOut, vOut);
    this.capture(`q.${i}`, ws.q, M * l.numHeads * l.headDim);
    this.capture(`k.${i}`, kOut, M * kvw);
    this.capture(`v.${i}`, vOut, M * kvw);
    if (l.type === 'full') this.writeFullRows(i, kv);
    const oSums = this.attend(i, kv, ws.k, ws.v);
    this.capture(`${OP_CAPTURE}attention.${i}`, ws.attn, M * l.numHeads * l.headDim);
    if (l.type === 'sliding' && this.kind === 'prefill')
      this.e.cache.commitPrefillRows(this.rec, i, ws.k, ws.v, this.p, M);
    return this.attentionOut(i, oSums);
  }

  /**
   * Layer i's q, k and v (projectQ and projectKv) with their three norms in one dispatch on GPUs
   * (op.qkvNorm): q into ws.q, k into kOut, v into vOut. Where the layer's projections are stacked and the
   * rows allow it (op.stackedQkvFits), the three projections run as one dispatch too.
   */
  projectQkv(i: number, xs: op.GroupSums | undefined, kOut: GPUBuffer, vOut: GPUBuffer): void {
    const l = this.e.desc.layers[i];
    const w = this.e.weights.layers[i];
    const ws = this.ws;
    if (!w.kNorm) {
      // a weightless k_norm: qkv_rows weighs both q and k rows
      this.projectQ(i, xs);
      this.projectKv(i, xs, kOut, vOut);
      return;
    }
    let qSrc: GPUBuffer | Binding = ws.attn;
    let kSrc: GPUBuffer | Binding = ws.kraw;
    let vSrc: GPUBuffer | Binding;
    if (w.qkv && this.M <= this.e.work.qkvRows && op.stackedQkvFits(this.rec, w.qkv, this.rows)) {
      // one dispatch for the three projections; the norms read them where it wrote them
      const views = op.stackedQkvMatmul(this.rec, w.qkv, ws.xn, ws.qkvraw, this.rows, xs);
      [qSrc, kSrc] = views;
      vSrc = views[2] ?? kSrc; // k_eq_v: V = v_norm(raw K projection)
      this.captureProjections(i, qSrc, kSrc, vSrc);
    } else {
      this.qMatmul(i, xs);
      vSrc = this.kvMatmuls(i, xs);
      this.captureProjections(i, qSrc, kSrc, vSrc);
    }
    const kvRows = this.M * l.numKvHeads;
    op.qkvNorm(this.rec, this.e.work.dummy, {
      D: l.headDim,
      eps: this.e.desc.eps,
      round: this.e.round,
      q: { x: qSrc, out: ws.q, rows: this.M * l.numHeads, weight: w.qNorm, heads: l.numHeads },
      k: { x: kSrc, out: kOut, rows: kvRows, weight: w.kNorm, heads: l.numKvHeads },
      v: { x: vSrc, out: vOut, rows: kvRows },
      rope: { table: this.e.work.ropes.get(l.rope, l.headDim), pos0: this.p },
    });
  }

  /** The op-level captures of layer i's raw q, k and v projections (before their norms). */
  private captureProjections(i: number, q: GPUBuffer | Binding, k: GPUBuffer | Binding, v: GPUBuffer | Binding): void {
    const l = this.e.desc.layers[i];
    this.capture(`${OP_CAPTURE}qproj.${i}`, q, this.M * l.numHeads * l.headDim);
    this.capture(`${OP_CAPTURE}kproj.${i}`, k, this.M * l.numKvHeads * l.headDim);
    this.capture(`${OP_CAPTURE}vproj.${i}`, v, this.M * l.numKvHeads * l.headDim);
  }

  /** Layer i's q: q_proj (into ws.attn, free until attention), q_norm and RoPE into ws.q. */
  projectQ(i: number, xs: op.GroupSums | undefined): void {
    const l = this.e.desc.layers[i];
    const rope = this.e.work.ropes.get(l.rope, l.headDim);
    this.qMatmul(i, xs);
    this.norm(this.ws.attn, this.e.weights.layers[i].qNorm, this.ws.q, this.M * l.numHeads, l.headDim, {
      rope: { table: rope, heads: l.numHeads, pos0: this.p },
    });
  }

  /** Layer i's k (k_proj, k_norm, RoPE) into kOut and v (v_proj or, for k_eq_v, the raw k; v_norm) into vOut. */
  projectKv(i: number, xs: op.GroupSums | undefined, kOut: GPUBuffer, vOut: GPUBuffer): void {
    const l = this.e.desc.layers[i];
    const rope = this.e.work.ropes.get(l.rope, l.headDim);
    const vSrc = this.kvMatmuls(i, xs);
    this.norm(this.ws.kraw, this.e.weights.layers[i].kNorm, kOut, this.M * l.numKvHeads, l.headDim, {
      rope: { table: rope, heads: l.numKvHeads, pos0: this.p },
    });
    this.norm(vSrc, null, vOut, this.M * l.numKvHeads, l.headDim);
  }

  /** Layer i's q_proj into ws.attn. */
  private qMatmul(i: number, xs: op.GroupSums | undefined): void {
    op.matmul(
      this.rec,
      this.e.weights.layers[i].qProj,
      this.ws.xn,
      this.ws.attn,
      this.rows,
      undefined,
      undefined,
      undefined,
      xs,
    );
  }

  /** Layer i's k_proj into ws.kraw and v_proj into ws.vraw; returns v's raw rows (ws.kraw itself for k_eq_v). */
  private kvMatmuls(i: number, xs: op.GroupSums | undefined): GPUBuffer {
    const w = this.e.weights.layers[i];
    const ws = this.ws;
    op.matmul(this.rec, w.kProj!, ws.xn, ws.kraw, this.rows, undefined, undefined, undefined, xs);
    if (!w.vProj) return ws.kraw; // k_eq_v: V = v_norm(raw K projection)
    op.matmul(this.rec, w.vProj, ws.xn, ws.vraw, this.rows, undefined, undefined, undefined, xs);
    return ws.vraw;
  }

  /** A full layer's new rows (ws.k, ws.v) into its linear cache at their positions, before attention reads them. */
  writeFullRows(i: number, kv: LayerKv): void {
    const l = this.e.desc.layers[i];
    const rowBytes = l.numKvHeads * l.headDim * 4;
    this.rec.copy(this.ws.k, 0, kv.k, this.p * rowBytes, this.M * rowBytes);
    this.rec.copy(this.ws.v, 0, kv.v, this.p * rowBytes, this.M * rowBytes);
  }

  /**
   * Layer i's attention of ws.q over the cache `kv` into ws.attn. A sliding layer's prefill chunk reads the
   * chunk's own keys from `chunkK` / `chunkV` (chrono mode); its step rows read the cache's staging rows.
   * Returns the group sums of ws.attn that o_proj reads where the attention dispatch wrote them too.
   */
  attend(i: number, kv: LayerKv, chunkK: GPUBuffer, chunkV: GPUBuffer): op.GroupSums | undefined {
    const d = this.e.desc;
    const l = d.layers[i];
    const { M, p, kind, policy } = this;
    let plan: AttentionPlan;
    let kStage: GPUBuffer, vStage: GPUBuffer, base: number;
    if (l.type === 'full') {
      plan = kind === 'prefill' ? { mode: 'linear', split: 0 } : policy.fullStep(M);
      [kStage, vStage, base] = [kv.k, kv.v, 0];
    } else if (kind === 'prefill') {
      plan = { mode: 'chrono', split: 0 };
      [kStage, vStage, base] = [chunkK, chunkV, 0];
    } else {
      plan = policy.slidingStep(M, d.window, p);
      [kStage, vStage, base] = [kv.kStage, kv.vStage, this.e.cache.state.base];
    }
    const scratch = this.e.work.attnScratch;
    const oSums = this.oProjSums(i);
    const wrote = op.attention(this.rec, {
      M,
      heads: l.numHeads,
      kvHeads: l.numKvHeads,
      d: l.headDim,
      mode: plan.mode,
      split: plan.split,
      window: d.window,
      base,
      p,
      round: this.e.round,
      q: this.ws.q,
      kCache: kv.k,
      vCache: kv.v,
      kStage,
      vStage,
      out: this.ws.attn,
      scratch: kind === 'prefill' ? scratch.prefill : scratch.step,
      outSums: oSums,
    });
    return wrote && oSums ? oSums : undefined;
  }

  /**
   * Where attention may write the group sums of its output that layer i's o_proj reads (a scratch buffer of
   * GroupSums over ws.attn), or undefined where o_proj reads none (dense, split-K, MLX kernels).
   */
  private oProjSums(i: number): op.GroupSums | undefined {
    const l = this.e.desc.layers[i];
    const lin = this.e.weights.layers[i].oProj;
    const K = l.numHeads * l.headDim;
    if (lin.desc.kind !== 'affine' || lin.desc.inFeatures !== K || !op.readsGroupSums(this.rec, lin, this.rows))
      return undefined;
    const groupSize = lin.desc.groupSize;
    const buffer = this.rec.kernels.scratch('xsums.o_proj', this.M * (K / groupSize) * 4);
    return { buffer, x: this.ws.attn, M: this.M, K, xStride: K, groupSize };
  }

  /**
   * Layer i's o_proj into ws.a (capture attn.i), then the post-attention residual into ws.h, the pre-feedforward
   * norm into ws.xn and the group sums gate and up share, one dispatch on GPUs. Returns those sums. `oSums`:
   * ws.attn's group sums where attend() wrote them (else o_proj's matmul computes them).
   */
  attentionOut(i: number, oSums: op.GroupSums | undefined): op.GroupSums | undefined {
    const w = this.e.weights.layers[i];
    const { M, ws, rows } = this;
    const H = this.e.desc.hidden;
    op.matmul(this.rec, w.oProj, ws.attn, ws.a, rows, undefined, undefined, undefined, oSums);
    this.capture(`attn.${i}`, ws.a, M * H);
    return this.norm(ws.a, w.postAttnNorm, ws.h, M, H, {
      residual: { postScale: 1 },
      nextNorm: { weight: w.preFfNorm, out: ws.xn },
      sums: { lin: w.gate, rows, slot: 'mlp' },
    });
  }

  /** Layer i's MLP on ws.xn into ws.a (capture mlp.i), before its post-feedforward norm. */
  mlp(i: number, xs: op.GroupSums | undefined): void {
    const w = this.e.weights.layers[i];
    const { ws, rows } = this;
    this.capture(`${OP_CAPTURE}ffn_in.${i}`, ws.xn, this.M * this.e.desc.hidden);
    const downSums = op.gateUp(this.rec, w.gate, w.up, ws.xn, ws.g, ws.u, rows, xs, w.down);
    this.capture(`${OP_CAPTURE}gate_up.${i}`, ws.g, this.M * w.down.desc.inFeatures);
    op.matmul(this.rec, w.down, ws.g, ws.a, rows, undefined, undefined, undefined, downSums);
    this.capture(`mlp.${i}`, ws.a, this.M * this.e.desc.hidden);
  }

  /**
   * What layer i's last norm (the residual into ws.h) fuses in: the next layer's input norm into ws.xn and its
   * q / k / v group sums, unless i is the last layer or the next layer's input is forced.
   */
  fuseNext(i: number): Partial<op.NormArgs> {
    if (!this.fusesNext(i)) return {};
    const next = this.e.weights.layers[i + 1];
    return {
      nextNorm: { weight: next.inputNorm, out: this.ws.xn },
      sums: { lin: next.qProj, rows: this.rows, slot: 'attn' },
    };
  }

  /**
   * Ends layer i: `carried` (what its last norm returned) is the next layer's input norm sums when fuseNext(i)
   * fused it in; the layer output is captured as layer.i.
   */
  endLayer(i: number, carried: op.GroupSums | undefined): void {
    const L = this.e.desc.layers.length;
    this.inputNormed = this.fusesNext(i) ? { sums: carried } : undefined;
    this.capture(`layer.${i}`, this.ws.h, this.M * this.e.desc.hidden);
    // Submit every SUBMIT_LAYERS layers: the GPU starts on the first layers while the CPU records the
    // rest (recording a 12B step costs about as much CPU time as the GPU takes to run it). Only where
    // the commands go changes, not what they compute; the error scopes span all the submits.
    if ((i + 1) % SUBMIT_LAYERS === 0 && i + 1 < L) {
      const stats = this.e.stats;
      stats.dispatches += this.rec.dispatches;
      stats.submits++;
      this.rec.dispatches = 0;
      const t = performance.now();
      this.rec.submit();
      this.midSubmitMs += performance.now() - t;
    }
  }

  private fusesNext(i: number): boolean {
    return i + 1 < this.e.desc.layers.length && !this.forced[i + 1];
  }
}
