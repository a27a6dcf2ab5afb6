import type { Qwen35Description } from '../../format/qwen3_5/description.ts';
import { readMany, storageBuffer, uploadBuffer } from '../../gpu/buffers.ts';
import type { GpuContext } from '../../gpu/device.ts';
import { GpuError } from '../../gpu/errors.ts';
import { KernelCache } from '../../gpu/kernels.ts';
import { Recorder } from '../../gpu/recorder.ts';
import { ropeCosSin, ropeFrequencies } from '../../numerics/rope-angles.ts';
import { createAttentionScratch } from '../attention-op.ts';
import * as op from '../ops.ts';
import { EXACT, type Policy } from '../policy.ts';
import type { Captures, ForwardResult, Precision } from '../target.ts';
import * as qop from './ops.ts';
import { gdnGeometry, QwenState, type QwenStateSnapshot } from './state.ts';
import type { QwenGpuAttentionLayer, QwenGpuLinearLayer, QwenGpuWeights } from './weights.ts';

/**
 * The Qwen3.5 target forward on the GPU (docs/QWEN35.md section 3) over M rows at positions p .. p+M-1:
 * prefill (in chunks), a chain step (M = 1) or a verify block (M = K), with TargetModel's contract: step()
 * stages the block's state, commit(n) keeps the first n rows (QwenState). Every op runs one pipeline for every
 * M, so a verify row equals the chain's bytes (tests: test/gpu/qwen-target.test.ts).
 *
 * Capture names (the goldens' act.* without the prefix): attn.i (token mixer output), mlp.i, layer.i,
 * gdn.conv.i, gdn.recurrence.i, gdn.gated_norm.i (Gated DeltaNet layers), final_norm, logits.
 */
export interface QwenTargetOptions {
  maxContext: number;
  maxBlock: number;
  prefillChunk: number;
  precision: Precision;
}

export interface QwenStepOptions {
  logits?: 'all' | 'last' | 'none';
  captures?: Captures;
  /** Matmul split and full-attention plan (the family has no sliding ring); default exact. */
  policy?: Policy;
  finalHidden?: boolean;
}

/**
 * Policies whose mechanism this family has and the engine re-creates: split-K by M in the matmuls, a key split
 * by M in full attention, and prefill chunk mismatch. The sliding-ring policies touch a cache Qwen3.5 does not
 * have, and MLX's kernel choice is modelled for Gemma's linears only (not MLX's gated delta kernel): refused.
 */
export const QWEN_POLICIES: ReadonlySet<string> = new Set([
  'exact',
  'matmul-m-split',
  'attention-m-split',
  'prefill-chunk-mismatch',
]);

export class QwenTargetModel {
  readonly desc: Qwen35Description;
  readonly state: QwenState;
  readonly kernels: KernelCache;
  private readonly device: GPUDevice;
  private readonly round: boolean;
  private readonly R: number;
  private readonly ws: Record<string, GPUBuffer> = {};
  private readonly rope: op.RopeTable;
  private readonly attnScratch: ReturnType<typeof createAttentionScratch>;
  private readonly scopes: Promise<GPUError | null>[] = [];

  constructor(
    ctx: GpuContext,
    readonly weights: QwenGpuWeights,
    readonly opts: QwenTargetOptions,
  ) {
    this.device = ctx.device;
    this.desc = weights.desc;
    const c = this.desc.config;
    this.kernels = new KernelCache(this.device);
    this.round = opts.precision === 'bf16';
    this.state = new QwenState(this.device, c, opts.maxContext, opts.maxBlock);
    this.R = Math.max(opts.prefillChunk, opts.maxBlock);
    const R = this.R;
    const { numHeads: nh, numKvHeads: nkv, headDim: hd } = c.attention;
    this.rope = this.ropeTable(opts.maxContext);
    this.attnScratch = createAttentionScratch(
      this.device,
      { heads: nh, qWidth: nh * hd, maxKeys: opts.maxContext, prefillRows: R, stepRows: opts.maxBlock },
      'qwen-attn',
    );
    const f = (name: string, floats: number) => {
      this.ws[name] = storageBuffer(this.device, Math.max(16, floats * 4), name);
    };
    const d = this.desc;
    f('h', R * d.hidden);
    f('xn', R * d.hidden);
    f('a', R * d.hidden);
    f('y', R * d.hidden);
    f('g', R * d.intermediate);
    f('u', R * d.intermediate);
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
      f('o', R * g.Hv * g.Dv);
      f('gn', R * g.Hv * g.Dv);
    }
    f('headIn', opts.maxBlock * d.hidden);
    f('logits', opts.maxBlock * d.vocab);
    f('ids', R);
    f('argmax', opts.maxBlock);
    f('dummy', 4);
    f('unusedStage', 4);
  }

  /** cos/sin of the rotary dims (pairs i, i + rotaryDim/2), float64 angles rounded once to f32 (as the reference). */
  private ropeTable(positions: number): op.RopeTable {
    const rot = this.desc.config.attention.rope.rotaryDim;
    const half = rot / 2;
    const spec = { ropeType: 'default' as const, theta: this.desc.config.attention.rope.theta, partialRotary: 1 };
    const freq = ropeFrequencies(rot, spec, 'f64');
    const cos = new Float32Array(positions * half);
    const sin = new Float32Array(positions * half);
    for (let p = 0; p < positions; p++) {
      const t = ropeCosSin(freq, p);
      cos.set(t.cos, p * half);
      sin.set(t.sin, p * half);
    }
    return {
      cos: uploadBuffer(this.device, cos, 'qwen-rope.cos'),
      sin: uploadBuffer(this.device, sin, 'qwen-rope.sin'),
      half,
      rotPairs: half,
    };
  }

  /** Prefill `tokens` from position 0 in chunks of opts.prefillChunk (or `chunk`). */
  async prefill(tokens: number[], o: QwenStepOptions & { chunk?: number } = {}): Promise<ForwardResult> {
    if (this.state.nextPos !== 0) throw new Error('prefill needs an empty state (call reset())');
    this.checkContext(tokens.length);
    const chunk = Math.min(o.chunk ?? this.opts.prefillChunk, this.R);
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
      for (const [k, v] of r.captures) out.captures.set(k, out.captures.has(k) ? concat([out.captures.get(k)!, v]) : v);
    }
    this.state.nextPos = tokens.length;
    if (logits.length) out.logits = concat(logits);
    if (argmax.length) out.argmax = Uint32Array.from(argmax);
    if (hidden.length) out.finalHidden = concat(hidden);
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
    const rec = this.recorder('commit');
    this.state.commit(rec, blockStart, accepted);
    this.submit(rec);
  }

  async decode(token: number, o: QwenStepOptions = {}): Promise<ForwardResult> {
    const r = await this.step([token], o);
    this.commit(1);
    return r;
  }

  snapshot(): QwenStateSnapshot {
    const rec = this.recorder('snapshot');
    const s = this.state.snapshot(rec);
    this.submit(rec);
    return s;
  }

  restore(s: QwenStateSnapshot): void {
    const rec = this.recorder('restore');
    this.state.restore(rec, s);
    this.submit(rec);
  }

  reset(): void {
    this.state.reset();
  }

  /** Resolves when the GPU has finished all work submitted so far (phase timings must not leak). */
  async idle(): Promise<void> {
    await this.device.queue.onSubmittedWorkDone();
  }

  destroy(): void {
    Object.values(this.ws).forEach((b) => b.destroy());
    this.attnScratch.buffers.forEach((b) => b.destroy());
    this.rope.cos.destroy();
    this.rope.sin.destroy();
    this.state.destroy();
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
    const oom = /out of memory/i.test(e.message);
    throw new GpuError(oom ? 'out-of-memory' : 'validation', `WebGPU error while ${what}: ${e.message}`);
  }

  private norm(
    rec: Recorder,
    x: GPUBuffer,
    w: GPUBuffer,
    out: GPUBuffer,
    rows: number,
    D: number,
    extra: Partial<op.NormArgs> = {},
  ) {
    op.rmsnorm(rec, x, w, out, this.ws.dummy, { rows, D, eps: this.desc.eps, round: this.round, ...extra });
  }

  /** Gated full attention of M rows at p (docs/QWEN35.md 3.1): writes the o_proj output to ws.a. */
  private attention(
    rec: Recorder,
    i: number,
    L: QwenGpuAttentionLayer,
    M: number,
    p: number,
    kind: 'prefill' | 'step',
    rows: op.Rows,
    policy: Policy,
  ) {
    const ws = this.ws;
    const { numHeads: nh, numKvHeads: nkv, headDim: hd, rope } = this.desc.config.attention;
    const kv = this.state.layers[i];
    if (kv.kind !== 'full') throw new Error(`layer ${i}: state is not a KV cache`);
    const round = this.round;
    op.matmul(rec, L.qProj, ws.xn, ws.qg, rows);
    // per head the query half of q_proj's [query, gate] rows, normed, rotated and scaled by 1/sqrt(hd)
    this.norm(rec, ws.qg, L.qNorm, ws.q, M * nh, hd, { inStride: 2 * hd, outStride: hd });
    const rot = { M, d: hd, rot: rope.rotaryDim, pos0: p, round };
    qop.partialRope(rec, ws.q, this.rope, { ...rot, heads: nh, scale: hd ** -0.5 });
    op.matmul(rec, L.kProj, ws.xn, ws.attn, rows); // raw k; ws.attn is free until attention
    this.norm(rec, ws.attn, L.kNorm, ws.k, M * nkv, hd);
    qop.partialRope(rec, ws.k, this.rope, { ...rot, heads: nkv, scale: 1 });
    op.matmul(rec, L.vProj, ws.xn, ws.v, rows);
    const rowBytes = nkv * hd * 4;
    rec.copy(ws.k, 0, kv.k, p * rowBytes, M * rowBytes);
    rec.copy(ws.v, 0, kv.v, p * rowBytes, M * rowBytes);
    const plan = kind === 'prefill' ? { mode: 'linear' as const, split: 0 } : policy.fullStep(M);
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
      scratch: kind === 'prefill' ? this.attnScratch.prefill : this.attnScratch.step,
    });
    qop.outGate(rec, ws.attn, ws.qg, { M, heads: nh, d: hd, stride: 2 * hd, gateOff: hd, round });
    op.matmul(rec, L.oProj, ws.attn, ws.a, rows);
  }

  /** Gated DeltaNet of M rows (docs/QWEN35.md 3.2): writes the out_proj output to ws.a. */
  private deltaNet(
    rec: Recorder,
    i: number,
    L: QwenGpuLinearLayer,
    M: number,
    kind: 'prefill' | 'step',
    rows: op.Rows,
    capture: (name: string, b: GPUBuffer, floats: number) => void,
  ) {
    const ws = this.ws;
    const g = gdnGeometry(this.desc.config);
    const st = this.state.layers[i];
    if (st.kind !== 'linear') throw new Error(`layer ${i}: state is not a Gated DeltaNet state`);
    const round = this.round;
    // A step's raw rows go to the layer's staging rows (commit builds the window from them).
    const qkv = kind === 'prefill' ? ws.qkv : st.qkvStage;
    op.matmul(rec, L.inProjQkv, ws.xn, qkv, rows);
    op.matmul(rec, L.inProjZ, ws.xn, ws.z, rows);
    op.matmul(rec, L.inProjB, ws.xn, ws.gb_in, rows);
    op.matmul(rec, L.inProjA, ws.xn, ws.ga, rows);
    qop.gdnConv(rec, g, { window: st.window, qkv, weight: L.conv, out: ws.c, M, round });
    if (kind === 'prefill') this.state.advanceWindow(rec, st, qkv, M);
    capture(`gdn.conv.${i}`, ws.c, M * g.C);
    qop.gdnQkNorm(rec, g, { c: ws.c, qk: ws.qk, M, round });
    qop.gdnGates(rec, g, { a: ws.ga, b: ws.gb_in, aLog: L.aLog, dtBias: L.dtBias, gb: ws.gates, M });
    qop.gdnRecurrence(rec, g, {
      S: st.S,
      stage: kind === 'step' ? st.sStage : undefined,
      unused: ws.unusedStage,
      qk: ws.qk,
      c: ws.c,
      gb: ws.gates,
      o: ws.o,
      M,
      round,
    });
    capture(`gdn.recurrence.${i}`, ws.o, M * g.Hv * g.Dv);
    qop.gdnGatedNorm(rec, g, { o: ws.o, z: ws.z, weight: L.gatedNorm, y: ws.gn, M, eps: this.desc.eps, round });
    capture(`gdn.gated_norm.${i}`, ws.gn, M * g.Hv * g.Dv);
    op.matmul(rec, L.outProj, ws.gn, ws.a, rows);
  }

  private async forward(
    tokens: number[],
    p: number,
    kind: 'prefill' | 'step',
    o: QwenStepOptions,
  ): Promise<ForwardResult> {
    const M = tokens.length;
    const d = this.desc;
    const H = d.hidden;
    const ws = this.ws;
    const policy = o.policy ?? EXACT;
    if (!QWEN_POLICIES.has(policy.name))
      throw new Error(
        `policy ${policy.name} does not apply to Qwen3.5 targets (they take ${[...QWEN_POLICIES].join(', ')})`,
      );
    const split = policy.matmulSplit(M, kind);
    const rows: op.Rows = { M, round: this.round, prefill: kind === 'prefill', split };
    const rec = this.recorder(kind);
    const caps = new Map<string, { buf: GPUBuffer; floats: number }>();
    const want = (name: string) => o.captures === 'all' || (o.captures?.has(name) ?? false);
    const capture = (name: string, src: GPUBuffer, floats: number) => {
      if (!want(name)) return;
      const buf = storageBuffer(this.device, floats * 4, `cap.${name}`);
      rec.copy(src, 0, buf, 0, floats * 4);
      caps.set(name, { buf, floats });
    };
    this.device.queue.writeBuffer(ws.ids, 0, Uint32Array.from(tokens));
    op.embed(rec, this.weights.embed, ws.ids, ws.h, 1, rows);
    this.weights.layers.forEach((L, i) => {
      this.norm(rec, ws.h, L.inputNorm, ws.xn, M, H);
      if (L.type === 'full') this.attention(rec, i, L, M, p, kind, rows, policy);
      else this.deltaNet(rec, i, L, M, kind, rows, capture);
      capture(`attn.${i}`, ws.a, M * H);
      qop.add(rec, ws.h, ws.a, M * H, this.round);
      this.norm(rec, ws.h, L.postAttnNorm, ws.xn, M, H);
      op.matmul(rec, L.gate, ws.xn, ws.g, rows);
      op.matmul(rec, L.up, ws.xn, ws.u, rows);
      qop.swiglu(rec, ws.g, ws.u, M * d.intermediate, this.round);
      op.matmul(rec, L.down, ws.g, ws.a, rows);
      capture(`mlp.${i}`, ws.a, M * H);
      qop.add(rec, ws.h, ws.a, M * H, this.round);
      capture(`layer.${i}`, ws.h, M * H);
    });
    const needHead = o.logits === 'all' || o.logits === 'last' || want('logits');
    if (needHead || o.finalHidden || want('final_norm')) {
      this.norm(rec, ws.h, this.weights.finalNorm, ws.y, M, H);
      capture('final_norm', ws.y, M * H);
    }
    this.submit(rec);

    const result: ForwardResult = { captures: new Map() };
    const reads = [...caps.values()].map((c) => ({ buffer: c.buf, bytes: c.floats * 4 }));
    if (o.finalHidden) reads.push({ buffer: ws.y, bytes: M * H * 4 });
    const got = await readMany(this.device, reads);
    const f32 = (b: Uint8Array) => new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
    let at = 0;
    for (const [name, c] of caps) {
      result.captures.set(name, f32(got[at++]));
      c.buf.destroy();
    }
    if (o.finalHidden) result.finalHidden = f32(got[at++]);
    if (needHead) {
      const head = await this.head(o.logits === 'last' ? M - 1 : 0, M, split);
      result.logits = head.logits;
      result.argmax = head.argmax;
      if (want('logits')) result.captures.set('logits', head.logits);
    }
    await this.checkErrors(`running a ${kind} forward of ${M} rows at position ${p}`);
    return result;
  }

  /** LM head + argmax over rows [first, M) of the final-norm output ws.y, at most maxBlock rows per submit. */
  private async head(first: number, M: number, split: number): Promise<{ logits: Float32Array; argmax: Uint32Array }> {
    const d = this.desc;
    const ws = this.ws;
    const parts: Float32Array[] = [];
    const ids: number[] = [];
    for (let r0 = first; r0 < M; r0 += this.opts.maxBlock) {
      const n = Math.min(this.opts.maxBlock, M - r0);
      const rec = this.recorder('lm-head');
      rec.copy(ws.y, r0 * d.hidden * 4, ws.headIn, 0, n * d.hidden * 4);
      op.matmul(rec, this.weights.lmHead, ws.headIn, ws.logits, { M: n, round: this.round, split });
      op.argmax(rec, ws.logits, ws.argmax, n, d.vocab);
      this.submit(rec);
      const [lg, am] = await readMany(this.device, [
        { buffer: ws.logits, bytes: n * d.vocab * 4 },
        { buffer: ws.argmax, bytes: n * 4 },
      ]);
      parts.push(new Float32Array(lg.buffer, lg.byteOffset, n * d.vocab));
      ids.push(...new Uint32Array(am.buffer, am.byteOffset, n));
    }
    return { logits: concat(parts), argmax: Uint32Array.from(ids) };
  }
}

function concat(parts: Float32Array[]): Float32Array {
  if (parts.length === 1) return parts[0];
  const out = new Float32Array(parts.reduce((a, p) => a + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
