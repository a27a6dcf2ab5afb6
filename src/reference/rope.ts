import type { RopeSpec } from '../format/config.ts';
import { ropeCosSin, ropeFrequencies, type RopeFrequencies, type RopePrecision } from '../numerics/rope-angles.ts';

/**
 * RoPE, non-interleaved ("rotate half": element i pairs with i + d/2), absolute positions, on the CPU.
 * The frequencies and cos/sin tables come from src/numerics/rope-angles.ts (transformers' float32
 * steps for 'f32', the exact values for 'f64'), the source the GPU engine's tables share.
 */
export type { RopePrecision };

export class Rope {
  private readonly freq: RopeFrequencies;
  /** Pairs with a non-zero frequency (the others are the identity). */
  readonly rotatingPairs: number;
  private readonly cache = new Map<number, { cos: Float64Array; sin: Float64Array }>();

  constructor(
    readonly headDim: number,
    spec: RopeSpec,
    readonly precision: RopePrecision = 'f32',
  ) {
    this.freq = ropeFrequencies(headDim, spec, precision);
    this.rotatingPairs = this.freq.rotatingPairs;
  }

  /** cos/sin of the d/2 angles at `pos` (the same value serves i and i + d/2). */
  table(pos: number): { cos: Float64Array; sin: Float64Array } {
    let t = this.cache.get(pos);
    if (!t) {
      t = ropeCosSin(this.freq, pos);
      this.cache.set(pos, t);
    }
    return t;
  }

  /** Rotates one head vector x[off .. off+d) in place for position `pos`. */
  apply(x: Float64Array, off: number, pos: number): void {
    const { cos, sin } = this.table(pos);
    const half = this.headDim / 2;
    for (let i = 0; i < half; i++) {
      const a = x[off + i];
      const b = x[off + half + i];
      // x*cos + rotate_half(x)*sin, rotate_half(x) = [-x2, x1]
      x[off + i] = a * cos[i] - b * sin[i];
      x[off + half + i] = b * cos[i] + a * sin[i];
    }
  }
}
