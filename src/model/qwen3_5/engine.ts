import { concatF32 } from '../../util/concat.ts';
import type { Qwen35Description } from '../../format/qwen3_5/description.ts';
import { readMany, storageBuffer } from '../../gpu/buffers.ts';
import { GpuError } from '../../gpu/errors.ts';
import { KernelCache, type KernelCacheOptions } from '../../gpu/kernels.ts';
import { Recorder } from '../../gpu/recorder.ts';
import { ropeTable } from '../rope-tables.ts';
import { createAttentionScratch } from '../attention-op.ts';
import type { GpuLinear } from '../gpu-linear.ts';
import * as op from '../ops.ts';
import type { Policy } from '../policy.ts';
import type { Captures } from '../target.ts';
import * as qop from './ops.ts';
import { type GdnLayerState, gdnGeometry, type KvLayerState, type QwenState } from './state.ts';
import type { QwenGpuAttentionLayer, QwenGpuLayer, QwenGpuLinearLayer } from './weights.ts';
import { refuseNanRows } from '../nan-row.ts';

/**
 * What the Qwen3.5 target and its MTP head share on the GPU: the workspace, the RoPE table, the attention
 * scratch, the pipelines, the error scopes, and the layer program (docs/QWEN35.md section 3) as recorded ops.
 * One engine serves both models in turn (the head runs between target forwards), so every row of either
 * goes through the same pipelines whatever M is.
 */
export interface QwenEngineOptions {
  maxContext: number;
  maxBlock: number;
  /** Rows of the workspace (the prefill chunk, at least maxBlock). */
  rows: number;
  round: boolean;
  /** The kernel cache to use, or the options of its own (TargetOptions.kernels); unset: a cache of the device's class. */
  kernels?: KernelCache | KernelCacheOptions;
}

export type Phase = 'prefill' | 'step';

/** Capture recording of one forward: `capture(name, buffer, floats)` copies out when the name is wanted. */
export class CaptureSet {
  private readonly bufs = new Map<string, { buf: GPUBuffer; floats: number }>();
  constructor(
    private readonly device: GPUDevice,
    private readonly rec: Recorder,
    private readonly wanted: Captures | undefined,
  ) {}
  want(name: string): boolean {
    return this.wanted === 'all' || (this.wanted?.has(name) ?? false);
  }
  capture(name: string, src: GPUBuffer, floats: number): void {
    if (!this.want(name)) return;
    const buf = storageBuffer(this.device, floats * 4, `cap.${name}`); // destroyed after readback
    this.rec.copy(src, 0, buf, 0, floats * 4);
    this.bufs.set(name, { buf, floats });
  }
  /**
   * One capture of M rows made of several buffers' rows side by side (row r = parts' row r in order), so a
   * stage's row split stays per position (the Gated DeltaNet's projections: qkv, z, b, a).
   */
  captureRows(name: string, parts: { src: GPUBuffer; width: number }[], M: number): void {
    if (!this.want(name)) return;
    const W = parts.reduce((a, p) => a + p.width, 0);
    const buf = storageBuffer(this.device, M * W * 4, `cap.${name}`); // destroyed after readback
    for (let r = 0; r < M; r++) {
      let at = r * W;
      for (const { src, width } of parts) {
        this.rec.copy(src, r * width * 4, buf, at * 4, width * 4);
        at += width;
      }
    }
    this.bufs.set(name, { buf, floats: M * W });
  }
  /** Reads every capture back (after the recording was submitted) and frees its buffer. */
  async read(): Promise<Map<string, Float32Array>> {
    const entries = [...this.bufs];
    const got = await readMany(
      this.device,
      entries.map(([, c]) => ({ buffer: c.buf, bytes: c.floats * 4 })),
    );
    const out = new Map<string, Float32Array>();
    entries.forEach(([name, c], i) => {
      out.set(name, new Float32Array(got[i].buffer, got[i].byteOffset, c.floats));
      c.buf.destroy();
    });
    return out;
  }
}

export class QwenEngine {
  readonly kernels: KernelCache;
  readonly ws: Record<string, GPUBuffer> = {};
  private readonly rope: op.RopeTable;
  private readonly attnScratch: ReturnType<typeof createAttentionScratch>;
  private readonly scopes: Promise<GPUError | null>[] = [];

  constructor(
    readonly device: GPUDevice,
    readonly desc: Qwen35Description,
    readonly opts: QwenEngineOptions,
  ) {
    const c = desc.config;
    this.kernels = opts.kernels instanceof KernelCache ? opts.kernels : new KernelCache(device, opts.kernels);
    const R = opts.rows;
    const { numHeads: nh, numKvHeads: nkv, headDim: hd } = c.attention;
    this.rope = this.ropeTable(opts.maxContext);
    this.attnScratch = createAttentionScratch(
      device,
      { heads: nh, qWidth: nh * hd, maxKeys: opts.maxContext, prefillRows: R, stepRows: opts.maxBlock },
      'qwen-attn',
    );
    const f = (name: string, floats: number) => {
      this.ws[name] = storageBuffer(device, Math.max(16, floats * 4), name);
    };
    f('h', R * desc.hidden);
    f('xn', R * desc.hidden);
    f('a', R * desc.hidden);
    f('y', R * desc.hidden);
    f('g', R * desc.intermediate);
    f('u', R * desc.intermediate);
    f('qg', R * 2 * nh * hd);
    f('q', R * nh * hd);
    f('k', R * nkv * hd);
    f('v', R * nkv * hd);
    f('attn', R * nh * hd);
    if (c.linear) {
      const g = gdnGeometry(c);
      f('qkv', R * g.C);
      f('c', R * g.C);
      f('qk', R * 2 * g.Hk * g.Dk);
      f('z', R * g.Hv * g.Dv);
      f('ga', R * g.Hv);
      f('gb_in', R * g.Hv);
      f('gates', R * g.Hv * 2);
      f('lg', R * g.Hv);
      f('o', R * g.Hv * g.Dv);
      f('gn', R * g.Hv * g.Dv);
    }
    f('headIn', opts.maxBlock * desc.hidden);
    f('logits', opts.maxBlock * desc.vocab);
    f('ids', R);
    f('argmax', opts.maxBlock);
    f('dummy', 4);
    f('unusedStage', 4);
  }

  /** cos/sin of the rotary dims (pairs i, i + rotaryDim/2), float64 angles rounded once to f32 (as the reference). */
  private ropeTable(positions: number): op.RopeTable {
    const { rotaryDim, theta } = this.desc.config.attention.rope;
    return ropeTable(this.device, { ropeType: 'default', theta, partialRotary: 1 }, rotaryDim, positions, 'f64');
  }

  destroy(): void {
    Object.values(this.ws).forEach((b) => b.destroy());
    this.attnScratch.buffers.forEach((b) => b.destroy());
    this.rope.cos.destroy();
    this.rope.sin.destroy();
  }

  // ---- recording, with an error scope around every recording (a shader or validation error fails the call)

  recorder(label: string): Recorder {
    this.device.pushErrorScope('out-of-memory');
    this.device.pushErrorScope('validation');
    return new Recorder(this.device, this.kernels, label);
  }

  submit(rec: Recorder): void {
    rec.submit();
    this.scopes.push(this.device.popErrorScope(), this.device.popErrorScope());
  }

  /** Throws the first GPU error recorded since the last check. */
  async checkErrors(what: string): Promise<void> {
    const errors = await Promise.all(this.scopes.splice(0));
    const e = errors.find((x) => x !== null);
    if (!e) return;
    const oom = /out of memory/i.test(e.message);
    throw new GpuError(oom ? 'out-of-memory' : 'validation', `WebGPU error while ${what}: ${e.message}`);
  }

  // ---- the layer program

  norm(
    rec: Recorder,
    x: GPUBuffer,
    w: GPUBuffer,
    out: GPUBuffer,
    rows: number,
    D: number,
    extra: Partial<op.NormArgs> = {},
  ) {
    op.rmsnorm(rec, x, w, out, this.ws.dummy, { rows, D, eps: this.desc.eps, round: this.opts.round, ...extra });
  }

  /** Embeds `tokens` into ws.h (no embedding scale in Qwen3.5). */
  embed(rec: Recorder, table: GpuLinear, tokens: number[], rows: op.Rows): void {
    this.device.queue.writeBuffer(this.ws.ids, 0, Uint32Array.from(tokens));
    op.embed(rec, table, this.ws.ids, this.ws.h, 1, rows);
  }

  /**
   * A decoder layer on ws.h (M rows at p): h += mixer(norm(h)); h += mlp(norm(h)). Full-attention layers use
   * `kv`; Gated DeltaNet layers `gdn` (with `state` for the prefill's window update). Captures attn.i, mlp.i,
   * layer.i, q.i, k.i, v.i (full attention) and the Gated DeltaNet stages gdn.{proj,conv,recurrence,gated_norm}.i
   * (the localization stages of src/model/qwen3_5/stages.ts).
   */
  layer(
    rec: Recorder,
    i: number,
    L: QwenGpuLayer,
    st: KvLayerState | GdnLayerState,
    a: { M: number; p: number; phase: Phase; rows: op.Rows; policy: Policy; caps: CaptureSet; state?: QwenState },
  ): void {
    const { ws } = this;
    const H = this.desc.hidden;
    const { M, rows, caps } = a;
    this.norm(rec, ws.h, L.inputNorm, ws.xn, M, H);
    if (L.type === 'full') {
      if (st.kind !== 'full') throw new Error(`layer ${i}: state is not a KV cache`);
      this.attention(rec, i, L, st, a);
    } else {
      if (st.kind !== 'linear') throw new Error(`layer ${i}: state is not a Gated DeltaNet state`);
      this.deltaNet(rec, i, L, st, a);
    }
    caps.capture(`attn.${i}`, ws.a, M * H);
    qop.add(rec, ws.h, ws.a, M * H, this.opts.round);
    this.norm(rec, ws.h, L.postAttnNorm, ws.xn, M, H);
    op.matmul(rec, L.gate, ws.xn, ws.g, rows);
    op.matmul(rec, L.up, ws.xn, ws.u, rows);
    qop.swiglu(rec, ws.g, ws.u, M * this.desc.intermediate, this.opts.round);
    op.matmul(rec, L.down, ws.g, ws.a, rows);
    caps.capture(`mlp.${i}`, ws.a, M * H);
    qop.add(rec, ws.h, ws.a, M * H, this.opts.round);
    caps.capture(`layer.${i}`, ws.h, M * H);
  }

  /** Gated full attention of M rows at p (docs/QWEN35.md 3.1) from ws.xn: the o_proj output in ws.a. */
  private attention(
    rec: Recorder,
    i: number,
    L: QwenGpuAttentionLayer,
    kv: KvLayerState,
    a: { M: number; p: number; phase: Phase; rows: op.Rows; policy: Policy; caps: CaptureSet },
  ): void {
    const { ws } = this;
    const { M, p, rows, caps } = a;
    const { numHeads: nh, numKvHeads: nkv, headDim: hd, rope } = this.desc.config.attention;
    const round = this.opts.round;
    op.matmul(rec, L.qProj, ws.xn, ws.qg, rows);
    // per head the query half of q_proj's [query, gate] rows, normed, rotated and scaled by 1/sqrt(hd)
    this.norm(rec, ws.qg, L.qNorm, ws.q, M * nh, hd, { inStride: 2 * hd, outStride: hd });
    const rot = { M, d: hd, rot: rope.rotaryDim, pos0: p, round };
    qop.partialRope(rec, ws.q, this.rope, { ...rot, heads: nh, scale: hd ** -0.5 });
    op.matmul(rec, L.kProj, ws.xn, ws.attn, rows); // raw k; ws.attn is free until attention
    this.norm(rec, ws.attn, L.kNorm, ws.k, M * nkv, hd);
    qop.partialRope(rec, ws.k, this.rope, { ...rot, heads: nkv, scale: 1 });
    op.matmul(rec, L.vProj, ws.xn, ws.v, rows);
    caps.capture(`q.${i}`, ws.q, M * nh * hd);
    caps.capture(`k.${i}`, ws.k, M * nkv * hd);
    caps.capture(`v.${i}`, ws.v, M * nkv * hd);
    // Block rows go to their positions before attention; rollback only moves nextPos back.
    const rowBytes = nkv * hd * 4;
    rec.copy(ws.k, 0, kv.k, p * rowBytes, M * rowBytes);
    rec.copy(ws.v, 0, kv.v, p * rowBytes, M * rowBytes);
    const plan = a.phase === 'prefill' ? { mode: 'linear' as const, split: 0 } : a.policy.fullStep(M);
    op.attention(rec, {
      M,
      heads: nh,
      kvHeads: nkv,
      d: hd,
      mode: plan.mode,
      split: plan.split,
      window: 0,
      base: 0,
      p,
      round,
      q: ws.q,
      kCache: kv.k,
      vCache: kv.v,
      kStage: kv.k,
      vStage: kv.v,
      out: ws.attn,
      scratch: a.phase === 'prefill' ? this.attnScratch.prefill : this.attnScratch.step,
    });
    qop.outGate(rec, ws.attn, ws.qg, { M, heads: nh, d: hd, stride: 2 * hd, gateOff: hd, round });
    op.matmul(rec, L.oProj, ws.attn, ws.a, rows);
  }

  /** Gated DeltaNet of M rows (docs/QWEN35.md 3.2) from ws.xn: the out_proj output in ws.a. */
  private deltaNet(
    rec: Recorder,
    i: number,
    L: QwenGpuLinearLayer,
    st: GdnLayerState,
    a: { M: number; phase: Phase; rows: op.Rows; policy: Policy; caps: CaptureSet; state?: QwenState },
  ): void {
    const { ws } = this;
    const { M, rows, caps } = a;
    const g = gdnGeometry(this.desc.config);
    const round = this.opts.round;
    // A step's raw rows go to the layer's staging rows (commit builds the window from them).
    const qkv = a.phase === 'prefill' ? ws.qkv : st.qkvStage;
    op.matmul(rec, L.inProjQkv, ws.xn, qkv, rows);
    op.matmul(rec, L.inProjZ, ws.xn, ws.z, rows);
    op.matmul(rec, L.inProjB, ws.xn, ws.gb_in, rows);
    op.matmul(rec, L.inProjA, ws.xn, ws.ga, rows);
    const proj = [
      { src: qkv, width: g.C },
      { src: ws.z, width: g.Hv * g.Dv },
      { src: ws.gb_in, width: g.Hv },
      { src: ws.ga, width: g.Hv },
    ];
    caps.captureRows(`gdn.proj.${i}`, proj, M);
    qop.gdnConv(rec, g, { window: st.window, qkv, weight: L.conv, out: ws.c, M, round });
    if (a.phase === 'prefill') a.state!.advanceWindow(rec, st, qkv, M);
    caps.capture(`gdn.conv.${i}`, ws.c, M * g.C);
    qop.gdnQkNorm(rec, g, { c: ws.c, qk: ws.qk, M, round });
    qop.gdnGates(rec, g, { a: ws.ga, b: ws.gb_in, aLog: L.aLog, dtBias: L.dtBias, gb: ws.gates, M });
    // gdn-chunked: a verify block (never a chain step or the prefill) in the chunked form
    const stage = a.phase === 'step' ? st.sStage : undefined;
    const rc = { S: st.S, qk: ws.qk, c: ws.c, gb: ws.gates, o: ws.o, M, round };
    if (stage && M > 1 && a.policy.gdnChunked) {
      qop.gdnLogGates(rec, g, { a: ws.ga, aLog: L.aLog, dtBias: L.dtBias, lg: ws.lg, M });
      qop.gdnRecurrenceChunked(rec, g, { ...rc, stage, lg: ws.lg });
    } else {
      qop.gdnRecurrence(rec, g, { ...rc, stage, unused: ws.unusedStage, stateBf16: a.policy.gdnStateBf16 });
    }
    caps.capture(`gdn.recurrence.${i}`, ws.o, M * g.Hv * g.Dv);
    qop.gdnGatedNorm(rec, g, { o: ws.o, z: ws.z, weight: L.gatedNorm, y: ws.gn, M, eps: this.desc.eps, round });
    caps.capture(`gdn.gated_norm.${i}`, ws.gn, M * g.Hv * g.Dv);
    op.matmul(rec, L.outProj, ws.gn, ws.a, rows);
  }

  /**
   * LM head + argmax over rows [first, M) of ws.y (the final norm's output), at most maxBlock rows per
   * submit (bounds the [rows, V] logits buffer).
   */
  async head(
    lmHead: GpuLinear,
    first: number,
    M: number,
    split: number,
  ): Promise<{ logits: Float32Array; argmax: Uint32Array }> {
    const d = this.desc;
    const { ws } = this;
    const parts: Float32Array[] = [];
    const ids: number[] = [];
    for (let r0 = first; r0 < M; r0 += this.opts.maxBlock) {
      const n = Math.min(this.opts.maxBlock, M - r0);
      const rec = this.recorder('lm-head');
      rec.copy(ws.y, r0 * d.hidden * 4, ws.headIn, 0, n * d.hidden * 4);
      op.matmul(rec, lmHead, ws.headIn, ws.logits, { M: n, round: this.opts.round, split });
      op.argmax(rec, ws.logits, ws.argmax, n, d.vocab);
      this.submit(rec);
      const [lg, am] = await readMany(this.device, [
        { buffer: ws.logits, bytes: n * d.vocab * 4 },
        { buffer: ws.argmax, bytes: n * 4 },
      ]);
      parts.push(new Float32Array(lg.buffer, lg.byteOffset, n * d.vocab));
      ids.push(...new Uint32Array(am.buffer, am.byteOffset, n));
    }
    refuseNanRows(ids, "the Qwen3.5 model's logits");
    return { logits: concatF32(parts), argmax: Uint32Array.from(ids) };
  }
}
