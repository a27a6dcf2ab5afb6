/**
 * A linear's weights on the GPU, the one type every op dispatches on. Its own module, below the ops and the
 * weight upload (gpu-weights.ts), because the upload calls the family parts that call the ops.
 */
import type { Linear } from '../format/model-description.ts';
import type { GpuTensor } from '../gpu/upload.ts';
import type { AffineLayout } from '../gpu/weight-layout.ts';

/**
 * One linear exactly as stored: packed U32 codes and bf16 scales/biases (widened in the shaders), dense weights
 * in their own dtype. Large matrices are split by rows
 * (see TensorUploader); the three tensors of a quantized linear share one row partition.
 */
export interface GpuLinear {
  desc: Linear;
  weight: GpuTensor;
  scales?: GpuTensor;
  biases?: GpuTensor;
  /** Where an affine linear's codes, scales and biases lie (src/gpu/weight-layout.ts); absent: MLX's layout. */
  layout?: AffineLayout;
}

/**
 * A target layer's q, k and v projections (k_eq_v: q and k) stacked by rows in one matrix, uploaded once:
 * the layer's qProj, kProj and vProj are views of it (src/gpu/upload.ts uploadStacked), and
 * ops.stackedQkvMatmul runs the three in one dispatch. `lin.desc` holds the projections' common kind,
 * bits, group size and inputs, and the stack's rows as outFeatures (its tensors are q's: the stack is no
 * tensor of the checkpoint).
 */
export interface GpuStackedQkv {
  lin: GpuLinear;
  /** Output features of each projection in the stack: [q, k] or [q, k, v]. */
  rows: number[];
}
