/**
 * The numerics policies each model family takes: Gemma 4 every shared policy (src/model/policy.ts), Qwen3.5
 * its own list (src/model/qwen/policies.ts). The command line's `policies` and the page's policy menus read
 * them from here.
 */
import type { ModelFamily } from '../format/open-target.ts';
import { POLICIES, policyByName, type Policy } from './policy.ts';
import { QWEN_POLICIES, QWEN_POLICY_LIST, qwenPolicyByName } from './qwen/policies.ts';

/** Which families a policy applies to: every shared policy is Gemma 4's; Qwen3.5 takes its own list. */
export function policyFamilies(p: Policy): ModelFamily[] {
  const gemma = POLICIES.some((x) => x.name === p.name);
  return [...(gemma ? ['gemma4' as const] : []), ...(QWEN_POLICIES.has(p.name) ? ['qwen3_5' as const] : [])];
}

/** The policies a family's targets take, in menu order. */
export function familyPolicies(family: ModelFamily): readonly Policy[] {
  return family === 'qwen3_5' ? QWEN_POLICY_LIST : POLICIES;
}

/** A policy by name for a family's target; throws naming the family's policies when it does not take it. */
export function familyPolicy(family: ModelFamily, name: string): Policy {
  return family === 'qwen3_5' ? qwenPolicyByName(name) : policyByName(name);
}
