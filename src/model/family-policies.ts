/**
 * The numerics policies each model family takes: Gemma 4 every shared policy (src/model/policy.ts), Qwen3.5
 * its own list (src/model/qwen/policies.ts). The command line's `policies` and the page's policy menus read
 * them from here.
 */
import type { ModelFamily } from '../format/open-target.ts';
import { POLICIES, policyByName, type Policy } from './policy.ts';
import { QWEN_POLICIES, QWEN_POLICY_LIST, qwenPolicyByName } from './qwen/policies.ts';
import { MOE_ONLY_POLICIES } from './family/moe-policies.ts';

/**
 * The families a policy is listed for: a model family, or 'gemma4-moe' for the policies only Gemma 4 MoE targets
 * take (moe-grouped; a MoE target also takes every 'gemma4' policy).
 */
export type PolicyFamily = ModelFamily | 'gemma4-moe';

/** Which families a policy applies to: every shared policy is Gemma 4's; Qwen3.5 takes its own list; MoE adds moe-grouped. */
export function policyFamilies(p: Policy): PolicyFamily[] {
  const gemma = POLICIES.some((x) => x.name === p.name);
  return [
    ...(gemma ? ['gemma4' as const] : []),
    ...(MOE_ONLY_POLICIES.has(p.name) ? ['gemma4-moe' as const] : []),
    ...(QWEN_POLICIES.has(p.name) ? ['qwen3_5' as const] : []),
  ];
}

/** The policies a family's targets take, in menu order. */
export function familyPolicies(family: ModelFamily): readonly Policy[] {
  return family === 'qwen3_5' ? QWEN_POLICY_LIST : POLICIES;
}

/**
 * A policy by name for a family's target; throws naming the family's policies when it does not take it, and the
 * family that does take it when it is another family's (gdn-chunked for a Gemma 4 target: "unknown" would send the
 * user looking for a typo).
 */
export function familyPolicy(family: ModelFamily, name: string): Policy {
  const gemma = POLICIES.some((p) => p.name === name);
  if (family === 'gemma4' && !gemma && QWEN_POLICIES.has(name))
    throw new Error(
      `policy ${name} applies to Qwen3.5 targets only; Gemma 4 targets take ${POLICIES.map((p) => p.name).join(', ')} (and moe-grouped on mixture-of-experts targets)`,
    );
  if (family === 'gemma4' && MOE_ONLY_POLICIES.has(name))
    throw new Error(`policy ${name} applies to Gemma 4 mixture-of-experts targets only; this target has no experts`);
  return family === 'qwen3_5' ? qwenPolicyByName(name) : policyByName(name);
}

/**
 * Descriptions in a family's terms where the shared wording names Gemma's mechanisms (the ring, K/V caches
 * only): a Qwen3.5 target has no ring, and its prefill also fills conv windows and recurrent states.
 */
const QWEN_DESCRIPTIONS: Record<string, string> = {
  exact:
    "Reference: every row runs the same pipeline and reduction order whatever M is; a verify block runs each token's conv and recurrent-state update with the chain's arithmetic, in order.",
  'prefill-chunk-mismatch':
    'The two arms prefill with different chunk sizes (whole prompt vs chunks of 4) through a prefill GEMM whose split-K depends on the row count, so their conv windows, recurrent states and K/V caches differ.',
};

/** The policy menu of a family: each policy's name and its description in the family's terms. */
export function familyPolicyMenu(family: ModelFamily): { name: string; description: string }[] {
  return familyPolicies(family).map((p) => ({
    name: p.name,
    description: (family === 'qwen3_5' ? QWEN_DESCRIPTIONS[p.name] : undefined) ?? p.description,
  }));
}

/**
 * Refuses, before any model is read, a policy name that no target of the family takes (a typo, or another family's
 * policy). The MoE-only policies are left to the loaded target: only then is it known whether it has experts.
 */
export function checkPolicyName(family: ModelFamily, name: string): void {
  if (family === 'gemma4' && MOE_ONLY_POLICIES.has(name)) return;
  familyPolicy(family, name);
}
