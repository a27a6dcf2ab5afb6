import { POLICIES, type Policy } from '../../model/policy.ts';
import { QWEN_POLICIES, QWEN_POLICY_LIST } from '../../model/qwen/policies.ts';
import type { Command } from '../command.ts';

/** Which model families a policy applies to: every shared policy is Gemma 4's; Qwen3.5 takes its own list. */
export function policyFamilies(p: Policy): string[] {
  const gemma = POLICIES.some((x) => x.name === p.name);
  return [...(gemma ? ['gemma4'] : []), ...(QWEN_POLICIES.has(p.name) ? ['qwen3_5'] : [])];
}

export const policies: Command = {
  name: 'policies',
  summary:
    'List the numerics policies (exact and each inexact variant), the families each applies to, and what it does.',
  usage: 'policies',
  options: {},
  async run(_args, io) {
    const all = [...POLICIES, ...QWEN_POLICY_LIST.filter((q) => !POLICIES.some((p) => p.name === q.name))];
    const width = Math.max(...all.map((p) => p.name.length));
    const fam = all.map((p) => `[${policyFamilies(p).join(', ')}]`);
    const famWidth = Math.max(...fam.map((f) => f.length));
    all.forEach((p, i) => io.out(`${p.name.padEnd(width)}  ${fam[i].padEnd(famWidth)}  ${p.description}`));
    io.out('');
    io.out('gemma4: Gemma 4 targets (sliding ring, MLX kernel choice); qwen3_5: Qwen3.5 / Qwen3.6 hybrid targets');
    io.out(
      '(Gated DeltaNet; no sliding ring, MLX gated-delta kernel not modelled). A policy a family lacks is refused.',
    );
    return 0;
  },
};
