import { EXACT, POLICIES, type Policy } from '../policy.ts';

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

const SHARED = ['exact', 'matmul-m-split', 'attention-m-split', 'prefill-chunk-mismatch'];

export const QWEN_POLICY_LIST: readonly Policy[] = [
  ...SHARED.map((n) => POLICIES.find((p) => p.name === n)!),
  GDN_STATE_BF16,
  GDN_CHUNKED,
];

/** Names of the policies a Qwen3.5 target takes. */
export const QWEN_POLICIES: ReadonlySet<string> = new Set(QWEN_POLICY_LIST.map((p) => p.name));

export function qwenPolicyByName(name: string): Policy {
  const p = QWEN_POLICY_LIST.find((x) => x.name === name);
  if (!p)
    throw new Error(
      `policy ${name} does not apply to Qwen3.5 targets (they take ${QWEN_POLICY_LIST.map((x) => x.name).join(', ')})`,
    );
  return p;
}
