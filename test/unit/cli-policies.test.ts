import { describe, expect, it } from 'vitest';
import { policies, policyFamilies } from '../../src/cli/commands/policies.ts';
import { POLICIES } from '../../src/model/policy.ts';
import { GDN_CHUNKED, GDN_STATE_BF16 } from '../../src/model/qwen/policies.ts';
import { MOE_GROUPED } from '../../src/model/family/moe-policies.ts';

/** `policies` lists every family's policies once, each with the families it applies to. */
describe('cli policies', () => {
  it('lists the Qwen3.5 policies beside Gemma 4 ones, with their families', async () => {
    const lines: string[] = [];
    const io = { out: (s: string) => lines.push(s), err: () => {} };
    expect(await policies.run({ values: {}, positionals: [] } as never, io as never)).toBe(0);
    const line = (name: string) => lines.find((l) => l.startsWith(`${name} `))!;
    expect(line('gdn-state-bf16')).toMatch(/\[qwen3_5\]\s+The Gated DeltaNet recurrent state/);
    expect(line('gdn-chunked')).toMatch(/\[qwen3_5\]\s+Verify blocks run the Gated DeltaNet recurrence in the chunked/);
    expect(line('exact')).toMatch(/\[gemma4, qwen3_5\]/);
    expect(line('matmul-m-split')).toMatch(/\[gemma4, qwen3_5\]/);
    expect(line('ring-chronological')).toMatch(/\[gemma4\] /);
    expect(line('mlx-m1')).toMatch(/\[gemma4\] /);
    expect(line('moe-grouped')).toMatch(/\[gemma4-moe\]\s+Verify blocks group the rows routed to the same expert/);
    expect(lines.filter((l) => /^\S+ +\[/.test(l)).length).toBe(POLICIES.length + 3);
    expect(policyFamilies(MOE_GROUPED)).toEqual(['gemma4-moe']);
    expect(policyFamilies(GDN_STATE_BF16)).toEqual(['qwen3_5']);
    expect(policyFamilies(GDN_CHUNKED)).toEqual(['qwen3_5']);
  });
});
