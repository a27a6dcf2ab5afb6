/** What a bench run measures and how long it may take: its options, the CLI's defaults and the page's short form. */
import type { AffineKernel, BenchShapes } from './kernels.ts';
import type { E2EOptions } from './e2e.ts';
import type { CoopTuning } from '../gpu/coop-tuning.ts';

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
  /** matmul_coop.wgsl shape overrides for every kernel measured and the end to end's engine; unset: the rules. */
  coop?: CoopTuning;
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
