/**
 * The numerics policies of Gemma 4 MoE targets (26B-A4B): every shared Gemma 4 policy (src/model/policy.ts: the
 * attention, split-K and MLX policies act on the attention and on every ordinary linear, the router's included;
 * the expert matvecs keep their exact arithmetic under them) plus `moe-grouped`, which only a MoE target has.
 */
import { EXACT, POLICIES, type Policy } from '../policy.ts';

/**
 * Verify blocks put the rows routed to one expert into one matmul whose reduction depends on how many rows it
 * holds, as fast MoE kernels do (mlx-lm SwitchGLU sorts the (row, expert) pairs by expert for gather_qmm once
 * M x k >= 64; fused MoE kernels tile each expert's rows). Modelled as one mechanism in shaders/moe_experts.wgsl:
 * a slot's K reduction is cut into as many ranges as the block has rows on its expert (one row: the exact bytes,
 * so chain steps are unchanged). Everything else is `exact`.
 */
export const MOE_GROUPED: Policy = {
  ...EXACT,
  name: 'moe-grouped',
  description:
    "Verify blocks group the rows routed to the same expert into one matmul whose reduction depends on the group's row count (mlx-lm SwitchGLU's sorted gather_qmm, fused MoE kernels); chain steps keep one row per expert.",
  moeGrouped: true,
};

/** The policies a Gemma 4 MoE target takes, in menu order. */
export const MOE_POLICY_LIST: readonly Policy[] = [...POLICIES, MOE_GROUPED];

/** Names of the policies only MoE targets take. */
export const MOE_ONLY_POLICIES: ReadonlySet<string> = new Set([MOE_GROUPED.name]);

export function moePolicyByName(name: string): Policy {
  const p = MOE_POLICY_LIST.find((x) => x.name === name);
  if (!p)
    throw new Error(
      `Unknown policy "${name}" for a Gemma 4 MoE target (known: ${MOE_POLICY_LIST.map((x) => x.name).join(', ')}).`,
    );
  return p;
}
