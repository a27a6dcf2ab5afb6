/**
 * The one registry of numerics policies: which policies each family's targets take, and the lookups every caller
 * uses (the CLI's checks and `policies`, the page's menus, buildTarget's targetPolicy, the engines' own guards).
 *
 * A policy is defined beside its mechanism: the shared ones (attention, split-K, prefill chunks, MLX's kernel
 * choice) in src/model/policy.ts, a family's own in its engine folder (Qwen3.5's Gated DeltaNet policies,
 * the Gemma 4 MoE's moe-grouped). Each family has one entry here naming the shared policies it takes (those whose
 * mechanism its engine has) and its own; a new family's policies are its engine folder's and one entry here.
 */
import type { ModelFamily } from '../format/open-target.ts';
import { MOE_OWN_POLICIES } from './gemma4/moe/moe-policies.ts';
import { mlxPolicies } from './mlx-policies.ts';
import { EXACT, MECHANISM_POLICIES, type Policy } from './policy.ts';
import { QWEN_DESCRIPTIONS, QWEN_OWN_POLICIES, QWEN_SHARED_POLICY_NAMES } from './qwen3_5/policies.ts';

/**
 * The kinds of target a policy is listed for: a model family, or 'gemma4-moe' for the Gemma 4 mixture-of-experts
 * targets (26B-A4B), which take every 'gemma4' policy and their own.
 */
export type PolicyFamily = ModelFamily | 'gemma4-moe';

/** The policies of mechanisms more than one family has: the generic ones, then MLX's per chip, in menu order. */
const SHARED_POLICIES: readonly Policy[] = [...MECHANISM_POLICIES, ...mlxPolicies(EXACT)];

interface FamilyEntry {
  family: PolicyFamily;
  /** How messages name the family's targets ("... applies to Gemma 4 targets only"). */
  label: string;
  /** A family that extends another takes all of that one's policies (the MoE takes every Gemma 4 policy). */
  extends?: PolicyFamily;
  /** The shared policies the family's engine has the mechanism of, by name; 'all' for every one. */
  shared: 'all' | readonly string[];
  /** Policies of the family's own mechanisms. */
  own: readonly Policy[];
  /** Descriptions in the family's terms, where the shared wording names mechanisms it lacks. */
  descriptions?: Readonly<Record<string, string>>;
  /** Why a target of the extended family is refused this family's own policies. */
  lacking?: string;
}

const FAMILIES: readonly FamilyEntry[] = [
  { family: 'gemma4', label: 'Gemma 4', shared: 'all', own: [] },
  {
    family: 'gemma4-moe',
    label: 'Gemma 4 mixture-of-experts',
    extends: 'gemma4',
    shared: [],
    own: MOE_OWN_POLICIES,
    lacking: 'this target has no experts',
  },
  {
    family: 'qwen3_5',
    label: 'Qwen3.5',
    shared: QWEN_SHARED_POLICY_NAMES,
    own: QWEN_OWN_POLICIES,
    descriptions: QWEN_DESCRIPTIONS,
  },
];

function entry(family: PolicyFamily): FamilyEntry {
  const e = FAMILIES.find((f) => f.family === family);
  if (!e) throw new Error(`no policies are registered for the family ${family}`);
  return e;
}

/** The policies the entry lists itself (its shared ones and its own), not those it inherits. */
function listed(e: FamilyEntry): Policy[] {
  const shared = e.shared === 'all' ? SHARED_POLICIES : SHARED_POLICIES.filter((p) => e.shared.includes(p.name));
  return [...shared, ...e.own];
}

/** Every policy any family takes, each once, in menu order: the shared ones, then each family's own. */
export function allPolicies(): Policy[] {
  return [...SHARED_POLICIES, ...FAMILIES.flatMap((f) => f.own)];
}

/** The policies a family's targets take, in menu order. */
export function policiesFor(family: PolicyFamily): Policy[] {
  const e = entry(family);
  return [...(e.extends ? policiesFor(e.extends) : []), ...listed(e)];
}

/** The families that list a policy (an extending family only for its own policies: it inherits the rest). */
export function policyFamilies(p: Policy): PolicyFamily[] {
  return FAMILIES.filter((f) => listed(f).some((x) => x.name === p.name)).map((f) => f.family);
}

/** The refusal of a name no family knows (a typo), listing the names the asker could have meant. */
function unknownPolicy(name: string, known: readonly Policy[]): Error {
  return new Error(`Unknown policy "${name}" (known: ${known.map((x) => x.name).join(', ')}).`);
}

/** A policy by name, whichever family takes it (tests, and tools that name an MLX machine). */
export function policyByName(name: string): Policy {
  const p = allPolicies().find((x) => x.name === name);
  if (!p) throw unknownPolicy(name, allPolicies());
  return p;
}

/** A family's policy list as messages give it, with what its extensions add ("(and moe-grouped on ...)"). */
function takesPhrase(e: FamilyEntry): string {
  const extensions = FAMILIES.filter((f) => f.extends === e.family && f.own.length);
  const more = extensions.map((f) => ` (and ${f.own.map((p) => p.name).join(', ')} on ${f.label} targets)`);
  return `${e.label} targets take ${policiesFor(e.family)
    .map((p) => p.name)
    .join(', ')}${more.join('')}`;
}

/**
 * The policy `name` for a target of `family`. Refuses a name no family knows (a typo: "Unknown policy"), and names
 * the families that do take another family's policy (gdn-chunked for a Gemma 4 target: "unknown" would send the
 * user looking for a typo).
 */
export function policyFor(family: PolicyFamily, name: string): Policy {
  const p = policiesFor(family).find((x) => x.name === name);
  if (p) return p;
  const takers = FAMILIES.filter((f) => listed(f).some((x) => x.name === name));
  if (!takers.length) throw unknownPolicy(name, policiesFor(family));
  const e = entry(family);
  const extension = takers.find((f) => f.extends === family && f.lacking);
  const why = extension ? extension.lacking : takesPhrase(e);
  throw new Error(`policy ${name} applies to ${takers.map((f) => f.label).join(', ')} targets only; ${why}`);
}

/** The policy menu of a family: each policy's name and its description in the family's terms. */
export function policyMenu(family: PolicyFamily): { name: string; description: string }[] {
  const descriptions = entry(family).descriptions ?? {};
  return policiesFor(family).map((p) => ({ name: p.name, description: descriptions[p.name] ?? p.description }));
}

/**
 * Refuses, before any model is read, a policy name that no target of the family takes (a typo, or another family's
 * policy). The policies of a family's extensions (moe-grouped for Gemma 4) are left to the loaded target: only
 * then is it known whether it is one.
 */
export function checkPolicyName(family: ModelFamily, name: string): void {
  const extensions = FAMILIES.filter((f) => f.extends === family);
  if (extensions.some((f) => f.own.some((p) => p.name === name))) return;
  policyFor(family, name);
}
