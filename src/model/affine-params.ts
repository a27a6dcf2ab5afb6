import type { Binding } from '../gpu/kernels.ts';
import type { Recorder } from '../gpu/recorder.ts';
import type { RowPart } from '../gpu/upload.ts';
import type { AffineLinear } from '../format/model-description.ts';

/**
 * The parameter block every affine (MLX-quantized) matmul kernel shares, matmul_affine_io.wgsl's
 * `struct Params` (the exact kernels of ops.ts and MLX's kernels of mlx-matmul.ts), for one row part
 * of a linear: one place that says what each field holds.
 */
export function affineParams(
  rec: Recorder,
  shader: string,
  d: Pick<AffineLinear, 'inFeatures' | 'groupSize'>,
  part: RowPart,
  r: { M: number; round: boolean },
  xStride: number,
  yStride: number,
): Binding {
  return rec.params(shader, {
    M: r.M,
    N: part.rows,
    K: d.inFeatures,
    group_size: d.groupSize,
    n_offset: part.rowStart,
    x_stride: xStride,
    y_stride: yStride,
    round: r.round,
  });
}
