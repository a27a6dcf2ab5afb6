import { nodeGpuContext } from '../node-gpu.ts';
import type { Command } from '../command.ts';

export const info: Command = {
  name: 'info',
  summary: 'Print the WebGPU adapter: info, limits and features (JSON).',
  usage: 'info',
  options: {},
  async run(_args, io) {
    const ctx = await nodeGpuContext();
    io.out(JSON.stringify(ctx.report, null, 2));
    ctx.destroy();
    return 0;
  },
};
