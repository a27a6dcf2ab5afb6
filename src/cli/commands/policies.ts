import { allPolicies, policyFamilies } from '../../model/policy-registry.ts';
import { MLX_CHIP_NOTE, MLX_CHIP_TABLE, MLX_METAL_NOTE } from '../../model/mlx-policies.ts';
import type { Command } from '../command.ts';

export const policies: Command = {
  name: 'policies',
  summary:
    'List the numerics policies (exact and each inexact variant), the families each applies to, and what it does.',
  usage: 'policies',
  options: {},
  async run(_args, io) {
    const all = allPolicies();
    const width = Math.max(...all.map((p) => p.name.length));
    const fam = all.map((p) => `[${policyFamilies(p).join(', ')}]`);
    const famWidth = Math.max(...fam.map((f) => f.length));
    all.forEach((p, i) => io.out(`${p.name.padEnd(width)}  ${fam[i].padEnd(famWidth)}  ${p.description}`));
    io.out('');
    io.out('gemma4: Gemma 4 targets (sliding ring, MLX kernel choice); gemma4-moe: Gemma 4 mixture-of-experts targets');
    io.out('(26B-A4B) only, which also take every gemma4 policy; qwen3_5: Qwen3.5 / Qwen3.6 hybrid targets');
    io.out(
      '(Gated DeltaNet; no sliding ring, MLX gated-delta kernel not modelled). A policy a family lacks is refused.',
    );
    io.out('');
    io.out('Which mlx-* policy is your Mac (MLX reads the GPU\'s architecture: mx.device_info()["architecture"]):');
    const chipWidth = Math.max(...MLX_CHIP_TABLE.map((r) => r.chips.length));
    const archWidth = Math.max(...MLX_CHIP_TABLE.map((r) => r.architecture.length));
    for (const r of MLX_CHIP_TABLE)
      io.out(`  ${r.chips.padEnd(chipWidth)}  ${r.architecture.padEnd(archWidth)}  ${r.policy}`);
    io.out(MLX_CHIP_NOTE);
    io.out(MLX_METAL_NOTE);
    return 0;
  },
};
