/**
 * Which quantized-matmul kernel MLX's Metal backend runs for one linear and one row count M on one Apple
 * GPU, and the shape of that kernel's reduction. Read from ml-explore/mlx (commit 846d17622, 2026):
 * mlx/backend/metal/quantized.cpp `QuantizedMatmul::eval_gpu`, `dispatch_qmv`, `get_qmv_batch_limit`,
 * `use_qmv_wide`, `qmv_fast_k_alignment`, `qmv`, `qmv_wide`, and the kernels in
 * mlx/backend/metal/kernels/quantized.h. Only the rules for transposed affine weights (nn.QuantizedLinear,
 * the LM head of a tied embedding) are here: that is every quantized linear of a Gemma 4 MLX checkpoint.
 *
 * The rules, for M rows of x, K inputs, N outputs:
 *  1. M >= get_qmv_batch_limit(K, N, gpu): `qmm` (a simdgroup-matrix GEMM, split-K for narrow N).
 *  2. else K == 64 or 128 and power-of-two bits: `qmv_quad` (a quadgroup per output, for any M).
 *  3. else M >= 2 and (mode != affine or architecture generation >= 15, i.e. M3 and newer): `qmv_wide`.
 *  4. else `qmv_fast` if N % 8 == 0 and K % (pack_factor * (bits == 2 ? 1 : 2) * 32) == 0, else `qmv`.
 * So on M1 and M2 (Ultra or not) a row is reduced the same way for every M below the batch limit, and on M3
 * and newer M = 1 (qmv or qmv_fast) and 2 <= M < limit (qmv_wide) reduce it differently (mlxcel #1188).
 * mlxcel's MLXCEL_QMV_WIDE=0 skips rule 3 (the narrow pin). The batch limit is the one rule that tells an
 * M5 from an M3 or M4, and an Ultra (architecture name ending in 'd') from the rest of its generation.
 * Nothing else in these rules depends on the chip for affine weights (qmv's narrower tile on M5 Max is for
 * nvfp4 weights only; the NAX kernels of M5 serve qmm, not modelled).
 */
import type { AffineBits } from '../format/quantization.ts';

export type MlxKernel = 'qmv' | 'qmv_fast' | 'qmv_quad' | 'qmv_wide' | 'qmm';

/** An Apple GPU as MLX sees it: MTLDevice architecture `applegpu_g<gen><size>`, e.g. applegpu_g15s (M3 Max). */
export interface AppleGpu {
  /** Architecture generation: 13 = M1, 14 = M2, 15 = M3, 16 = M4, 17 = M5. */
  gen: number;
  /** The architecture name's last letter; MLX only tells 'd' (Ultra) from the rest. */
  size: string;
  /** For reports, e.g. "M3 Max (applegpu_g15s)". */
  label: string;
}

/**
 * What a policy that predicts MLX needs: the GPU, whether qmv_wide is pinned off (MLXCEL_QMV_WIDE=0), and
 * whether MLX's compiled kernels contract `a * b + c` within one expression into an fma. MLX builds its
 * Metal kernels with -fno-fast-math, which in clang leaves -ffp-contract=on: the compiler may fuse, and
 * whether the Mac's does is not documented, so both readings are policies (shaders/matmul_mlx.wgsl says
 * which operations fuse).
 */
export interface MlxMachine {
  gpu: AppleGpu;
  narrowPin: boolean;
  fma: boolean;
}

/** The linear's properties MLX's dispatch reads. */
export interface QuantShape {
  /** Outputs (rows of W). */
  N: number;
  /** Inputs. */
  K: number;
  bits: AffineBits;
  groupSize: number;
}

export interface MlxKernelChoice {
  kernel: MlxKernel;
  /**
   * The reduction of one output row (the qmv family; 0 for qmm): `lanes` SIMD lanes each sum
   * `valuesPerThread` consecutive inputs per block of lanes * valuesPerThread, then the lanes are
   * added by simd_sum / quad_sum. qmv_wide: `lanes` = k_lanes (8) lanes each take every 8th group.
   */
  lanes: number;
  valuesPerThread: number;
  /** qmv_wide only: input rows that share a threadgroup (vecs_per_tg; does not change a row's arithmetic). */
  vecsPerTg: number;
  /** Threadgroups MLX launches for the M rows (one dispatch either way). */
  threadgroups: number;
  /** How often the kernel streams the whole weight matrix for the M rows. */
  weightPasses: number;
}

/** mlx get_pack_factor<bits, 32>: codes per 32-bit pack. */
export function packFactor(bits: number): number {
  return bits === 3 || bits === 5 ? 8 : bits === 6 ? 4 : 32 / bits;
}

/** quantized.cpp qmv_fast_k_alignment: the K step of one qmv_fast block. */
export function qmvFastKAlignment(bits: number): number {
  return packFactor(bits) * (bits === 2 ? 1 : 2) * 32;
}

/** quantized.cpp get_qmv_batch_limit(D = K, O = N): the first M that runs qmm (transposed weights). */
export function qmvBatchLimit(K: number, N: number, gpu: AppleGpu): number {
  const [small, mid] = [K <= 2048 && N <= 2048, K <= 4096 && N <= 4096];
  const pick = (a: number, b: number, c: number) => (small ? a : mid ? b : c);
  const ultra = gpu.size === 'd';
  if (gpu.gen >= 17 && !ultra) return pick(33, 25, 13);
  if (gpu.gen >= 15 && !ultra) return pick(13, 15, 13);
  if (gpu.gen >= 13) return ultra ? pick(32, 18, 12) : pick(14, 10, 6);
  return ultra ? pick(32, 18, 12) : pick(18, 12, 10);
}

const isPow2 = (b: number) => (b & (b - 1)) === 0;
const ceilDiv = (a: number, b: number) => Math.ceil(a / b);

/** MLX's kernel for M rows of this linear on this machine (the rules in the header), with its reduction shape. */
export function mlxKernel(machine: MlxMachine, s: QuantShape, M: number): MlxKernelChoice {
  const { gpu } = machine;
  const base = { vecsPerTg: 1, weightPasses: M };
  if (M >= qmvBatchLimit(s.K, s.N, gpu))
    return { kernel: 'qmm', lanes: 0, valuesPerThread: 0, ...base, threadgroups: 0, weightPasses: 1 };
  if ((s.K === 128 || s.K === 64) && isPow2(s.bits))
    // qmv_quad: 8 quadgroups of 8 outputs each per threadgroup; D / 4 values per lane, one block.
    return { kernel: 'qmv_quad', lanes: 4, valuesPerThread: s.K / 4, ...base, threadgroups: M * ceilDiv(s.N, 64) };
  if (M >= 2 && gpu.gen >= 15 && !machine.narrowPin) {
    // qmv_wide: the fewest tiles of at most 5 rows, then the smallest tile that fills them; 8 outputs per threadgroup.
    const tiles = ceilDiv(M, 5);
    const vecsPerTg = ceilDiv(M, tiles);
    const passes = ceilDiv(M, vecsPerTg);
    return {
      kernel: 'qmv_wide',
      lanes: 8,
      valuesPerThread: 8,
      vecsPerTg,
      threadgroups: passes * ceilDiv(s.N, 8),
      weightPasses: passes,
    };
  }
  const fast = s.N % 8 === 0 && s.K % qmvFastKAlignment(s.bits) === 0;
  const vpt = packFactor(s.bits) * (fast && s.bits !== 2 ? 2 : 1);
  return {
    kernel: fast ? 'qmv_fast' : 'qmv',
    lanes: 32,
    valuesPerThread: vpt,
    ...base,
    threadgroups: M * ceilDiv(s.N, 8),
  };
}

/** "qmv_fast (M = 1) vs qmv_wide (M = 4)" when the two row counts run different kernels, else undefined. */
export function kernelPair(machine: MlxMachine, s: QuantShape, chainM: number, blockM: number): string | undefined {
  const a = mlxKernel(machine, s, chainM).kernel;
  const b = mlxKernel(machine, s, blockM).kernel;
  return a === b ? undefined : `${a} (M = ${chainM}) vs ${b} (M = ${blockM})`;
}
