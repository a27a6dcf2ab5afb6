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
 * Why the narrow pin is a policy of its own rather than an option: a policy name is what the CLI, the
 * page's policy list, the report's provenance and share links already carry, so "mlx-m3plus-narrow" is
 * recorded, offered and described with no new field anywhere; the machine it names is the same.
 * src/parity/mlx-blame.ts turns a first divergence under these policies into the MLX kernel pair behind it.
 */
import type { AppleGpu, MlxMachine } from './mlx-dispatch.ts';
import type { Policy } from './policy.ts';

/** The Apple GPUs the policies stand for (MLX's rules differ by generation, and by Ultra or not). */
const M1: AppleGpu = { gen: 13, size: 's', label: 'M1, not Ultra (applegpu_g13)' };
const M3: AppleGpu = { gen: 15, size: 's', label: 'M3/M4, not Ultra (applegpu_g15)' };

/** The MLX policies, built on the exact policy (their attention and prefill are its own). */
export function mlxPolicies(exact: Policy): Policy[] {
  const mlx = (name: string, description: string, machine: MlxMachine): Policy => ({
    ...exact,
    name,
    description,
    mlx: machine,
  });
  return [
    mlx(
      'mlx-m1',
      'MLX on M1/M2: its quantized matmuls (qmv or qmv_fast, their own reduction orders) reduce one row and a verify block alike.',
      { gpu: M1, narrowPin: false },
    ),
    mlx(
      'mlx-m3plus',
      "MLX on M3 and newer: quantized matmuls run qmv/qmv_fast for one row but qmv_wide for 2 <= M < MLX's batch limit, which sums in another order.",
      { gpu: M3, narrowPin: false },
    ),
    mlx(
      'mlx-m3plus-narrow',
      'mlx-m3plus with qmv_wide pinned off, as mlxcel MLXCEL_QMV_WIDE=0: every M below the batch limit runs the one-row kernel.',
      { gpu: M3, narrowPin: true },
    ),
  ];
}
