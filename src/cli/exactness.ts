/**
 * The exactness self-test on the command line: `selftest --exactness` runs it alone and lists its checks; probe,
 * trace, generate and compare run it before their verdict (once per adapter, platform and shader build: the result
 * is kept in memory and in the user's cache folder, src/cli/exactness-file-store.ts), record it in what they
 * write, and exit with EXACTNESS_FAILED_EXIT when it failed, whatever their own verdict, which is then no
 * reference. RINGSIDE_SELFTEST_FAULT=matmul|attention injects a kernel fault into the self-test
 * (src/gpu/kernel-fault.ts; never kept), for tests of that path.
 */
import type { GpuContext } from '../gpu/device.ts';
import { parseKernelFault, type KernelFault } from '../gpu/kernel-fault.ts';
import { exactnessSelfTestFor } from '../parity/exactness-gate.ts';
import type { ExactnessCheck } from '../parity/exactness-selftest.ts';
import type { ExactnessSelfTestSummary } from '../parity/report.ts';
import type { CommandIO } from './command.ts';
import { exactnessCacheFile, fileExactnessStore } from './exactness-file-store.ts';

/** The exit code of a command whose exactness self-test failed (0, 1, 2 and 3 are taken: README, Command line). */
export const EXACTNESS_FAILED_EXIT = 4;

/** Dawn in Node compiles the WGSL (Tint, then the Vulkan or Metal driver). */
const COMPILER = "Dawn's shader compiler with this adapter's driver";

function envFault(): KernelFault | undefined {
  const v = process.env.RINGSIDE_SELFTEST_FAULT;
  return v ? parseKernelFault(v, 'RINGSIDE_SELFTEST_FAULT') : undefined;
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;

/** One check as a line: kernel class, precision, K, the ring slots (the wrap), result, time. */
export function exactnessCheckLine(c: ExactnessCheck): string {
  const head = `  ${c.kernelClass.padEnd(8)} ${c.precision.padEnd(4)} K = ${c.block}  positions ${c.blockStart}-${c.blockStart + c.block - 1}, ring slots ${c.slots.join(',')}`;
  const result = c.ok
    ? `equal (${c.block} rows x ${c.bytesTotal} logit bytes)`
    : `DIFFERS: ${c.rowsDiffering} of ${c.block} rows, first row ${c.position} in ${c.bytesDiffering} of ${c.bytesTotal} bytes; first kernel: ${c.blame ?? 'none singled out'}`;
  return `${head}  ${result}  ${c.ms.toFixed(0)} ms`;
}

/** The self-test's line in a command's output. */
export function exactnessSummaryLine(s: ExactnessSelfTestSummary): string {
  const classes = `${s.kernelClasses.join(' and ')} kernels`;
  const how = s.cached ? `cached result of an earlier run (${seconds(s.ms)})` : `in ${seconds(s.ms)}`;
  const fault = s.fault ? `, fault injected in ${s.fault}` : '';
  return s.ok
    ? `exactness self-test passed: ${s.checks} checks, every verify block equals its chain (${classes}, shader build ${s.shaderBuild}${fault}) ${how}`
    : `exactness self-test FAILED: ${s.failed} of ${s.checks} checks differ, first in ${s.kernel ?? 'no single kernel'} (${classes}, shader build ${s.shaderBuild}${fault}) ${how}`;
}

/**
 * `selftest --exactness`: runs the test now (never from a cache), the header first, each check as it ends, then
 * the summary lines.
 */
export async function exactnessGate(
  ctx: GpuContext,
  o: {
    fault?: KernelFault;
    fresh?: boolean;
    onStart: (line: string) => void;
    onCheck: (c: ExactnessCheck) => void;
  },
): Promise<{ summary: ExactnessSelfTestSummary; lines: string[] }> {
  const a = ctx.report;
  o.onStart(
    `exactness self-test on ${[a.vendor, a.architecture, a.description].filter(Boolean).join(' · ') || 'an unnamed adapter'}${o.fault ? ` with the fault "${o.fault}" injected` : ''}`,
  );
  o.onStart('  class    prec K     block                               result');
  const { summary, result } = await exactnessSelfTestFor(ctx, {
    compiler: COMPILER,
    fault: o.fault,
    fresh: o.fresh,
    store: fileExactnessStore(),
    onCheck: o.onCheck,
  });
  const lines = [`model: ${result?.model ?? 'built-in'}`, exactnessSummaryLine(summary)];
  if (!o.fault) lines.push(`kept for later commands in ${exactnessCacheFile()}`);
  if (summary.warning) lines.push(summary.warning);
  return { summary, lines };
}

/**
 * The self-test before a command's verdict: its line on stderr (with the warning when it failed), and the summary
 * for the command's report.
 */
export async function exactnessBeforeVerdict(ctx: GpuContext, io: CommandIO): Promise<ExactnessSelfTestSummary> {
  const { summary } = await exactnessSelfTestFor(ctx, {
    compiler: COMPILER,
    fault: envFault(),
    store: fileExactnessStore(),
    onProgress: (p) => io.err(`[selftest] ${p.detail ?? p.phase}`),
  });
  io.err(exactnessSummaryLine(summary));
  if (summary.warning) io.err(`warning: ${summary.warning}`);
  return summary;
}

/** A command's exit code once its self-test is known: EXACTNESS_FAILED_EXIT when it failed, else `code`. */
export function exitAfterSelfTest(summary: ExactnessSelfTestSummary, code: number): number {
  return summary.ok ? code : EXACTNESS_FAILED_EXIT;
}
