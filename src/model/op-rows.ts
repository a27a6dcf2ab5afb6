/** What every op wrapper shares: the rows an op runs over, the flat dispatch size and the dense weight dtypes. */
import type { GpuLinear } from './gpu-linear.ts';
import type { MlxMachine } from './mlx-dispatch.ts';

export const WG = 64;
export const groups = (n: number) => Math.ceil(n / WG);
export const DENSE_DTYPE: Record<string, number> = { BF16: 0, F16: 1, F32: 2 };

export interface Rows {
  /** Number of rows. */
  M: number;
  /** Round every output to bf16 (bf16 activation mode). */
  round: boolean;
  /** 0: the exact kernel. n > 0: the inexact split-K variant with n ranges (parity-lab policies). */
  split?: number;
  /** A prefill forward: matmuls may use the prefill kernel (both arms of a comparison prefill alike). */
  prefill?: boolean;
  /** Set: affine matmuls run the kernel MLX runs for M rows on this Apple GPU (src/model/mlx-matmul.ts). */
  mlx?: MlxMachine;
}

/** The description of an affine (quantized) linear. */
export type AffineLinearDesc = Extract<GpuLinear['desc'], { kind: 'affine' }>;
