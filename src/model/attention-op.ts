import type { Recorder } from '../gpu/recorder.ts';
import type { KernelCache } from '../gpu/kernels.ts';
import { storageBuffer } from '../gpu/buffers.ts';
import { GpuError } from '../gpu/errors.ts';

/**
 * The attention op (shaders/attention.wgsl): scores, per-segment softmax and P.V, and their combine,
 * for M query rows over one layer's cache, for every cache layout (ATTENTION_MODE). Re-exported by
 * ops.ts.
 *
 * Two paths with byte-identical arithmetic (kernels-attention.test.ts compares them on the software adapters):
 * four dispatches (scores, seg_softmax, seg_pv, combine), or two (seg_fused, one workgroup per
 * segment and fusedHeads q heads, then combine_fused: the same arithmetic with loads batched for GPUs, see
 * attention.wgsl).
 * See attentionFused for which one a device takes.
 */
const WG = 64;
const groups = (n: number) => Math.ceil(n / WG);

export const ATTENTION_MODE = { physical: 0, chrono: 1, linear: 2, masked: 3, draft: 4 } as const;
export type AttentionMode = keyof typeof ATTENTION_MODE;

/** Keys per segment the exact plan aims at (attention.wgsl SEG_KEYS). */
export const SEG_KEYS = 64;
/** Cap on the exact plan's segments for decode steps and verify blocks; prefill uses 1. */
export const SEG_MAX_EXACT = 64;
/** Most segments any plan may ask for (the inexact splits included): what step scratch is sized for. */
export const SEG_MAX = 64;

/**
 * Scratch of one attention dispatch. The same buffers serve prefill and steps; `segments` is the
 * exact plan's cap for the dispatch (1 for prefill, SEG_MAX_EXACT for steps and verify blocks), part
 * of the arithmetic, so a chain step and a verify block must pass the same value.
 */
export interface AttentionScratch {
  /** [rows, heads, keys] x 2: score and compensation, then exp weights (fused path: segments over 256 keys only). */
  scores: GPUBuffer;
  /** [rows, heads, segments] x 2: each segment's max and sum of weights. */
  stats: GPUBuffer;
  /** [rows, heads, segments, d]: each segment's unnormalized P.V. */
  partial: GPUBuffer;
  segments: number;
}

export interface AttentionArgs {
  M: number;
  heads: number;
  kvHeads: number;
  d: number;
  mode: AttentionMode;
  window: number;
  base: number;
  /** Position of row 0. */
  p: number;
  round: boolean;
  /** 0: the exact partition (a function of each row's key count). S > 0: exactly S segments (inexact policies). */
  split: number;
  /** MODE_DRAFT: how many of the most recent ring entries the query reads (W or W + 1). */
  span?: number;
  q: GPUBuffer;
  kCache: GPUBuffer;
  vCache: GPUBuffer;
  kStage: GPUBuffer;
  vStage: GPUBuffer;
  out: GPUBuffer;
  scratch: AttentionScratch;
  /** Tests only: force the fused (true) or four-pass (false) path instead of attentionFused's choice. */
  fused?: boolean;
  /**
   * Also write the group sums (groups of `groupSize` along each row of out) that o_proj's exact kernels read,
   * into `buffer` ([M, heads * d / groupSize]), where the fused path can (outSumsFit): attention() says whether it did.
   */
  outSums?: { buffer: GPUBuffer; groupSize: number };
}

/**
 * Whether combine_fused can write out's group sums: every group within one workgroup's 4 WG values (groups
 * tile a row of heads * d values and the workgroup's span) and whole PB batches of vec4s per group.
 */
export function outSumsFit(heads: number, d: number, groupSize: number): boolean {
  return groupSize % 32 === 0 && (4 * WG) % groupSize === 0 && (heads * d) % groupSize === 0;
}

/**
 * Whether a device runs attention fused (seg_fused + combine_fused) or in four passes: fused on GPUs, where
 * a decode step is bound by its dispatch count (~10-40 us each on an H200, however small) and a
 * workgroup barrier is cheap; four passes on software adapters, where each of seg_fused's barriers is
 * a context switch per invocation. A property of the device alone (never of M, the plan or the key
 * count), so one engine always runs one path: the two have the same arithmetic, but a GPU compiler may
 * contract multiply-adds differently in two pipelines (docs/DESIGN.md, "Numerics contract").
 */
export function attentionFused(kernels: KernelCache): boolean {
  return kernels.kernelClass === 'gpu';
}

/**
 * Heads per seg_fused workgroup (attention.wgsl HP): 2 where the q heads sharing a kv head come in pairs, so
 * that each K and V load serves two heads; else 1. A function of the geometry alone, so a model's chain
 * steps and verify blocks run one pipeline; each head's arithmetic does not depend on it (same bytes).
 */
export function fusedHeads(heads: number, kvHeads: number): number {
  return (heads / kvHeads) % 2 === 0 ? 2 : 1;
}

/** Keys each row reduces over in MODE_MASKED: the union of the M rows' windows. */
export function maskedKeyCount(p: number, M: number, window: number): number {
  return p + M - Math.max(0, p + 1 - window);
}

/** The most keys any row of the dispatch reads (attention.wgsl key_count; rows later in a block read more). */
function maxKeyCount(a: AttentionArgs): number {
  switch (a.mode) {
    case 'linear':
      return a.p + a.M;
    case 'masked':
      return maskedKeyCount(a.p, a.M, a.window);
    case 'draft':
      return Math.min(a.p, a.span ?? 0);
    default:
      return Math.min(a.p + a.M, a.window);
  }
}

/** Segments a row of n keys is cut into (attention.wgsl seg_count). */
export function segmentCount(n: number, split: number, segments: number): number {
  return split > 0 ? split : Math.max(1, Math.min(segments, Math.ceil(n / SEG_KEYS)));
}

export interface AttentionScratchShape {
  /** Most query heads of any layer. */
  heads: number;
  /** Widest query row of any layer (heads x head_dim). */
  qWidth: number;
  /** Most keys a row may read. */
  maxKeys: number;
  /** Most rows of a prefill dispatch (one segment per row). */
  prefillRows: number;
  /** Most rows of a decode step or verify block (up to SEG_MAX segments per row). */
  stepRows: number;
}

/** Bytes of each scratch buffer for `s` (the one place this arithmetic lives). */
export function attentionScratchBytes(s: AttentionScratchShape): { scores: number; stats: number; partial: number } {
  const rows = Math.max(s.prefillRows, s.stepRows);
  const segRows = Math.max(s.prefillRows, s.stepRows * SEG_MAX); // (row, segment) pairs
  return {
    scores: 2 * rows * s.heads * s.maxKeys * 4,
    stats: 2 * segRows * s.heads * 4,
    partial: segRows * s.qWidth * 4,
  };
}

/**
 * Allocates the scratch for `s`, refusing sizes over the adapter's binding limit. Returns the scratch
 * of prefill dispatches and of steps / verify blocks: the same buffers, different exact-plan caps.
 */
export function createAttentionScratch(
  device: GPUDevice,
  s: AttentionScratchShape,
  label: string,
): { prefill: AttentionScratch; step: AttentionScratch; buffers: GPUBuffer[] } {
  const bytes = attentionScratchBytes(s);
  const limit = device.limits.maxStorageBufferBindingSize;
  for (const [name, n] of Object.entries(bytes)) {
    if (n > limit) {
      throw new GpuError(
        'limits',
        `Attention ${name} for ${Math.max(s.prefillRows, s.stepRows)} rows x ${s.heads} heads x ${s.maxKeys} keys (${s.stepRows} step rows x ${SEG_MAX} segments) need ${n} bytes, over this adapter's binding limit of ${limit}; use a smaller prefill chunk, block or context.`,
      );
    }
  }
  const scores = storageBuffer(device, bytes.scores, `${label}.scores`);
  const stats = storageBuffer(device, bytes.stats, `${label}.stats`);
  const partial = storageBuffer(device, bytes.partial, `${label}.partial`);
  return {
    prefill: { scores, stats, partial, segments: 1 },
    step: { scores, stats, partial, segments: SEG_MAX_EXACT },
    buffers: [scores, stats, partial],
  };
}

/** Records attention; returns whether it wrote a.outSums (the fused path, where they fit). */
export function attention(rec: Recorder, a: AttentionArgs): boolean {
  const { scores, stats, partial, segments } = a.scratch;
  if (!(a.split >= 0 && a.split <= SEG_MAX) || !Number.isInteger(a.split))
    throw new Error(`attention split ${a.split} outside 0..${SEG_MAX}`);
  // Strides of the scratch layouts: the dispatch's largest key and segment counts. They place values
  // only (a row's arithmetic never reads them), so a block and its chain steps may differ here.
  const keyStride = Math.max(1, maxKeyCount(a));
  const segStride = segmentCount(keyStride, a.split, segments);
  const rows = a.M * a.heads;
  const need = {
    scores: 2 * rows * keyStride * 4,
    stats: 2 * rows * segStride * 4,
    partial: rows * segStride * a.d * 4,
  };
  for (const [name, n] of Object.entries(need)) {
    const have = a.scratch[name as keyof typeof need].size;
    if (n > have)
      throw new Error(
        `attention scratch "${name}" holds ${have} bytes, ${n} needed (M ${a.M}, ${a.heads} heads, ${keyStride} keys, ${segStride} segments)`,
      );
  }
  const fused = a.fused ?? attentionFused(rec.kernels);
  // combine_fused also writes out's group sums where asked and where they fit (the other passes never do)
  const sums = fused && a.outSums && outSumsFit(a.heads, a.d, a.outSums.groupSize) ? a.outSums : undefined;
  const params = rec.params('attention.wgsl', {
    M: a.M,
    heads: a.heads,
    kv_heads: a.kvHeads,
    d: a.d,
    mode: ATTENTION_MODE[a.mode],
    window: a.window,
    base: a.base,
    p: a.p,
    key_stride: keyStride,
    round: a.round,
    span: a.span ?? 0,
    seg_max: segments,
    split: a.split,
    seg_stride: segStride,
    xs_group: sums?.groupSize ?? 0,
  });
  const d4 = a.d / 4;
  if (fused) {
    // One workgroup per (row, HP heads, segment slot); slots past a row's segment count return at once.
    const HP = fusedHeads(a.heads, a.kvHeads);
    rec.run(
      'attention.wgsl',
      'seg_fused',
      { HP },
      [params, a.q, a.kCache, a.vCache, a.kStage, a.vStage, scores, undefined, stats, partial],
      (rows / HP) * segStride,
    );
    // combine_fused binds xs_out whether it writes it or not: a placeholder of its own when not
    const xsOut = sums?.buffer ?? rec.kernels.scratch('unused.attention-xs', 16);
    rec.run(
      'attention.wgsl',
      'combine_fused',
      {},
      [params, undefined, undefined, undefined, undefined, undefined, undefined, a.out, stats, partial, xsOut],
      groups(rows * d4),
    );
    return sums !== undefined;
  }
  rec.run(
    'attention.wgsl',
    'scores',
    {},
    [params, a.q, a.kCache, undefined, a.kStage, undefined, scores],
    groups(rows * keyStride),
  );
  rec.run(
    'attention.wgsl',
    'seg_softmax',
    {},
    [params, undefined, undefined, undefined, undefined, undefined, scores, undefined, stats],
    groups(rows * segStride),
  );
  rec.run(
    'attention.wgsl',
    'seg_pv',
    {},
    [params, undefined, undefined, a.vCache, undefined, a.vStage, scores, undefined, undefined, partial],
    groups(rows * segStride * d4),
  );
  rec.run(
    'attention.wgsl',
    'combine',
    {},
    [params, undefined, undefined, undefined, undefined, undefined, undefined, a.out, stats, partial],
    groups(rows * d4),
  );
  return false;
}
