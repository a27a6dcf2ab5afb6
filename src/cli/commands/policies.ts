import { POLICIES } from '../../model/policy.ts';
import type { Command } from '../command.ts';

export const policies: Command = {
  name: 'policies',
  summary: 'List the numerics policies (exact and each inexact variant) with a one-line description.',
  usage: 'policies',
  options: {},
  async run(_args, io) {
    const width = Math.max(...POLICIES.map((p) => p.name.length));
    for (const p of POLICIES) io.out(`${p.name.padEnd(width)}  ${p.description}`);
    return 0;
  },
};
