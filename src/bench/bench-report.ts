/** The bench's report: its summary figures, the decode projection to a reference device, and how it names an adapter. */
import type { TimingMethod } from './timer.ts';
import type { ProbeResult } from './probes.ts';
import type { AffineKernel, KernelResult } from './kernels.ts';
import type { E2EResult } from './e2e.ts';
import type { BenchOptions } from './bench-options.ts';

export const BENCH_VERSION = 1;

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
export function adapterName(a: { vendor?: string; device?: string; description?: string }): string {
  const name = [a.vendor, a.device].filter(Boolean).join(' ');
  if (!name) return a.description || 'unknown adapter';
  return a.description ? `${name} (${a.description})` : name;
}
