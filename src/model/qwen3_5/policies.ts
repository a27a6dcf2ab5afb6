import { EXACT, type Policy } from '../policy.ts';

/**
 * The numerics policies of the Qwen3.5 family. Shared ones whose mechanism it has: split-K by M in the
 * matmuls, a key split by M in full attention, prefill chunk mismatch. Its own: gdn-state-bf16, gdn-chunked. The
 * sliding-ring policies touch a cache Qwen3.5 does not have, and MLX's kernel choice is modelled for Gemma's
 * linears only (not MLX's gated-delta kernel): not offered.
 */
export const GDN_STATE_BF16: Policy = {
  ...EXACT,
  name: 'gdn-state-bf16',
  description:
    'The Gated DeltaNet recurrent state is stored in bf16 after every forward: a chain step rounds it before the next token, a verify block keeps it in f32 between its own tokens (per-step state rounding, mlxcel #1182).',
  gdnStateBf16: true,
};

export const GDN_CHUNKED: Policy = {
  ...EXACT,
  name: 'gdn-chunked',
  description:
    'Verify blocks run the Gated DeltaNet recurrence in the chunked (WY) form of fast verify and prefill kernels (transformers torch_chunk_gated_delta_rule, fla chunk_gated_delta_rule, chunk 64); chain steps keep the token-by-token form.',
  gdnChunked: true,
};

/** The shared policies (src/model/policy.ts) whose mechanism a Qwen3.5 target has. */
export const QWEN_SHARED_POLICY_NAMES: readonly string[] = [
  'exact',
  'matmul-m-split',
  'attention-m-split',
  'prefill-chunk-mismatch',
];

/** The policies of the family's own mechanism, the Gated DeltaNet (src/model/policy-registry.ts lists them). */
export const QWEN_OWN_POLICIES: readonly Policy[] = [GDN_STATE_BF16, GDN_CHUNKED];

/**
 * Descriptions in the family's terms where the shared wording names Gemma's mechanisms (the ring, K/V caches
 * only): a Qwen3.5 target has no ring, and its prefill also fills conv windows and recurrent states.
 */
export const QWEN_DESCRIPTIONS: Readonly<Record<string, string>> = {
  exact:
    "Reference: every row runs the same pipeline and reduction order whatever M is; a verify block runs each token's conv and recurrent-state update with the chain's arithmetic, in order.",
  'prefill-chunk-mismatch':
    'The two arms prefill with different chunk sizes (whole prompt vs chunks of 4) through a prefill GEMM whose split-K depends on the row count, so their conv windows, recurrent states and K/V caches differ.',
};
