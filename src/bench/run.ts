/**
 * The benchmark: in ONE run on the current adapter, (a) its own copy bandwidth and FMA throughput,
 * (b) each kernel class as the engine dispatches it, at real Gemma 4 shapes, as GB/s and GFLOP/s and
 * as ratios to (a), (c) end-to-end figures on a small synthetic model. Browser-safe (the page can run
 * the quick form); the CLI command `bench` (src/cli/commands/bench.ts) prints and saves it.
 */
import type { GpuContext } from '../gpu/device.ts';
import * as op from '../model/ops.ts';
import { GpuTimer } from './timer.ts';
import { KernelCache } from '../gpu/kernels.ts';
import { copyBandwidth, fmaThroughput, type ProbeResult } from './probes.ts';
import type { AffineKernel, KernelResult, Yardsticks } from './kernels.ts';
import { isSoftwareAdapter } from '../gpu/kernel-class.ts';
import { benchEndToEnd, presetDecodeBytes, type E2EResult } from './e2e.ts';
import type { SynthPreset } from '../format/synthetic.ts';
import type { BenchOptions } from './bench-options.ts';
import { BENCH_VERSION, REFERENCE_DEVICE, adapterName, type BenchReport, type BenchSummary } from './bench-report.ts';
import { GATE_UP_LABEL, benchKernelClasses } from './kernel-classes.ts';

export { defaultBenchOptions, pageBenchOptions, type BenchOptions } from './bench-options.ts';
export {
  BENCH_VERSION,
  REFERENCE_DEVICE,
  projectionCaveat,
  type BenchReport,
  type BenchSummary,
} from './bench-report.ts';
export { formatBench } from './format-bench.ts';

/** Replays per measurement allowed on a GPU adapter (about 0.1 s of CPU recording on the H200 host). */
const GPU_MAX_ITERS = 5000;

export async function runBench(ctx: GpuContext, opts: BenchOptions): Promise<BenchReport> {
  const t0 = performance.now();
  const log = opts.log ?? (() => {});
  const device = ctx.device;
  // On a GPU a kernel of 20 us needs thousands of replays for opts.targetSeconds (see
  // GpuTimer.measureDispatches); software adapters keep the cap that has always bounded their time.
  const timer = new GpuTimer(
    device,
    {
      targetSeconds: opts.targetSeconds,
      maxIters: isSoftwareAdapter(ctx.report) ? opts.maxIters : Math.max(opts.maxIters, GPU_MAX_ITERS),
      timestamps: opts.timestamps,
    },
    new KernelCache(device, { coop: opts.coop }),
  );
  const notes: string[] = [];
  const kernels: KernelResult[] = [];
  const onResult = (r: KernelResult) => {
    kernels.push(r);
    log(
      `${r.class} ${r.name} M=${r.M} ${r.kernel}: ${(r.seconds * 1e3).toFixed(2)} ms, ${r.gbPerS.toFixed(2)} GB/s (${r.bwRatio.toFixed(3)} x copy), ${r.gflopPerS.toFixed(2)} GFLOP/s (${r.flopRatio.toFixed(3)} x FMA)`,
    );
  };
  try {
    // (a) yardsticks
    const yardsticks = await measureYardsticks(timer, device, opts, notes, log);
    const y: Yardsticks = { copyGBps: yardsticks[0].value, fmaGflops: yardsticks[1].value };
    const coldBytes = opts.coldBytes ?? (isSoftwareAdapter(ctx.report) ? 0 : 256 * 2 ** 20);
    const { step: engineKernel, prefill: prefillKernel } = op.engineKernels(timer.kernels.kernelClass);
    log(`engine's exact affine kernels: ${engineKernel} (decode, verify), ${prefillKernel} (prefill)`);

    // (b) kernel classes
    await benchKernelClasses({ timer, device, opts, y, engineKernel, prefillKernel, coldBytes, notes, onResult });

    // (c) end to end
    let e2e: E2EResult | undefined;
    if (opts.e2e) e2e = await benchEndToEnd(ctx, { ...opts.e2e, ...(opts.coop ? { coop: opts.coop } : {}), log });

    await remeasureYardsticks(timer, opts, yardsticks, log);
    y.copyGBps = yardsticks[0].value;
    y.fmaGflops = yardsticks[1].value;
    for (const k of kernels) Object.assign(k, { bwRatio: k.gbPerS / y.copyGBps, flopRatio: k.gflopPerS / y.fmaGflops });

    const summary = summarize(kernels, yardsticks, y, e2e);
    await addProjection(ctx, opts, e2e, summary, notes);
    if (timer.timestampProblem)
      notes.push(`timestamp queries looked wrong (${timer.timestampProblem}); later kernel times use the wall clock`);
    return assembleReport(ctx, opts, { engineKernel, prefillKernel, yardsticks, kernels, e2e, summary, notes, t0 });
  } finally {
    timer.destroy();
  }
}

/** The adapter's copy bandwidth and f32 FMA throughput, and f16 FMA where the device has shader-f16. */
async function measureYardsticks(
  timer: GpuTimer,
  device: GPUDevice,
  opts: BenchOptions,
  notes: string[],
  log: (line: string) => void,
): Promise<ProbeResult[]> {
  const yardsticks: ProbeResult[] = [];
  yardsticks.push(await copyBandwidth(timer, opts.copyMiB));
  yardsticks.push(await fmaThroughput(timer, 'f32', opts.fmaInvocations, opts.fmaRounds));
  if (device.features.has('shader-f16'))
    yardsticks.push(await fmaThroughput(timer, 'f16', opts.fmaInvocations, opts.fmaRounds));
  else notes.push('no shader-f16 on this device: f16 FMA throughput not measured');
  for (const p of yardsticks) log(`${p.name}: ${p.value.toFixed(2)} ${p.unit} (${p.detail})`);
  return yardsticks;
}

/**
 * (a') the yardsticks once more, at the end: a shared or throttling machine drifts during a run, and
 * ratios against a yardstick caught in a slow moment would flatter the kernels. Each yardstick keeps
 * its best value (in place), and the caller recomputes every ratio against it.
 */
async function remeasureYardsticks(
  timer: GpuTimer,
  opts: BenchOptions,
  yardsticks: ProbeResult[],
  log: (line: string) => void,
): Promise<void> {
  const again = [
    await copyBandwidth(timer, opts.copyMiB),
    await fmaThroughput(timer, 'f32', opts.fmaInvocations, opts.fmaRounds),
  ];
  again.forEach((p, i) => {
    log(`${p.name} (again): ${p.value.toFixed(2)} ${p.unit}`);
    if (p.value > yardsticks[i].value)
      yardsticks[i] = {
        ...p,
        detail: `${p.detail}; best of two runs (${yardsticks[i].value.toFixed(2)} at the start)`,
      };
    else
      yardsticks[i] = {
        ...yardsticks[i],
        detail: `${yardsticks[i].detail}; best of two runs (${p.value.toFixed(2)} at the end)`,
      };
  });
}

/** Summary figures: the first geometry (12B by default), and the end to end's. */
function summarize(
  kernels: KernelResult[],
  yardsticks: ProbeResult[],
  y: Yardsticks,
  e2e: E2EResult | undefined,
): BenchSummary {
  const first = kernels[0]?.model;
  const find = (cls: string, name: string, M: number) =>
    kernels.find((r) => r.class === cls && r.model === first && r.name.startsWith(name) && r.M === M && r.engine);
  const g1 = find('matmul', 'mlp.gate/up 4-bit', 1);
  const g4 = find('matmul', 'mlp.gate/up 4-bit', 4);
  const gu1 = find('matmul', `${GATE_UP_LABEL} 4-bit`, 1);
  const gu4 = find('matmul', `${GATE_UP_LABEL} 4-bit`, 4);
  const pre = kernels.find((r) => r.class === 'prefill' && r.model === first);
  return {
    model: first,
    copyGBps: y.copyGBps,
    fmaF32Gflops: y.fmaGflops,
    fmaF16Gflops: yardsticks.find((p) => p.name === 'fma f16')?.value,
    matvec4bitBwRatio: g1?.bwRatio,
    k4VsM1: g1 && g4 ? g4.seconds / g1.seconds : undefined,
    gateUp4bitBwRatio: gu1?.bwRatio,
    gateUpK4VsM1: gu1 && gu4 ? gu4.seconds / gu1.seconds : undefined,
    prefillFlopRatio: pre?.flopRatio,
    prefillRows: pre?.M,
    msPerChainToken: e2e?.chain.msPerToken,
    msPerVerifyBlock: e2e?.verify.msPerBlock,
    prefillTokensPerSecond: e2e?.prefill.tokensPerSecond,
    dispatchesPerToken: e2e?.chain.dispatchesPerToken,
    e2eModel: e2e ? `${e2e.model}, vocab ${e2e.vocab}` : undefined,
    chainTokensPerSecond: e2e ? 1000 / e2e.chain.msPerToken : undefined,
    e2eWarmupFmaRatio: e2e?.warmup ? e2e.warmup.lastGflops / y.fmaGflops : undefined,
    // Only engines with TargetStats time recording and waiting (every Gemma 4 target, on TargetCore).
    breakdown:
      e2e?.chain.breakdown.encodeMs !== undefined && e2e.chain.breakdown.waitMs !== undefined
        ? {
            encodeMs: e2e.chain.breakdown.encodeMs,
            submitMs: e2e.chain.breakdown.submitMs,
            waitMs: e2e.chain.breakdown.waitMs,
            gpuMs: e2e.chain.breakdown.gpuMs,
            blockGpuMs: e2e.verify.gpu?.gpuMs,
          }
        : undefined,
    submitsPerToken: e2e?.chain.submitsPerToken,
    decodeEffectiveGBps: e2e?.chain.effectiveGBps,
    decodeBwRatio: e2e?.chain.effectiveGBps !== undefined ? e2e.chain.effectiveGBps / y.copyGBps : undefined,
  };
}

/**
 * The whole preset model's decode on the reference device at this adapter's measured efficiency (summary.projection),
 * or a note saying why there is none.
 */
async function addProjection(
  ctx: GpuContext,
  opts: BenchOptions,
  e2e: E2EResult | undefined,
  summary: BenchSummary,
  notes: string[],
): Promise<void> {
  if (e2e && opts.e2e && isSoftwareAdapter(ctx.report)) {
    notes.push('no decode projection: this is a software adapter (a CPU), whose efficiency says nothing about a GPU');
  } else if (e2e && opts.e2e && summary.decodeBwRatio === undefined) {
    notes.push(`no decode projection: decode traffic is modelled for dense Gemma targets, not ${e2e.model}`);
  } else if (e2e && opts.e2e) {
    const { bytesPerToken, layers } = await presetDecodeBytes(opts.e2e.preset as SynthPreset, e2e.chain.context);
    const bw = REFERENCE_DEVICE.bandwidthGBps;
    summary.projection = {
      device: REFERENCE_DEVICE.name,
      bandwidthGBps: bw,
      from: adapterName(ctx.report),
      model: `${opts.e2e.preset} (all layers)`,
      context: e2e.chain.context,
      bytesPerToken,
      tokensPerSecond: (bw * 1e9 * summary.decodeBwRatio!) / bytesPerToken,
      measuredLayers: e2e.layers,
      modelLayers: layers,
    };
  }
}

/** The report's parts measured by runBench. */
interface Measured {
  engineKernel: AffineKernel;
  prefillKernel: AffineKernel;
  yardsticks: ProbeResult[];
  kernels: KernelResult[];
  e2e: E2EResult | undefined;
  summary: BenchSummary;
  notes: string[];
  /** performance.now() at the start of the run. */
  t0: number;
}

/** The report: the adapter, how kernel times were taken, the options and the measured parts. */
function assembleReport(ctx: GpuContext, opts: BenchOptions, m: Measured): BenchReport {
  const { engineKernel, prefillKernel, yardsticks, kernels, e2e, summary, notes, t0 } = m;
  const methods = new Set(kernels.map((k) => k.timing.method).concat(yardsticks.map((p) => p.timing.method)));
  const r = ctx.report;
  const { log: _log, ...optionsOut } = opts;
  return {
    version: BENCH_VERSION,
    date: new Date().toISOString(),
    adapter: {
      description: r.description,
      vendor: r.vendor,
      architecture: r.architecture,
      device: r.device,
      features: r.features,
      platform: r.platform,
    },
    timing: methods.has('wall-clock') ? 'wall-clock' : 'timestamp-query',
    timingNote: methods.size > 1 ? 'mixed: some kernel times fell back to the wall clock (see each entry)' : undefined,
    engineKernel,
    prefillKernel,
    options: optionsOut,
    yardsticks,
    kernels,
    e2e,
    summary,
    notes,
    seconds: (performance.now() - t0) / 1000,
  };
}
