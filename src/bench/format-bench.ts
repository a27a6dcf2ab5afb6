/** The bench report as text: yardsticks, kernel table, end-to-end figures, per-kernel GPU times and the summary. */
import type { KernelTime } from '../gpu/profiler.ts';
import type { E2EResult } from './e2e.ts';
import { adapterName, projectionCaveat, type BenchReport } from './bench-report.ts';

const fx = (v: number | undefined, d = 2) =>
  v === undefined || !Number.isFinite(v) ? '-' : v >= 1000 ? v.toFixed(0) : v.toFixed(d);

function table(rows: string[][], align: ('l' | 'r')[]): string[] {
  const w = rows[0].map((_, c) => Math.max(...rows.map((r) => r[c].length)));
  return rows.map((r) =>
    r
      .map((cell, c) => (align[c] === 'l' ? cell.padEnd(w[c]) : cell.padStart(w[c])))
      .join('  ')
      .trimEnd(),
  );
}

export function formatBench(b: BenchReport): string {
  const out: string[] = [];
  out.push(...formatYardsticks(b));
  out.push(...formatKernelTable(b));
  if (b.e2e) {
    out.push(...formatEndToEnd(b.e2e, b.summary.fmaF32Gflops));
    out.push(...formatChainBreakdown(b.e2e));
    out.push(...formatProbes(b.e2e));
  }
  out.push(...formatSummary(b));
  for (const n of b.notes) out.push(`note: ${n}`);
  out.push(`bench took ${b.seconds.toFixed(1)} s`);
  return out.join('\n');
}

/** The header (adapter, timing, the engine's kernels) and the adapter's yardsticks. */
function formatYardsticks(b: BenchReport): string[] {
  const out: string[] = [];
  out.push(`Ringside bench v${b.version}: ${adapterName(b.adapter)} (${b.adapter.platform})`);
  out.push(
    `kernel timing: ${b.timing}${b.timingNote ? ` (${b.timingNote})` : ''}; end to end: wall clock; engine's exact affine kernels: ${b.engineKernel} (decode, verify), ${b.prefillKernel} (prefill)`,
  );
  out.push('');
  out.push(
    ...table(
      [
        ['adapter yardstick', 'value', 'detail'],
        ...b.yardsticks.map((p) => [p.name, `${fx(p.value)} ${p.unit}`, p.detail]),
      ],
      ['l', 'r', 'l'],
    ),
  );
  return out;
}

/** The kernel table: one row per kernel class, shape, M and kernel. */
function formatKernelTable(b: BenchReport): string[] {
  const out: string[] = [];
  out.push('');
  out.push(
    ...table(
      [
        ['class', 'model', 'shape', 'M', 'kernel', 'ms', 'GB/s', 'x copy', 'GFLOP/s', 'x FMA', 'iters'],
        ...b.kernels.map((k) => [
          k.class,
          k.model,
          k.name,
          String(k.M),
          `${k.kernel}${k.engine ? '*' : ''}`,
          fx(k.seconds * 1e3),
          fx(k.gbPerS),
          fx(k.bwRatio, 3),
          fx(k.gflopPerS),
          fx(k.flopRatio, 3),
          String(k.timing.iters),
        ]),
      ],
      ['l', 'l', 'l', 'r', 'l', 'r', 'r', 'r', 'r', 'r', 'r'],
    ),
  );
  out.push(
    "(* = the kernel the engine runs; x copy / x FMA: ratio to this adapter's copy bandwidth / f32 FMA throughput)",
  );
  return out;
}

/** The end-to-end model and its prefill, chain token and verify block figures, and how they were timed. */
function formatEndToEnd(e: E2EResult, fmaF32Gflops: number): string[] {
  const out: string[] = [];
  out.push('');
  out.push(
    `end to end: ${e.model} (${e.layerTypes.join(', ')}), vocab ${e.vocab}, ${(e.weightBytes / 1e9).toFixed(2)} GB of weights${e.engine === 'TargetModel' ? '' : `; engine ${e.engine}`}`,
  );
  out.push(
    ...table(
      [
        ['measure', 'value', 'dispatches', 'submits'],
        [
          `prefill ${e.prefill.tokens} tokens`,
          `${fx(e.prefill.tokensPerSecond)} tokens/s`,
          String(e.prefill.dispatches),
          String(e.prefill.submits),
        ],
        [
          `chain token (M = 1) from context ${e.chain.context}`,
          `${fx(e.chain.msPerToken, 1)} ms (min ${fx(e.chain.minMs, 1)})`,
          fx(e.chain.dispatchesPerToken, 1),
          fx(e.chain.submitsPerToken, 1),
        ],
        [
          `verify block (K = ${e.verify.block})`,
          `${fx(e.verify.msPerBlock, 1)} ms (min ${fx(e.verify.minMs, 1)})`,
          fx(e.verify.dispatchesPerBlock, 1),
          fx(e.verify.submitsPerBlock, 1),
        ],
        ['verify block / chain token', `${fx(e.blockVsChain, 2)} x`, '', ''],
      ],
      ['l', 'r', 'r', 'r'],
    ),
  );
  out.push(
    "(chain tokens and verify blocks read back each row's argmax id and final hidden row, as MTP generation does)",
  );
  const w = e.warmup;
  out.push(
    w
      ? `(timed in turns, token, block, token ..., after ${fx(w.ms, 0)} ms of GPU work whose last batch ran at ${fx(w.lastGflops, 0)} GFLOP/s, ${fx(w.lastGflops / fmaF32Gflops, 2)} x the FMA yardstick: a GPU lowers its clocks when idle)`
      : '(timed in turns, token, block, token ...; no warm-up: a software adapter has no GPU clock to raise)',
  );
  return out;
}

/** Where a chain token's (and a verify block's) wall time goes, and its profiled GPU time per kernel. */
function formatChainBreakdown(e: E2EResult): string[] {
  const out: string[] = [];
  const bd = e.chain.breakdown;
  out.push('');
  out.push(
    `chain token breakdown (wall ms per token): recording ${fx(bd.encodeMs, 2)}, submit ${fx(bd.submitMs, 2)}, waiting for results ${fx(bd.waitMs, 2)}; ${fx(bd.bindGroupsPerToken, 1)} bind groups created per token`,
  );
  const vw = e.verify.wall;
  if (vw)
    out.push(
      `verify block breakdown (wall ms per block of ${e.verify.block}): recording ${fx(vw.encodeMs, 2)}, submit ${fx(vw.submitMs, 2)}, waiting for results ${fx(vw.waitMs, 2)}; ${fx(e.verify.bindGroupsPerBlock, 1)} bind groups created per block`,
    );
  if (bd.phasesNote) out.push(`(${bd.phasesNote})`);
  if (bd.kernels) {
    const vb = e.verify.gpu?.kernels ? e.verify.gpu : undefined;
    out.push(
      `GPU time per chain token (profiled, each dispatch timestamped): ${fx(bd.gpuMs, 3)} ms` +
        (vb ? `; per verify block of ${e.verify.block}: ${fx(vb.gpuMs, 3)} ms` : ''),
    );
    out.push(
      ...table(kernelTimeRows(bd.kernels, bd.gpuMs ?? 0, vb?.kernels, e.verify.block), ['l', 'r', 'r', 'r', 'r', 'r']),
    );
  } else if (bd.gpuNote) out.push(`GPU time per kernel: not measured (${bd.gpuNote})`);
  return out;
}

/** The probe timings of the end-to-end run. */
function formatProbes(e: E2EResult): string[] {
  const out: string[] = [];
  out.push('');
  out.push(
    ...table(
      [
        ['probe (wall ms, summed over draws)', 'prefill', 'chain arm', 'block arm', 'localize', 'total', 'verdict'],
        ...e.probe.map((p) => [
          `${p.policy}, draws ${p.drawLengths.join('/')}, K = ${p.block}`,
          fx(p.prefillMs, 0),
          fx(p.chainMs, 0),
          fx(p.blockMs, 0),
          fx(p.localizeMs, 0),
          fx(p.totalMs, 0),
          p.verdict,
        ]),
      ],
      ['l', 'r', 'r', 'r', 'r', 'r', 'l'],
    ),
  );
  return out;
}

/** The summary lines: yardsticks, the headline ratios, end-to-end figures and the projection. */
function formatSummary(b: BenchReport): string[] {
  const out: string[] = [];
  const s = b.summary;
  out.push('');
  out.push('summary:');
  out.push(
    `  copy ${fx(s.copyGBps)} GB/s; FMA f32 ${fx(s.fmaF32Gflops)} GFLOP/s${s.fmaF16Gflops !== undefined ? `, f16 ${fx(s.fmaF16Gflops)} GFLOP/s` : ''}`,
  );
  if (s.model) {
    out.push(`  ${s.model} matvec (gate/up 4-bit, M = 1): ${fx(s.matvec4bitBwRatio, 3)} x copy bandwidth`);
    out.push(`  ${s.model} gate/up 4-bit: M = 4 costs ${fx(s.k4VsM1, 2)} x M = 1`);
    if (s.gateUp4bitBwRatio !== undefined)
      out.push(
        `  ${s.model} gate + up + GeGLU as the engine runs it (4-bit, M = 1): ${fx(s.gateUp4bitBwRatio, 3)} x copy; M = 4 costs ${fx(s.gateUpK4VsM1, 2)} x M = 1`,
      );
    out.push(
      `  ${s.model} prefill matmul (M = ${s.prefillRows ?? '-'}): ${fx(s.prefillFlopRatio, 3)} x FMA throughput`,
    );
  }
  if (b.e2e) {
    out.push(
      `  ${fx(s.msPerChainToken, 1)} ms per chain token, ${fx(s.msPerVerifyBlock, 1)} ms per verify block, ${fx(s.prefillTokensPerSecond)} prefill tokens/s, ${fx(s.dispatchesPerToken, 1)} dispatches and ${fx(s.submitsPerToken, 1)} submits per chain token`,
    );
    const bytes = b.e2e.chain.bytesPerToken;
    if (bytes !== undefined)
      out.push(
        `  chain decode reads ${fx(bytes / 1e6, 1)} MB per token: ${fx(s.decodeEffectiveGBps)} GB/s effective (fastest token) = ${fx(s.decodeBwRatio, 3)} x copy bandwidth`,
      );
    // Families whose decode traffic is not modelled get their tokens/s and block ratio in place of it.
    else
      out.push(
        `  ${fx(s.chainTokensPerSecond, 1)} chain tokens/s, verify block / chain token ${fx(b.e2e.blockVsChain, 2)} x (${b.e2e.model}, ${b.e2e.engine})`,
      );
  }
  const pr = s.projection;
  if (pr)
    out.push(
      `  projection: ${pr.model} on a ${pr.bandwidthGBps} GB/s ${pr.device} at the decode efficiency measured on ${pr.from}: ${pr.bandwidthGBps} GB/s x ${fx(s.decodeBwRatio, 3)} / ${fx(pr.bytesPerToken / 1e9, 3)} GB per token (context ${pr.context}) = ${fx(pr.tokensPerSecond, 1)} tokens/s${projectionCaveat(pr)}`,
    );
  return out;
}

/**
 * The profiled GPU time per kernel of a chain token beside a verify block's (when profiled), each kernel
 * followed by its workgroup counts where it ran with several (one row per linear shape, roughly).
 */
function kernelTimeRows(chain: KernelTime[], chainMs: number, block: KernelTime[] | undefined, K: number): string[][] {
  const rows = [['kernel', 'ms / token', 'dispatches', 'share', `ms / block of ${K}`, 'block / token']];
  type T = { ms: number; dispatches: number };
  const line = (label: string, c?: T, b?: T) => [
    label,
    c ? fx(c.ms, 3) : '-',
    c ? fx(c.dispatches, 1) : '-',
    c ? `${fx((100 * c.ms) / (chainMs || 1), 1)}%` : '-',
    b ? fx(b.ms, 3) : '-',
    b && c && c.ms > 0 ? `${fx(b.ms / c.ms, 2)} x` : '-',
  ];
  for (const k of chain) {
    const bk = block?.find((x) => x.kernel === k.kernel);
    rows.push(line(k.kernel, k, bk));
    // Workgroup counts that scale with M (norms, attention) differ between the two: list both sides'.
    const counts = [...new Set([...k.byWorkgroups, ...(bk?.byWorkgroups ?? [])].map((w) => w.workgroups))];
    if (counts.length > 1)
      for (const n of counts)
        rows.push(
          line(
            `  ${n} workgroups`,
            k.byWorkgroups.find((x) => x.workgroups === n),
            bk?.byWorkgroups.find((x) => x.workgroups === n),
          ),
        );
  }
  return rows;
}
