import type { RopeSpec } from '../format/config.ts';

/**
 * RoPE's frequencies and cos/sin per position, computed as transformers and MLX compute them, so the
 * GPU engine's tables (src/model/rope-tables.ts) and the CPU reference (src/reference/rope.ts) use the
 * very same numbers from one source, and neither depends on the other.
 *
 * Frequencies: inv_freq[i] = theta^(-2i/d) for i < rotating, 0 beyond ("proportional" RoPE of full
 * layers: only floor(partial * d / 2) frequencies rotate, the pairing distance stays d/2).
 * Precision: transformers builds inv_freq, the angles and cos/sin in float32 even when the model runs in
 * float64 (its rotary module forces f32). 'f32' reproduces that rounding step by step (Math.fround),
 * which is what the fixture goldens contain; 'f64' is the exact mathematical value.
 */
export type RopePrecision = 'f32' | 'f64';

export interface RopeFrequencies {
  headDim: number;
  precision: RopePrecision;
  /** d/2 frequencies; zero past rotatingPairs. */
  invFreq: Float64Array;
  /** Pairs with a non-zero frequency (the others are the identity). */
  rotatingPairs: number;
}

export function ropeFrequencies(headDim: number, spec: RopeSpec, precision: RopePrecision): RopeFrequencies {
  const half = headDim / 2;
  const rotatingPairs = spec.ropeType === 'proportional' ? Math.floor((spec.partialRotary * headDim) / 2) : half;
  const r = precision === 'f32' ? Math.fround : (x: number) => x;
  const invFreq = new Float64Array(half);
  for (let i = 0; i < rotatingPairs; i++) {
    const expo = r((2 * i) / headDim);
    invFreq[i] = r(1 / r(spec.theta ** expo));
  }
  return { headDim, precision, invFreq, rotatingPairs };
}

/** cos/sin of the d/2 angles at `pos` (the same value serves i and i + d/2). */
export function ropeCosSin(f: RopeFrequencies, pos: number): { cos: Float64Array; sin: Float64Array } {
  const half = f.headDim / 2;
  const r = f.precision === 'f32' ? Math.fround : (x: number) => x;
  const cos = new Float64Array(half);
  const sin = new Float64Array(half);
  for (let i = 0; i < half; i++) {
    const a = r(f.invFreq[i] * pos);
    cos[i] = r(Math.cos(a));
    sin[i] = r(Math.sin(a));
  }
  return { cos, sin };
}
