import { maskedKeyCount, type AttentionMode } from './ops.ts';
import { SEG_MAX } from './attention-op.ts';
import type { MlxMachine } from './mlx-dispatch.ts';

/**
 * A numerics policy decides, per op, which kernel variant a forward uses. `exact` keeps every row's
 * arithmetic identical whatever M is, so block rows equal chain rows. Each inexact policy switches
 * on one real kernel variant that re-creates a known cause of block-versus-chain divergence
 * (docs/MODEL.md section 7); the chain arm (M = 1) always runs the exact kernels, as classic decode does.
 * The MLX policies (src/model/mlx-policies.ts) instead predict one machine: both arms run the
 * quantized-matmul kernel MLX picks for their M, so they differ exactly where MLX's choice does.
 */
export interface AttentionPlan {
  mode: AttentionMode;
  /**
   * How each row's keys are cut into segments (attention.wgsl): 0 = the exact partition, a function
   * of the row's key count only; S > 0 = exactly S segments (1..SEG_MAX), the inexact policies' count
   * picked from M or from the widened key count. Same kernels either way: only the partition changes.
   */
  split: number;
}

export interface Policy {
  name: string;
  description: string;
  /** Attention of a sliding layer in a chain step / verify block of M rows. */
  slidingStep(M: number, window: number, p: number): AttentionPlan;
  /** Attention of a full layer in a chain step / verify block of M rows. */
  fullStep(M: number): AttentionPlan;
  /** Matmul variant for M rows: 0 = exact, n = split-K with n ranges. */
  matmulSplit(M: number, phase: 'prefill' | 'step'): number;
  /** When set, the two arms prefill separately with these chunk sizes (0 = whole prompt). */
  prefillChunks?: { chain: number; block: number };
  /** When set, quantized matmuls of steps and verify blocks run MLX's kernel for their M on this Apple GPU. */
  mlx?: MlxMachine;
  /**
   * Gated DeltaNet (Qwen3.5, src/model/qwen3_5/policies.ts): the recurrent state is stored in bf16 after every
   * forward, while a verify block keeps it in f32 between its own tokens.
   */
  gdnStateBf16?: boolean;
  /**
   * Gated DeltaNet (Qwen3.5): verify blocks (M > 1) run the recurrence in the chunked (WY) form, chain steps
   * and prefill the token-by-token form.
   */
  gdnChunked?: boolean;
  /**
   * Gemma 4 MoE (src/model/gemma4/moe/moe-policies.ts): verify blocks reduce each expert matvec in as many K ranges as
   * the block has rows routed to that expert (the batch-dependent grouping of fast MoE kernels).
   */
  moeGrouped?: boolean;
}

const exactSliding = (): AttentionPlan => ({ mode: 'physical', split: 0 });
const exactFull = (): AttentionPlan => ({ mode: 'linear', split: 0 });

export const EXACT: Policy = {
  name: 'exact',
  description:
    'Reference: every row runs the same pipeline and reduction order whatever M is; verify reads the ring in classic physical order.',
  slidingStep: exactSliding,
  fullStep: exactFull,
  matmulSplit: () => 0,
};

/** MLX's two-pass vector attention picks its block count from the key count (at most 32 <= SEG_MAX). */
const blocksForKeys = (keys: number) => Math.min(32, Math.max(2, Math.ceil(keys / 16)));
/** Attention key segments picked from the row count (capped at the kernel's SEG_MAX). */
const blocksForM = (M: number) => Math.min(M, SEG_MAX);
/** Split-K of a "wide" quantized matmul kernel for 2 <= M (MLX qmv vs qmm). */
const matmulSplitForM = (M: number) => (M > 1 ? 2 : 0);
/** Prefill GEMM with split-K chosen by the row count (MLX steel GEMM). */
const prefillSplitForM = (M: number) => (M >= 32 ? 4 : M >= 8 ? 2 : 0);

const ringChronological: Policy = {
  ...EXACT,
  name: 'ring-chronological',
  description:
    "Verify reads the sliding keys in chronological order instead of classic decode's physical ring order (differs once the ring has wrapped).",
  slidingStep: (M) => (M > 1 ? { mode: 'chrono', split: 0 } : exactSliding()),
};

const maskWidened: Policy = {
  ...EXACT,
  name: 'mask-widened',
  description:
    'Verify reduces over the whole buffered width in chronological order under an additive -inf mask, with a block count that depends on the key count (MLX vector attention).',
  slidingStep: (M, window, p) => {
    if (M === 1) return exactSliding();
    return { mode: 'masked', split: blocksForKeys(maskedKeyCount(p, M, window)) };
  },
};

const matmulMSplit: Policy = {
  ...EXACT,
  name: 'matmul-m-split',
  description:
    'Matmuls with M > 1 use a split-K reduction (two partial sums) where M = 1 sums in one pass (MLX qmv vs wide kernels).',
  matmulSplit: (M, phase) => (phase === 'step' ? matmulSplitForM(M) : 0),
};

const attentionMSplit: Policy = {
  ...EXACT,
  name: 'attention-m-split',
  description:
    'Attention with M > 1 cuts its keys into M segments (two-pass kernels that pick the block count from M); M = 1 uses the exact partition, which depends on the key count only.',
  slidingStep: (M) => (M > 1 ? { mode: 'physical', split: blocksForM(M) } : exactSliding()),
  fullStep: (M) => (M > 1 ? { mode: 'linear', split: blocksForM(M) } : exactFull()),
};

const prefillChunkMismatch: Policy = {
  ...EXACT,
  name: 'prefill-chunk-mismatch',
  description:
    'The two arms prefill with different chunk sizes (whole prompt vs chunks of 4) through a prefill GEMM whose split-K depends on the row count, so their K/V caches differ.',
  matmulSplit: (M, phase) => (phase === 'prefill' ? prefillSplitForM(M) : 0),
  prefillChunks: { chain: 0, block: 4 },
};

const mlxMetal: Policy = {
  name: 'mlx-metal',
  description:
    'What MLX does on Apple GPUs: masked, widened chronological verify attention with key-count blocks, M-dependent attention splits on full layers, and split-K matmuls for M > 1.',
  slidingStep: maskWidened.slidingStep,
  fullStep: attentionMSplit.fullStep,
  matmulSplit: matmulMSplit.matmulSplit,
};

/**
 * The policies of the generic mechanisms, in menu order; the per-chip MLX policies (mlx-policies.ts) follow them
 * in the registry (src/model/policy-registry.ts), the one place policies are looked up.
 */
export const MECHANISM_POLICIES: readonly Policy[] = [
  EXACT,
  ringChronological,
  maskWidened,
  matmulMSplit,
  attentionMSplit,
  prefillChunkMismatch,
  mlxMetal,
];
