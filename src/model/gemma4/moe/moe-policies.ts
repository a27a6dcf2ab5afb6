/**
 * The numerics policies of Gemma 4 MoE targets (26B-A4B): every shared Gemma 4 policy (src/model/policy.ts: the
 * attention, split-K and MLX policies act on the attention and on every ordinary linear, the router's included;
 * the expert matvecs keep their exact arithmetic under them) plus `moe-grouped`, which only a MoE target has.
 */
import { EXACT, type Policy } from '../../policy.ts';

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

/** The policies of the MoE's own mechanisms (src/model/policy-registry.ts lists them for 'gemma4-moe'). */
export const MOE_OWN_POLICIES: readonly Policy[] = [MOE_GROUPED];
