import { describe, expect, it } from 'vitest';
import {
  allPolicies,
  checkPolicyName,
  policiesFor,
  policyByName,
  policyFamilies,
  policyFor,
  policyMenu,
} from '../../src/model/policy-registry.ts';

const names = (ps: { name: string }[]) => ps.map((p) => p.name);

/** The one registry: each family's list, each policy's families, and every way a name is refused. */
describe('policy registry', () => {
  it("lists each family's policies: the MoE inherits Gemma 4's, Qwen3.5 takes four shared and its own", () => {
    const gemma = names(policiesFor('gemma4'));
    expect(gemma.slice(0, 7)).toEqual([
      'exact',
      'ring-chronological',
      'mask-widened',
      'matmul-m-split',
      'attention-m-split',
      'prefill-chunk-mismatch',
      'mlx-metal',
    ]);
    expect(names(policiesFor('gemma4-moe'))).toEqual([...gemma, 'moe-grouped']);
    expect(names(policiesFor('qwen3_5'))).toEqual([
      'exact',
      'matmul-m-split',
      'attention-m-split',
      'prefill-chunk-mismatch',
      'gdn-state-bf16',
      'gdn-chunked',
    ]);
    // every policy once, and each listed by at least one family
    const all = names(allPolicies());
    expect(new Set(all).size).toBe(all.length);
    for (const p of allPolicies()) expect(policyFamilies(p).length).toBeGreaterThan(0);
    expect(policyFamilies(policyByName('exact'))).toEqual(['gemma4', 'qwen3_5']);
    expect(policyFamilies(policyByName('mlx-m3plus'))).toEqual(['gemma4']);
  });

  it("refuses another family's policy naming who takes it, and a typo as unknown", () => {
    expect(() => policyFor('gemma4', 'moe-grouped')).toThrow(
      'policy moe-grouped applies to Gemma 4 mixture-of-experts targets only; this target has no experts',
    );
    expect(() => policyFor('gemma4', 'gdn-state-bf16')).toThrow(
      /^policy gdn-state-bf16 applies to Qwen3.5 targets only; Gemma 4 targets take exact, .*, mlx-metal, .* \(and moe-grouped on Gemma 4 mixture-of-experts targets\)$/,
    );
    expect(() => policyFor('qwen3_5', 'moe-grouped')).toThrow(
      /^policy moe-grouped applies to Gemma 4 mixture-of-experts targets only; Qwen3.5 targets take exact, matmul-m-split, attention-m-split, prefill-chunk-mismatch, gdn-state-bf16, gdn-chunked$/,
    );
    expect(() => policyFor('qwen3_5', 'mlx-m1')).toThrow(/^policy mlx-m1 applies to Gemma 4 targets only; Qwen3.5/);
    expect(() => policyFor('qwen3_5', 'exacct')).toThrow(
      'Unknown policy "exacct" (known: exact, matmul-m-split, attention-m-split, prefill-chunk-mismatch, gdn-state-bf16, gdn-chunked).',
    );
    expect(() => policyByName('exacct')).toThrow(
      /^Unknown policy "exacct" \(known: exact, .*, moe-grouped, .*gdn-chunked\)/,
    );
    expect(policyFor('gemma4-moe', 'mlx-m5').mlx?.gpu.gen).toBe(17);
  });

  it('checks a name before a model is read, leaving the MoE-only ones to the loaded target', () => {
    expect(() => checkPolicyName('gemma4', 'moe-grouped')).not.toThrow();
    expect(() => checkPolicyName('gemma4', 'gdn-chunked')).toThrow(/applies to Qwen3.5 targets only/);
    expect(() => checkPolicyName('qwen3_5', 'moe-grouped')).toThrow(/Gemma 4 mixture-of-experts targets only/);
  });

  it("words the menu in the family's terms: a Qwen3.5 exact has no ring", () => {
    const exact = (f: 'gemma4' | 'qwen3_5') => policyMenu(f).find((p) => p.name === 'exact')!.description;
    expect(exact('gemma4')).toMatch(/ring/);
    expect(exact('qwen3_5')).not.toMatch(/ring/);
    expect(exact('qwen3_5')).toMatch(/recurrent-state/);
  });
});
