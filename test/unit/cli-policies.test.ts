import { describe, expect, it } from 'vitest';
import { policies } from '../../src/cli/commands/policies.ts';
import { policiesFor, policyFamilies } from '../../src/model/policy-registry.ts';
import { GDN_CHUNKED, GDN_STATE_BF16 } from '../../src/model/qwen3_5/policies.ts';
import { MOE_GROUPED } from '../../src/model/gemma4/moe/moe-policies.ts';

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
    // the per-chip MLX policies and their +fma twins, then which is which Mac
    expect(line('mlx-m1-ultra')).toMatch(/\[gemma4\]\s+MLX on M1\/M2 Ultra: .*32\/18\/12/);
    expect(line('mlx-m3plus-ultra')).toMatch(/\[gemma4\]\s+MLX on M3 Ultra: .*32\/18\/12/);
    expect(line('mlx-m5')).toMatch(/\[gemma4\]\s+MLX on M5: .*33\/25\/13.*TF32 not modelled/);
    expect(line('mlx-m5+fma')).toMatch(/\[gemma4\]\s+mlx-m5 with each a \* b \+ c of MLX's kernels fused to one fma/);
    const table = lines.slice(lines.findIndex((l) => l.startsWith('Which mlx-* policy is your Mac')));
    expect(table.slice(1, 6).map((l) => l.trim().split(/\s{2,}/))).toEqual([
      ['M1, M2 (base, Pro, Max)', 'applegpu_g13?, applegpu_g14? (? not d)', 'mlx-m1'],
      ['M1 Ultra, M2 Ultra', 'applegpu_g13d, applegpu_g14d', 'mlx-m1-ultra'],
      ['M3, M4 (base, Pro, Max)', 'applegpu_g15?, applegpu_g16? (? not d)', 'mlx-m3plus'],
      ['M3 Ultra', 'applegpu_g15d', 'mlx-m3plus-ultra'],
      ['M5 (base, Pro, Max)', 'applegpu_g17? (? not d)', 'mlx-m5'],
    ]);
    expect(table[6]).toMatch(/^Each has a \+fma twin/);
    expect(table[7]).toMatch(/^mlx-metal stacks generic mechanisms/);
    expect(line('moe-grouped')).toMatch(/\[gemma4-moe\]\s+Verify blocks group the rows routed to the same expert/);
    expect(lines.filter((l) => /^\S+ +\[/.test(l)).length).toBe(policiesFor('gemma4').length + 3);
    expect(policyFamilies(MOE_GROUPED)).toEqual(['gemma4-moe']);
    expect(policyFamilies(GDN_STATE_BF16)).toEqual(['qwen3_5']);
    expect(policyFamilies(GDN_CHUNKED)).toEqual(['qwen3_5']);
  });
});
