/**
 * The benchmark: in ONE run on the current adapter, (a) its own copy bandwidth and FMA throughput,
 * (b) each kernel class as the engine dispatches it, at real Gemma 4 shapes, as GB/s and GFLOP/s and
 * as ratios to (a), (c) end-to-end figures on a small synthetic model. Browser-safe (the page can run
 * the quick form); the CLI command `bench` (src/cli/commands/bench.ts) prints and saves it.
 */
import type { GpuContext } from '../gpu/device.ts';
import * as op from '../model/ops.ts';
import { GpuTimer, type TimingMethod } from './timer.ts';
import { copyBandwidth, fmaThroughput, type ProbeResult } from './probes.ts';
import {
  BENCH_SHAPES,
  benchAttention,
  benchMatmul,
  makeLinear,
  benchGateUp,
  type AffineKernel,
  type BenchShapes,
  type KernelResult,
  type Yardsticks,
} from './kernels.ts';
import { isSoftwareAdapter } from '../gpu/kernel-class.ts';
import { benchEndToEnd, presetDecodeBytes, type E2EOptions, type E2EResult } from './e2e.ts';
import type { KernelTime } from '../gpu/profiler.ts';
import type { SynthPreset } from '../format/synthetic.ts';

export const BENCH_VERSION = 1;

export interface BenchOptions {
  /** Geometries for the kernel benchmarks: presets, or shapes of their own (tests use tiny ones). */
  models: ('12b' | '31b' | BenchShapes)[];
  /** Short form (about a minute on a 2-core CPU adapter). */
  quick: boolean;
  /** Aim for this much GPU time per measurement (iterations are chosen from a warm-up run). */
  targetSeconds: number;
  maxIters: number;
  /** Use timestamp queries when the device has them. */
  timestamps: boolean;
  /** M values of the matmul benchmarks (1 = chain step, K = a verify block of K). */
  matmulRows: number[];
  /** Affine bit widths of the matmul benchmarks. */
  bits: (4 | 8)[];
  /** Other exact affine kernels measured for comparison, at compareRows, on the 4-bit MLP shapes. */
  compareKernels: AffineKernel[];
  compareRows: number[];
  /** Also compare them on the LM head (slow on CPU adapters). */
  compareHead: boolean;
  /** Prefill matmul rows; reduced when the projected time of one matmul exceeds prefillBudgetSeconds. */
  prefillRows: number;
  prefillBudgetSeconds: number;
  /** M values of the attention and LM-head benchmarks. */
  attentionRows: number[];
  headRows: number[];
  copyMiB: number;
  /**
   * Matmul benchmarks cycle through copies of the weights totalling at least this many bytes (see
   * MatmulCase.coldBytes). Default: 256 MiB on GPUs (several times any GPU's last-level cache), 0 on
   * software adapters (the figures there have always been taken warm; kept comparable).
   */
  coldBytes?: number;
  fmaInvocations: number;
  fmaRounds: number;
  /** null: skip the end-to-end part. */
  e2e: Omit<E2EOptions, 'log'> | null;
  log?: (line: string) => void;
}

export function defaultBenchOptions(quick = false, full = false): BenchOptions {
  return {
    models: full ? ['12b', '31b'] : ['12b'],
    quick,
    targetSeconds: quick ? 0.05 : 0.4,
    maxIters: quick ? 20 : 100,
    timestamps: true,
    matmulRows: quick ? [1, 4] : [1, 2, 3, 4, 5, 6, 7, 8],
    bits: quick ? [4] : [4, 8],
    compareKernels: quick ? [] : ['lanes', 'coop', 'tile', 'affine'],
    compareRows: [1, 4, 8],
    compareHead: false,
    prefillRows: 1056,
    prefillBudgetSeconds: quick ? 2 : 15,
    attentionRows: quick ? [1] : [1, 4],
    headRows: quick ? [1] : [1, 4],
    copyMiB: quick ? 32 : 64,
    fmaInvocations: quick ? 65536 : 262144,
    fmaRounds: 256,
    e2e: quick
      ? { preset: '12b', layers: 1, promptTokens: 8, chainTokens: 1, blocks: 1, block: 4 }
      : // 8 and 4 timed: on an H200 a mean of 3 and 2 moved by a third with one slow step of the host
        { preset: '12b', layers: 2, promptTokens: 32, chainTokens: 8, blocks: 4, block: 4 },
  };
}

/**
 * The short form the page runs ("Measure this GPU") and attaches to its reports: yardsticks, the 12B
 * 4-bit MLP matmul at M = 1 and 4, one prefill matmul, attention decode, and a chain token end to end
 * on one 12B layer (its breakdown included); no LM head benchmark, no probe.
 */
export function pageBenchOptions(): BenchOptions {
  // End to end on one 12B layer with a 32768-word vocabulary (about 0.2 GB generated in the page):
  // a chain token's time, tokens/s and where the time goes, without the probes.
  const e2e = {
    preset: '12b' as const,
    layers: 1,
    vocab: 32768,
    promptTokens: 8,
    chainTokens: 2,
    blocks: 1,
    block: 4,
    probe: false,
  };
  return { ...defaultBenchOptions(true), headRows: [], e2e, prefillBudgetSeconds: 1 };
}

export interface BenchSummary {
  copyGBps: number;
  fmaF32Gflops: number;
  fmaF16Gflops?: number;
  /** Geometry of the figures below (the first one benchmarked). */
  model?: string;
  /** gate/up 4-bit, M = 1, engine kernel: achieved GB/s / copy GB/s. */
  matvec4bitBwRatio?: number;
  /** gate/up 4-bit, engine kernel: time(M = 4) / time(M = 1) (1 = a verify block of 4 costs a chain step). */
  k4VsM1?: number;
  /** The MLP's gate + up + GeGLU as the engine runs it (4-bit, M = 1): GB/s of both weights / copy GB/s. */
  gateUp4bitBwRatio?: number;
  /** The same: time(M = 4) / time(M = 1). */
  gateUpK4VsM1?: number;
  /** Prefill matmul GFLOP/s / FMA GFLOP/s. */
  prefillFlopRatio?: number;
  prefillRows?: number;
  msPerChainToken?: number;
  msPerVerifyBlock?: number;
  prefillTokensPerSecond?: number;
  dispatchesPerToken?: number;
  submitsPerToken?: number;
  /** The end-to-end model ("synthetic ... 12b geometry, 1 layers") and its chain tokens per second. */
  e2eModel?: string;
  chainTokensPerSecond?: number;
  /**
   * The FMA rate of the end to end's warm-up in its last batch over the FMA yardstick: near 1, its steps ran at the
   * GPU's working clocks (absent on software adapters, which take no warm-up).
   */
  e2eWarmupFmaRatio?: number;
  /** Where a chain token's wall time goes (ms per token); gpuMs from the per-kernel profile when measured. */
  breakdown?: { encodeMs: number; submitMs: number; waitMs: number; gpuMs?: number; blockGpuMs?: number };
  /** Chain decode: bytes one token reads / the fastest token's time, and that / copy bandwidth. */
  decodeEffectiveGBps?: number;
  decodeBwRatio?: number;
  /**
   * The whole preset model's decode on a device with REFERENCE_BANDWIDTH_GBPS, at this adapter's
   * measured decode efficiency: tokens/s = bandwidth x decodeBwRatio / bytes per token.
   */
  projection?: {
    device: string;
    bandwidthGBps: number /** The adapter whose measured efficiency is projected. */;
    from: string;
    model: string;
    context: number;
    bytesPerToken: number;
    tokensPerSecond: number;
    /**
     * The layers of the end-to-end run the efficiency comes from, and the preset's. With fewer, the fixed
     * costs of a token (the LM head, readbacks, submits) weigh more, so the projection is low (on an H200
     * 0.077 x copy over 2 of the 12B's 48 layers, ~0.135 over all 48; docs/PERFORMANCE.md, end to end).
     */
    measuredLayers: number;
    modelLayers: number;
  };
}

/** What a projection from fewer layers than the model's leaves out (nothing when the run had them all). */
export function projectionCaveat(pr: { measuredLayers: number; modelLayers: number }): string {
  if (pr.measuredLayers >= pr.modelLayers) return '';
  return ` (efficiency from ${pr.measuredLayers} of ${pr.modelLayers} layers, where a token's fixed costs weigh more: a low estimate; --e2e-layers ${pr.modelLayers} measures them all)`;
}

/** The projection's reference device: an Apple M5 Max, 614 GB/s of memory bandwidth. */
export const REFERENCE_DEVICE = { name: 'M5 Max', bandwidthGBps: 614 };

export interface BenchReport {
  version: number;
  date: string;
  adapter: {
    description: string;
    vendor: string;
    architecture: string;
    device: string;
    features: string[];
    platform: string;
  };
  /** How kernel times were taken (end-to-end figures always use the wall clock). */
  timing: TimingMethod;
  timingNote?: string;
  /** The exact affine kernel ops.matmul runs for decode steps and verify blocks. */
  engineKernel: AffineKernel;
  /** The affine kernel of prefill forwards. */
  prefillKernel: AffineKernel;
  options: Omit<BenchOptions, 'log'>;
  yardsticks: ProbeResult[];
  kernels: KernelResult[];
  e2e?: E2EResult;
  summary: BenchSummary;
  notes: string[];
  seconds: number;
}

/**
 * An adapter as the bench names it: vendor and device, then the description in parentheses (on NVIDIA's
 * Vulkan driver the description is only the driver version, "NVIDIA: 580.159.04 ...").
 */
function adapterName(a: { vendor?: string; device?: string; description?: string }): string {
  const name = [a.vendor, a.device].filter(Boolean).join(' ');
  if (!name) return a.description || 'unknown adapter';
  return a.description ? `${name} (${a.description})` : name;
}

/** Name of the bench rows of the MLP's first half as the engine runs it (benchGateUp). */
const GATE_UP_LABEL = 'mlp.gate+up+GeGLU';

/** Replays per measurement allowed on a GPU adapter (about 0.1 s of CPU recording on the H200 host). */
const GPU_MAX_ITERS = 5000;

export async function runBench(ctx: GpuContext, opts: BenchOptions): Promise<BenchReport> {
  const t0 = performance.now();
  const log = opts.log ?? (() => {});
  const device = ctx.device;
  // On a GPU a kernel of 20 us needs thousands of replays for opts.targetSeconds (see
  // GpuTimer.measureDispatches); software adapters keep the cap that has always bounded their time.
  const timer = new GpuTimer(device, {
    targetSeconds: opts.targetSeconds,
    maxIters: isSoftwareAdapter(ctx.report) ? opts.maxIters : Math.max(opts.maxIters, GPU_MAX_ITERS),
    timestamps: opts.timestamps,
  });
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
    const yardsticks: ProbeResult[] = [];
    yardsticks.push(await copyBandwidth(timer, opts.copyMiB));
    yardsticks.push(await fmaThroughput(timer, 'f32', opts.fmaInvocations, opts.fmaRounds));
    if (device.features.has('shader-f16'))
      yardsticks.push(await fmaThroughput(timer, 'f16', opts.fmaInvocations, opts.fmaRounds));
    else notes.push('no shader-f16 on this device: f16 FMA throughput not measured');
    for (const p of yardsticks) log(`${p.name}: ${p.value.toFixed(2)} ${p.unit} (${p.detail})`);
    const y: Yardsticks = { copyGBps: yardsticks[0].value, fmaGflops: yardsticks[1].value };
    const coldBytes = opts.coldBytes ?? (isSoftwareAdapter(ctx.report) ? 0 : 256 * 2 ** 20);
    const { step: engineKernel, prefill: prefillKernel } = op.engineKernels(timer.kernels.kernelClass);
    log(`engine's exact affine kernels: ${engineKernel} (decode, verify), ${prefillKernel} (prefill)`);

    // (b) kernel classes
    for (const model of opts.models) {
      const S = typeof model === 'string' ? BENCH_SHAPES[model] : model;
      const m = S.name.toLowerCase();
      for (const bits of opts.bits) {
        for (const [proj, N, K] of [
          ['mlp.gate/up', S.intermediate, S.hidden],
          ['mlp.down', S.hidden, S.intermediate],
        ] as const) {
          const lin = makeLinear(device, `${m}.${proj}`, N, K, bits, S.groupSize);
          try {
            const label = `${proj} ${bits}-bit [${N} x ${K}]`;
            await benchMatmul(
              timer,
              S.name,
              { cls: 'matmul', label, lin, Ms: opts.matmulRows, kernels: [engineKernel], engineKernel, coldBytes },
              y,
              onResult,
            );
            const others = opts.compareKernels.filter((k) => k !== engineKernel);
            if (others.length && bits === 4) {
              await benchMatmul(
                timer,
                S.name,
                {
                  cls: 'matmul',
                  label,
                  lin,
                  Ms: opts.compareRows,
                  kernels: others,
                  engineKernel,
                  warm: false,
                  coldBytes,
                },
                y,
                onResult,
              );
            }
            if (bits === 4 && proj === 'mlp.gate/up' && opts.prefillRows > 0) {
              // Project the prefill matmul's time from one run at M = 8 of the prefill kernel.
              const [ref] = await benchMatmul(
                timer,
                S.name,
                {
                  cls: 'prefill',
                  label,
                  lin,
                  Ms: [8],
                  kernels: [prefillKernel],
                  engineKernel: prefillKernel,
                  warm: false,
                },
                y,
                () => {},
              );
              const projected = (ref.seconds * opts.prefillRows) / ref.M;
              let M = opts.prefillRows;
              let note: string | undefined;
              if (projected > opts.prefillBudgetSeconds) {
                M = Math.max(
                  8,
                  Math.min(opts.prefillRows, Math.floor(((opts.prefillBudgetSeconds / ref.seconds) * ref.M) / 8) * 8),
                );
                note = `M reduced from ${opts.prefillRows} to ${M}: one matmul at M = ${opts.prefillRows} projects to ${projected.toFixed(1)} s on this adapter`;
                notes.push(`${S.name} prefill ${label}: ${note}`);
              }
              const budget = { ...timer.opts };
              timer.opts.targetSeconds = Math.min(timer.opts.targetSeconds, 1e-3); // one timed run
              try {
                await benchMatmul(
                  timer,
                  S.name,
                  {
                    cls: 'prefill',
                    label,
                    lin,
                    Ms: [M],
                    kernels: [prefillKernel],
                    engineKernel: prefillKernel,
                    note,
                    warm: false,
                  },
                  y,
                  onResult,
                );
              } finally {
                Object.assign(timer.opts, budget);
              }
            }
          } finally {
            lin.destroy();
          }
        }
        // The MLP's first half as the engine runs it: on GPUs one dispatch for both projections and the
        // GeGLU (the rows above time one projection alone through the engine's matmul kernel).
        const gate = makeLinear(device, `${m}.mlp.gate`, S.intermediate, S.hidden, bits, S.groupSize);
        const up = makeLinear(device, `${m}.mlp.up`, S.intermediate, S.hidden, bits, S.groupSize);
        const down = makeLinear(device, `${m}.mlp.down`, S.hidden, S.intermediate, bits, S.groupSize);
        try {
          await benchGateUp(
            timer,
            S.name,
            {
              label: `${GATE_UP_LABEL} ${bits}-bit [2 x ${S.intermediate} x ${S.hidden}]`,
              gate,
              up,
              down,
              Ms: opts.matmulRows.filter((M) => M === 1 || M === 4 || M === 8),
              engineKernel,
              coldBytes,
            },
            y,
            onResult,
          );
        } finally {
          gate.destroy();
          up.destroy();
          down.destroy();
        }
      }
      // Attention decode: sliding ring (W slots, d 256) and full cache (4096 keys, d 512).
      await benchAttention(
        timer,
        S.name,
        {
          label: `sliding ring ${S.window} slots, ${S.heads} q / ${S.kvHeads} kv heads, d ${S.headDim}`,
          mode: 'physical',
          heads: S.heads,
          kvHeads: S.kvHeads,
          d: S.headDim,
          keys: S.window,
          window: S.window,
          Ms: opts.attentionRows,
        },
        y,
        onResult,
      );
      await benchAttention(
        timer,
        S.name,
        {
          label: `full cache ${S.fullKeys ?? 4096} keys, ${S.heads} q / ${S.globalKvHeads} kv heads, d ${S.globalHeadDim}`,
          mode: 'linear',
          heads: S.heads,
          kvHeads: S.globalKvHeads,
          d: S.globalHeadDim,
          keys: S.fullKeys ?? 4096,
          window: S.window,
          Ms: opts.attentionRows,
        },
        y,
        onResult,
      );
      // LM head: the tied 4-bit embedding over the whole vocabulary (skipped when headRows is empty).
      if (!opts.headRows.length) continue;
      const head = makeLinear(device, `${m}.lm_head`, S.vocab, S.hidden, 4, S.groupSize);
      try {
        const label = `4-bit [${S.vocab} x ${S.hidden}]`;
        await benchMatmul(
          timer,
          S.name,
          { cls: 'lm-head', label, lin: head, Ms: opts.headRows, kernels: [engineKernel], engineKernel, coldBytes },
          y,
          onResult,
        );
        const others = opts.compareKernels.filter((k) => k !== engineKernel);
        if (opts.compareHead && others.length)
          await benchMatmul(
            timer,
            S.name,
            { cls: 'lm-head', label, lin: head, Ms: opts.headRows, kernels: others, engineKernel, warm: false },
            y,
            onResult,
          );
      } finally {
        head.destroy();
      }
    }

    // (c) end to end
    let e2e: E2EResult | undefined;
    if (opts.e2e) e2e = await benchEndToEnd(ctx, { ...opts.e2e, log });

    // (a') the yardsticks once more, at the end: a shared or throttling machine drifts during a run, and
    // ratios against a yardstick caught in a slow moment would flatter the kernels. Each yardstick keeps
    // its best value, and every ratio is recomputed against it.
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
    y.copyGBps = yardsticks[0].value;
    y.fmaGflops = yardsticks[1].value;
    for (const k of kernels) Object.assign(k, { bwRatio: k.gbPerS / y.copyGBps, flopRatio: k.gflopPerS / y.fmaGflops });

    // Summary figures: the first geometry (12B by default).
    const first = kernels[0]?.model;
    const find = (cls: string, name: string, M: number) =>
      kernels.find((r) => r.class === cls && r.model === first && r.name.startsWith(name) && r.M === M && r.engine);
    const g1 = find('matmul', 'mlp.gate/up 4-bit', 1);
    const g4 = find('matmul', 'mlp.gate/up 4-bit', 4);
    const gu1 = find('matmul', `${GATE_UP_LABEL} 4-bit`, 1);
    const gu4 = find('matmul', `${GATE_UP_LABEL} 4-bit`, 4);
    const pre = kernels.find((r) => r.class === 'prefill' && r.model === first);
    const summary: BenchSummary = {
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
    if (timer.timestampProblem)
      notes.push(`timestamp queries looked wrong (${timer.timestampProblem}); later kernel times use the wall clock`);
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
      timingNote:
        methods.size > 1 ? 'mixed: some kernel times fell back to the wall clock (see each entry)' : undefined,
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
  } finally {
    timer.destroy();
  }
}

// ---- text output -----------------------------------------------------------------------------

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
  if (b.e2e) {
    const e = b.e2e;
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
        ? `(timed in turns, token, block, token ..., after ${fx(w.ms, 0)} ms of GPU work whose last batch ran at ${fx(w.lastGflops, 0)} GFLOP/s, ${fx(w.lastGflops / b.summary.fmaF32Gflops, 2)} x the FMA yardstick: a GPU lowers its clocks when idle)`
        : '(timed in turns, token, block, token ...; no warm-up: a software adapter has no GPU clock to raise)',
    );
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
        ...table(kernelTimeRows(bd.kernels, bd.gpuMs ?? 0, vb?.kernels, e.verify.block), [
          'l',
          'r',
          'r',
          'r',
          'r',
          'r',
        ]),
      );
    } else if (bd.gpuNote) out.push(`GPU time per kernel: not measured (${bd.gpuNote})`);
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
  }
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
  for (const n of b.notes) out.push(`note: ${n}`);
  out.push(`bench took ${b.seconds.toFixed(1)} s`);
  return out.join('\n');
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
