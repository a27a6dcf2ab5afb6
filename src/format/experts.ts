/**
 * Views of one expert in the stacked expert tensors of a MoE layer (MLX SwitchLinear: [E, out, ...] per tensor).
 * The bytes of expert e are one contiguous slice of each tensor, so expert e is an ordinary 2-D Linear over that
 * slice: readers (dequantizeLinear, the reference) need no knowledge of the stacking.
 */
import { FormatError } from './errors.ts';
import type { ExpertsLinear, Linear } from './model-description.ts';
import type { TensorRef } from './safetensors.ts';

/** Slice e of a tensor with a leading [E] dimension, as a tensor of the remaining shape. */
export function expertSlice(t: TensorRef, e: number): TensorRef {
  const E = t.shape[0];
  if (!Number.isInteger(e) || e < 0 || e >= E)
    throw new FormatError(
      `${t.file.name}: expert ${e} outside tensor "${t.name}" with ${E} experts`,
      t.file.name,
      t.name,
    );
  const bytes = t.byteLength / E;
  return { ...t, shape: t.shape.slice(1), offset: t.offset + e * bytes, byteLength: bytes };
}

/** Expert e's Linear [out, in]. */
export function expertLinear(x: ExpertsLinear, e: number): Linear {
  const s = x.stacked;
  const name = `${s.name}[${e}]`;
  return s.kind === 'dense'
    ? { ...s, name, weight: expertSlice(s.weight, e) }
    : {
        ...s,
        name,
        weight: expertSlice(s.weight, e),
        scales: expertSlice(s.scales, e),
        biases: expertSlice(s.biases, e),
      };
}
