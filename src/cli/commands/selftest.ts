import { nodeGpuContext } from '../node-gpu.ts';
import { runSelfTest } from '../../gpu/selftest.ts';
import { KERNEL_FAULTS, parseKernelFault } from '../../gpu/kernel-fault.ts';
import type { Command } from '../command.ts';
import { exactnessGate, EXACTNESS_FAILED_EXIT, exactnessCheckLine } from '../exactness.ts';

export const selftest: Command = {
  name: 'selftest',
  summary:
    'Run the WGSL self-test kernels on the adapter and check the results (JSON); with --exactness, the exactness self-test (block == chain) alone.',
  usage: 'selftest [--exactness [--inject-fault matmul|attention]]',
  options: {
    exactness: {
      type: 'boolean',
      help: `the exactness self-test that runs before every probe, trace and generation: a built-in model's verify blocks (K = 8, 4, 2 across the sliding ring's wrap, f32 and bf16) against the single-token chain, byte for byte, through each kernel class the adapter uses; lists each check; exit 0 when every block equals its chain, ${EXACTNESS_FAILED_EXIT} when one differs (naming the first kernel that differs)`,
    },
    'inject-fault': {
      type: 'string',
      help: `with --exactness: send one row of every verify block through another instruction path in a kernel (${KERNEL_FAULTS.join(' or ')}; the rewritten WGSL is used by the self-test's model alone), to show that the self-test catches it`,
    },
  },
  async run({ values }, io) {
    const faultName = values['inject-fault'];
    if (faultName !== undefined && !values.exactness) throw new Error('--inject-fault applies to --exactness only');
    const fault = faultName === undefined ? undefined : parseKernelFault(String(faultName), '--inject-fault');
    const ctx = await nodeGpuContext();
    try {
      if (!values.exactness) {
        const result = await runSelfTest(ctx);
        io.out(JSON.stringify({ adapter: ctx.report.description || ctx.report.vendor, ...result }, null, 2));
        return result.ok ? 0 : 1;
      }
      const gate = await exactnessGate(ctx, {
        fault,
        fresh: true,
        onStart: (s) => io.out(s),
        onCheck: (c) => io.out(exactnessCheckLine(c)),
      });
      for (const line of gate.lines) io.out(line);
      return gate.summary.ok ? 0 : EXACTNESS_FAILED_EXIT;
    } finally {
      ctx.destroy();
    }
  },
};
