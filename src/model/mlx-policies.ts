/**
 * Policies that predict what MLX itself does on a class of Apple GPUs: one mechanism, the
 * quantized matmul kernel MLX picks per linear and per M (src/model/mlx-dispatch.ts), with its own
 * reduction order (shaders/matmul_mlx.wgsl), in BOTH arms: the chain's M = 1 steps run what MLX runs for
 * one row, the verify block what it runs for K rows. Everything else stays exact, because MLX's other
 * ops give a row the same order whatever M is (read from its kernels, and what mlxcel #1188 measured):
 * - rms_norm.metal: one threadgroup per row, its reduction shaped by the row length only;
 * - sdpa_vector.h: key i goes to simdgroup i % 32 for every query row; a key a row's mask excludes is
 *   skipped, so a verify row reads its keys in the chain's order when both arms store them alike;
 * - RoPE and the elementwise ops work per element.
 * Dense (unquantized) linears and prefill keep the exact kernels (prefill is shared by both arms).
 *
 * One policy per class of GPU that MLX's dispatch tells apart (generation and Ultra or not: the batch
 * limit, and qmv_wide from M3 on), each with a `+fma` twin for the other reading of MLX's compile
 * (MlxMachine.fma). Why the narrow pin and the contraction are policies rather than options: a policy
 * name is what the CLI, the page's policy list, the report's provenance and share links already carry,
 * so "mlx-m3plus-narrow+fma" is recorded, offered and described with no new field anywhere.
 * src/parity/mlx-blame.ts turns a first divergence under these policies into the MLX kernel pair behind it.
 */
import type { AppleGpu, MlxMachine } from './mlx-dispatch.ts';
import type { Policy } from './policy.ts';

/**
 * The Apple GPUs the policies stand for, as MLX reads MTLDevice's architecture name `applegpu_g<gen><size>`
 * (generation 13 = M1 ... 17 = M5; size 'd' = Ultra). One representative per class: MLX's rules give every
 * chip of a class the same kernels.
 */
const M1: AppleGpu = { gen: 13, size: 's', label: 'M1/M2, not Ultra (applegpu_g13, g14)' };
const M1_ULTRA: AppleGpu = { gen: 13, size: 'd', label: 'M1/M2 Ultra (applegpu_g13d, g14d)' };
const M3: AppleGpu = { gen: 15, size: 's', label: 'M3/M4, not Ultra (applegpu_g15, g16)' };
const M3_ULTRA: AppleGpu = { gen: 15, size: 'd', label: 'M3 Ultra (applegpu_g15d)' };
const M5: AppleGpu = { gen: 17, size: 's', label: 'M5, not Ultra (applegpu_g17)' };

/** The suffix of the policies that read MLX's kernels as compiled with `a * b + c` contracted to fma. */
export const FMA_SUFFIX = '+fma';

/** One row of the chip table the page, `policies` and docs/NUMERICS.md show: which policy is which Mac. */
export interface MlxChipRow {
  chips: string;
  /** MTLDevice architecture names, what MLX reads (`mx.device_info()["architecture"]` prints it). */
  architecture: string;
  policy: string;
}

export const MLX_CHIP_TABLE: readonly MlxChipRow[] = [
  { chips: 'M1, M2 (base, Pro, Max)', architecture: 'applegpu_g13?, applegpu_g14? (? not d)', policy: 'mlx-m1' },
  { chips: 'M1 Ultra, M2 Ultra', architecture: 'applegpu_g13d, applegpu_g14d', policy: 'mlx-m1-ultra' },
  { chips: 'M3, M4 (base, Pro, Max)', architecture: 'applegpu_g15?, applegpu_g16? (? not d)', policy: 'mlx-m3plus' },
  { chips: 'M3 Ultra', architecture: 'applegpu_g15d', policy: 'mlx-m3plus-ultra' },
  { chips: 'M5 (base, Pro, Max)', architecture: 'applegpu_g17? (? not d)', policy: 'mlx-m5' },
];

/** How a user picks among a chip's policies: the +fma twin, and the narrow pin. */
export const MLX_CHIP_NOTE =
  `Each has a ${FMA_SUFFIX} twin: MLX compiles its kernels with -fno-fast-math, which lets clang fuse a * b + c ` +
  'within an expression (-ffp-contract=on); whether the Mac does is not documented, so run both. ' +
  'mlx-m3plus-narrow is mlx-m3plus under mlxcel MLXCEL_QMV_WIDE=0.';

/** Why mlx-metal diverges where the per-chip policies keep parity (one line, for the page and the docs). */
export const MLX_METAL_NOTE =
  "mlx-metal stacks generic mechanisms of fast kernels (widened masked attention, attention and matmul splits chosen by M); the per-chip policies run only MLX's own kernel choice and orders, so mlx-metal can diverge where mlx-m1 (MLX's dispatch on an M1) keeps parity.";

/** The MLX policies, built on the exact policy (their attention and prefill are its own). */
export function mlxPolicies(exact: Policy): Policy[] {
  const base: [string, string, Omit<MlxMachine, 'fma'>][] = [
    [
      'mlx-m1',
      'MLX on M1/M2: its quantized matmuls (qmv or qmv_fast, their own reduction orders) reduce one row and a verify block alike.',
      { gpu: M1, narrowPin: false },
    ],
    [
      'mlx-m1-ultra',
      'MLX on M1/M2 Ultra: as mlx-m1 (one kernel for every M below the batch limit), with the Ultra batch limits (32/18/12 rows by size).',
      { gpu: M1_ULTRA, narrowPin: false },
    ],
    [
      'mlx-m3plus',
      "MLX on M3 and M4: quantized matmuls run qmv/qmv_fast for one row but qmv_wide for 2 <= M < MLX's batch limit, which sums in another order.",
      { gpu: M3, narrowPin: false },
    ],
    [
      'mlx-m3plus-ultra',
      'MLX on M3 Ultra: as mlx-m3plus (qmv_wide for 2 <= M), with the Ultra batch limits (32/18/12 rows by size).',
      { gpu: M3_ULTRA, narrowPin: false },
    ],
    [
      'mlx-m5',
      'MLX on M5: as mlx-m3plus (qmv_wide for 2 <= M), with the M5 batch limits (33/25/13 rows by size); TF32 not modelled (no modelled kernel uses it).',
      { gpu: M5, narrowPin: false },
    ],
    [
      'mlx-m3plus-narrow',
      'mlx-m3plus with qmv_wide pinned off, as mlxcel MLXCEL_QMV_WIDE=0: every M below the batch limit runs the one-row kernel.',
      { gpu: M3, narrowPin: true },
    ],
  ];
  return base.flatMap(([name, description, machine]) => [
    { ...exact, name, description, mlx: { ...machine, fma: false } },
    {
      ...exact,
      name: `${name}${FMA_SUFFIX}`,
      description: `${name} with each a * b + c of MLX's kernels fused to one fma, as clang's -ffp-contract=on allows (qdot's products, scale * accum + sum * bias, qmv_wide's x * w).`,
      mlx: { ...machine, fma: true },
    },
  ]);
}
