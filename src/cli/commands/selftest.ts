import { nodeGpuContext } from '../node-gpu.ts';
import { runSelfTest } from '../../gpu/selftest.ts';
import type { Command } from '../command.ts';

export const selftest: Command = {
  name: 'selftest',
  summary: 'Run the WGSL self-test kernels on the adapter and check the results (JSON).',
  usage: 'selftest',
  options: {},
  async run(_args, io) {
    const ctx = await nodeGpuContext();
    const result = await runSelfTest(ctx);
    io.out(JSON.stringify({ adapter: ctx.report.description || ctx.report.vendor, ...result }, null, 2));
    ctx.destroy();
    return result.ok ? 0 : 1;
  },
};
