/**
 * A linear layer of the CPU reference, for every family: its weight dequantized to float64 and y = W x. Its own
 * module so that the family parts (MoE, per-layer embeddings, the centroid head, Qwen3.5) and the Gemma 4 layer
 * take it from below them rather than from one another.
 */
import { matvec } from './ops.ts';

/** A linear map with its weight dequantized to float64, row-major [out, in]. */
export interface RefLinear {
  out: number;
  in: number;
  w: Float64Array;
}

/** y = W x for one row. */
export function linear(l: RefLinear, x: Float64Array, off = 0): Float64Array {
  return matvec(l.w, l.out, l.in, x, off);
}
