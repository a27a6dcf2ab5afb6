/**
 * GPU memory a model will take, computed before anything is allocated, so that a model that cannot fit is
 * refused with numbers instead of failing mid-upload (or being OOM-killed). WebGPU exposes no memory total:
 * the only hard facts are the per-buffer limits; the total is checked against a caller-supplied budget
 * (`--memory-budget`, or navigator.deviceMemory in the browser).
 *
 * The buffer list mirrors what the engine allocates: weights split by rows as TensorUploader does
 * (src/gpu/upload.ts), KV caches as KvCache (kv-cache.ts), workspace and RoPE tables as TargetModel
 * (target.ts), attention scratch as createAttentionScratch (attention-op.ts, attentionScratchBytes).
 * Each buffer is rounded as storageBuffer rounds it (multiple of 4, at least 16 bytes).
 */
import {
  linearTensors,
  type AssistantDescription,
  type Linear,
  type ModelDescription,
  type TargetDescription,
  type TensorRef,
} from '../format/model-description.ts';
import type { GpuContext } from '../gpu/device.ts';
import { GpuError } from '../gpu/errors.ts';
import { limitProfile, type LimitProfileName } from '../gpu/limit-profiles.ts';
import { bindingLimit, rowsPerBinding, widestRowBytes, type BindingLimits } from '../gpu/upload.ts';
import { kMajorFits, type AffineLayout } from '../gpu/weight-layout.ts';
import { modelTensors } from './gemma4/model-tensors.ts';
import { stackedQkvBlocks } from './ops.ts';
import { attentionScratchBytes, type AttentionScratchShape } from './attention-op.ts';

export interface MemoryOptions {
  /** Longest sequence (rows of the full-attention caches and RoPE tables). */
  maxContext: number;
  /** Widest verify block K. */
  maxBlock: number;
  /** Rows per prefill forward. */
  prefillChunk: number;
  /**
   * The layout the affine linears are uploaded in (defaultLayout(device) in gpu-weights.ts); default MLX's. The
   * k-major one holds a tensor part in both layouts while it rewrites it (MemoryPlan.rewrite).
   */
  layout?: AffineLayout;
}

/**
 * The per-buffer limits a plan is made under, and the browser limit profile they come from (src/gpu/limit-profiles.ts)
 * where the device was capped to one: a refusal then names the browser whose limit it is.
 */
export type PlanLimits = BindingLimits & { profile?: LimitProfileName };

/** The limits of the device `ctx` holds, as a plan takes them (with its limit profile, if any). */
export function planLimitsOf(ctx: GpuContext): PlanLimits {
  const { maxBufferSize, maxStorageBufferBindingSize } = ctx.device.limits;
  const profile = ctx.report?.limitProfile;
  return { maxBufferSize, maxStorageBufferBindingSize, ...(profile ? { profile } : {}) };
}

export interface OversizeBuffer {
  what: string;
  /** What the buffer holds: a weight is the checkpoint's, a cache or workspace grows with the run's settings. */
  use: Category;
  bytes: number;
  limit: number;
  limitName: 'maxBufferSize' | 'maxStorageBufferBindingSize';
}

export interface MemoryPlan {
  /** Model types planned, e.g. ["gemma4_unified", "gemma4_unified_assistant"]. */
  models: string[];
  /** Bytes of GPU buffers by use; total = weights + cache + workspace. */
  weights: number;
  cache: number;
  workspace: number;
  total: number;
  /**
   * Bytes held beyond the total while the weights upload: the k-major rewrite's largest tensor part (in both
   * layouts for the time of its copy; kMajorRewriteBytes); 0 in MLX's layout. checkMemory counts it.
   */
  rewrite: number;
  buffers: number;
  largest: { what: string; bytes: number };
  /** Buffers (or single rows of a weight) larger than one buffer may be on this adapter. */
  oversize: OversizeBuffer[];
  limits: PlanLimits;
  options: MemoryOptions;
}

type Category = 'weights' | 'cache' | 'workspace';

/** Accumulates the planned buffers; src/model/qwen3_5/memory.ts plans Qwen3.5 targets with it. */
export class Planner {
  readonly plan: MemoryPlan;
  /** Every buffer is bound whole as storage, so it must fit both limits. */
  private readonly limit: number;
  private readonly limitName: OversizeBuffer['limitName'];

  constructor(limits: PlanLimits, options: MemoryOptions) {
    this.limit = bindingLimit(limits);
    this.limitName =
      limits.maxStorageBufferBindingSize <= limits.maxBufferSize ? 'maxStorageBufferBindingSize' : 'maxBufferSize';
    this.plan = {
      models: [],
      weights: 0,
      cache: 0,
      workspace: 0,
      total: 0,
      rewrite: 0,
      buffers: 0,
      largest: { what: '', bytes: 0 },
      oversize: [],
      limits,
      options,
    };
  }

  buffer(cat: Category, what: string, bytes: number): void {
    const size = Math.max(16, Math.ceil(bytes / 4) * 4);
    this.plan[cat] += size;
    this.plan.total += size;
    this.plan.buffers++;
    if (size > this.plan.largest.bytes) this.plan.largest = { what, bytes: size };
    if (size > this.limit) this.oversize(what, size, cat);
  }

  /** The k-major rewrite of `linears` (kMajorRewriteBytes) where the plan's layout is k-major: the largest counts. */
  rewriteOf(linears: Linear[]): void {
    if (this.plan.options.layout !== 'k-major') return;
    this.plan.rewrite = Math.max(this.plan.rewrite, kMajorRewriteBytes(linears, this.plan.limits));
  }

  oversize(what: string, bytes: number, use: Category = 'weights'): void {
    this.plan.oversize.push({ what, bytes, use, limit: this.limit, limitName: this.limitName });
  }

  /** The tensors of one linear share a row partition sized by the widest row (rowsPerBinding, as the upload). */
  rowSplit(refs: TensorRef[]): void {
    const perPart = rowsPerBinding(refs, this.plan.limits);
    if (perPart < 1) {
      const rowBytes = widestRowBytes(refs);
      this.oversize(`one row of ${refs[0].name} (${rowBytes} bytes)`, rowBytes);
      return;
    }
    for (const r of refs) {
      const rows = r.shape.length === 0 ? 1 : r.shape[0];
      const rb = r.byteLength / rows;
      for (let start = 0; start < rows; start += perPart) {
        this.buffer(
          'weights',
          `${r.name}[${start}:${Math.min(rows, start + perPart)}]`,
          Math.min(perPart, rows - start) * rb,
        );
      }
    }
  }
}

/**
 * The memory the k-major rewrite needs beyond the weights: its largest tensor part (uploadLinear splits a linear's
 * codes, scales and biases into the same row parts, rowsPerBinding, and TensorUploader.upload holds a part in both
 * layouts until its copy is submitted). An upper bound: every affine linear of `linears` that the layout fits
 * counts, also a stacked q/k/v that uploadLinear leaves in MLX's layout.
 */
export function kMajorRewriteBytes(linears: Linear[], limits: BindingLimits): number {
  let most = 0;
  for (const l of linears) {
    if (l.kind !== 'affine' || !kMajorFits(l)) continue;
    const refs = linearTensors(l);
    const rows = Math.min(l.outFeatures, Math.max(1, rowsPerBinding(refs, limits)));
    most = Math.max(most, ...refs.map((r) => (rows * r.byteLength) / r.shape[0]));
  }
  return most;
}

/** The buffers of uploadWeights (modelTensors: tensors and derived buffers), and the k-major rewrite's extra part. */
function weights(p: Planner, d: ModelDescription): void {
  const t = modelTensors(d);
  for (const l of [...t.linears, ...t.experts]) p.rowSplit(linearTensors(l));
  for (const v of t.vectors) p.rowSplit([v]);
  for (const b of t.derived) p.buffer('weights', b.name, b.bytes);
  p.rewriteOf(t.linears);
}

/** KvCache: sliding layers keep W slots, full layers maxContext rows; f32; plus per-layer staging rows. */
function caches(p: Planner, d: TargetDescription, o: MemoryOptions): void {
  d.layers.forEach((l, i) => {
    const row = l.numKvHeads * l.headDim * 4;
    const slots = l.type === 'sliding' ? d.window : o.maxContext;
    const stage = l.type === 'sliding' ? o.maxBlock : 1;
    for (const kv of ['K', 'V']) {
      p.buffer(
        'cache',
        `${kv} cache of layer ${i} (${l.type}, ${slots} positions x ${l.numKvHeads} x ${l.headDim})`,
        slots * row,
      );
      p.buffer('cache', `${kv} staging of layer ${i}`, stage * row);
    }
  });
}

/** The three buffers of createAttentionScratch for shape `s` (scores, per-segment stats and partial P.V). */
function attentionScratch(p: Planner, who: string, s: AttentionScratchShape): void {
  for (const [name, bytes] of Object.entries(attentionScratchBytes(s))) {
    p.buffer(
      'workspace',
      `attention ${name} of the ${who} (${s.heads} heads x ${s.maxKeys} keys, ${s.prefillRows} prefill / ${s.stepRows} step rows)`,
      bytes,
    );
  }
}

/** TargetModel's workspace (rows R = max(prefillChunk, maxBlock)) and RoPE tables. */
function targetWorkspace(p: Planner, d: TargetDescription, o: MemoryOptions): void {
  const R = Math.max(o.prefillChunk, o.maxBlock);
  const qw = Math.max(...d.layers.map((l) => l.numHeads * l.headDim));
  const kvw = Math.max(...d.layers.map((l) => l.numKvHeads * l.headDim));
  const heads = Math.max(...d.layers.map((l) => l.numHeads));
  const f = (name: string, floats: number) => p.buffer('workspace', `workspace "${name}" of the target`, floats * 4);
  for (const n of ['h', 'xn', 'a', 'y']) f(n, R * d.hidden);
  for (const n of ['q', 'attn']) f(n, R * qw);
  for (const n of ['kraw', 'vraw', 'k', 'v']) f(n, R * kvw);
  const stack = stackedQkvBlocks(o.maxBlock, [qw, kvw, kvw]); // as TargetWorkspace sizes it
  f('qkvraw', stack[2].offset + stack[2].floats);
  for (const n of ['g', 'u']) f(n, R * d.intermediate);
  // As target.ts sizes it: prefill rows in one segment each, step / verify rows in up to SEG_MAX.
  attentionScratch(p, 'target', {
    heads,
    qWidth: qw,
    maxKeys: Math.max(d.window, o.maxContext),
    prefillRows: R,
    stepRows: o.maxBlock,
  });
  f('headIn', o.maxBlock * d.hidden);
  f('logits', o.maxBlock * d.vocab);
  f('ids', R);
  f('argmax', o.maxBlock);
  const ropes = new Set(d.layers.map((l) => `${l.rope.theta}/${l.headDim}/${l.rope.partialRotary}`));
  for (const r of ropes) {
    const hd = Number(r.split('/')[1]);
    for (const t of ['cos', 'sin'])
      p.buffer('workspace', `RoPE ${t} table ${r} x ${o.maxContext} positions`, ((o.maxContext * hd) / 2) * 4);
  }
}

/**
 * The assistant's drafting workspace (an estimate: maxBlock rows of its activations and logits), and
 * its attention scratch exactly as assistant.ts sizes it: one query row over the target's caches (up
 * to maxContext rows, or the target's ring plus the evicted entry).
 */
function assistantWorkspace(p: Planner, d: AssistantDescription, o: MemoryOptions, targetWindow: number): void {
  const R = o.maxBlock;
  const qw = Math.max(...d.layers.map((l) => l.numHeads * l.headDim));
  const heads = Math.max(...d.layers.map((l) => l.numHeads));
  const floats = R * (4 * d.hidden + 2 * qw + 2 * d.intermediate + 2 * d.backboneHidden + d.vocab);
  p.buffer('workspace', 'assistant workspace (estimate)', floats * 4);
  attentionScratch(p, 'assistant', {
    heads,
    qWidth: qw,
    maxKeys: Math.max(o.maxContext, targetWindow + 1),
    prefillRows: 0,
    stepRows: 1,
  });
}

/** Plans the buffers of a target (and optionally its assistant) on an adapter with `limits`. */
export function planMemory(
  desc: ModelDescription,
  options: MemoryOptions,
  limits: PlanLimits,
  assistant?: AssistantDescription,
): MemoryPlan {
  for (const k of ['maxContext', 'maxBlock', 'prefillChunk'] as const) {
    if (!Number.isSafeInteger(options[k]) || options[k] < 1)
      throw new Error(`planMemory: ${k} must be a positive integer, found ${options[k]}`);
  }
  const p = new Planner(limits, options);
  for (const d of assistant ? [desc, assistant] : [desc]) {
    p.plan.models.push(d.modelType);
    weights(p, d);
    if (d.role === 'target') {
      caches(p, d, options);
      targetWorkspace(p, d, options);
    } else {
      assistantWorkspace(p, d, options, desc.window);
    }
  }
  return p.plan;
}

/**
 * The longest context (maxContext) in [1, most] at which `planAt` gives a plan with every buffer within the limits,
 * or 0 where none does: caches, RoPE tables and attention scratch only grow with the context, so a bisection finds
 * it. The plan of the next context up names the buffer that stops it (its oversize list).
 */
export function longestContext(planAt: (maxContext: number) => MemoryPlan, most = 1 << 22): number {
  if (planAt(1).oversize.length > 0) return 0;
  let lo = 1;
  let hi = most;
  if (planAt(hi).oversize.length === 0) return hi;
  while (hi - lo > 1) {
    const mid = lo + Math.floor((hi - lo) / 2);
    if (planAt(mid).oversize.length === 0) lo = mid;
    else hi = mid;
  }
  return lo;
}

/** Whose limits a plan's are, in a message: "this adapter's", or the browser's whose profile capped the device. */
function limitsOwner(limits: PlanLimits): string {
  return limits.profile ? `${limitProfile(limits.profile).browser}'s` : "this adapter's";
}

/** " (limit profile safari)" after a limit of a capped device, to say where the number comes from. */
function profileNote(limits: PlanLimits): string {
  return limits.profile ? ` (limit profile ${limits.profile})` : '';
}

/** "18.41 GB" / "512.0 MB" (decimal units, as disk sizes are shown). */
export function fmtBytes(n: number): string {
  return n >= 1e8 ? `${(n / 1e9).toFixed(2)} GB` : `${(n / 1e6).toFixed(1)} MB`;
}

function needs(p: MemoryPlan): string {
  const parts = `${fmtBytes(p.weights)} for weights + ${fmtBytes(p.cache)} KV cache (context ${p.options.maxContext}) + ${fmtBytes(p.workspace)} workspace`;
  if (p.rewrite === 0) return `${parts} = ${fmtBytes(p.total)}`;
  return `${parts} = ${fmtBytes(p.total)}, plus ${fmtBytes(p.rewrite)} while it rewrites its largest tensor part into the k-major layout`;
}

/**
 * Throws GpuError('out-of-memory') when one buffer cannot exist on this adapter, or when the plan's total with
 * the k-major rewrite's extra part exceeds `availableBytes` (when given). Returns the plan otherwise.
 */
export function checkMemory(plan: MemoryPlan, availableBytes?: number): MemoryPlan {
  const who = plan.models.join(' + ');
  const owner = plan.limits.profile ? limitProfile(plan.limits.profile).browser : 'this adapter';
  const adapter = `${owner} allows buffers of at most ${fmtBytes(plan.limits.maxBufferSize)} (maxBufferSize) and bindings of at most ${fmtBytes(plan.limits.maxStorageBufferBindingSize)} (maxStorageBufferBindingSize)${profileNote(plan.limits)}`;
  if (plan.oversize.length > 0) {
    const o = plan.oversize[0];
    const more =
      plan.oversize.length > 1
        ? ` (and ${plan.oversize.length - 1} more buffer${plan.oversize.length > 2 ? 's' : ''})`
        : '';
    // One buffer over a per-buffer limit: freeing memory (the kind's generic hint) cannot help, so the hint is what
    // can. A weight is already split by rows as far as it goes (rowsPerBinding), so it is the checkpoint that does
    // not fit this adapter; a cache or workspace shrinks with the context, block and prefill chunk.
    const uses = new Set(plan.oversize.map((x) => x.use));
    const remedy = [
      uses.has('weights') ? "This checkpoint's weights cannot be split to fit this adapter's buffers." : '',
      uses.has('cache') || uses.has('workspace') ? 'Use a shorter context or a smaller prefill chunk.' : '',
    ]
      .filter(Boolean)
      .join(' ');
    throw new GpuError(
      'out-of-memory',
      `${who}: ${o.what} needs ${o.bytes} bytes in one buffer, over ${limitsOwner(plan.limits)} ${o.limitName} of ${o.limit} bytes${profileNote(plan.limits)}${more}; ` +
        `the model needs ${needs(plan)} in all.`,
      remedy,
    );
  }
  if (availableBytes !== undefined && plan.total + plan.rewrite > availableBytes) {
    throw new GpuError(
      'out-of-memory',
      `${who} needs ${needs(plan)}, but the memory budget is ${fmtBytes(availableBytes)}; ${adapter}.`,
    );
  }
  return plan;
}
