import type { RopeSpec } from '../format/config.ts';

/**
 * RoPE, non-interleaved ("rotate half": element i pairs with i + d/2), absolute positions.
 *
 * Frequencies: inv_freq[i] = theta^(-2i/d) for i < rotating, 0 beyond ("proportional" RoPE of full layers: only
 * floor(partial * d / 2) frequencies rotate, the pairing distance stays d/2).
 *
 * Precision: transformers builds inv_freq, the angles and cos/sin in float32 even when the model runs in
 * float64 (its rotary module forces f32). precision 'f32' reproduces that rounding step by step (Math.fround),
 * which is what the fixture goldens contain; 'f64' is the exact mathematical value.
 */
export type RopePrecision = 'f32' | 'f64';

export class Rope {
  private readonly invFreq: Float64Array;
  /** Pairs with a non-zero frequency (the others are the identity). */
  readonly rotatingPairs: number;
  private readonly cache = new Map<number, { cos: Float64Array; sin: Float64Array }>();

  constructor(readonly headDim: number, spec: RopeSpec, readonly precision: RopePrecision = 'f32') {
    const half = headDim / 2;
    const rotating = spec.ropeType === 'proportional' ? Math.floor((spec.partialRotary * headDim) / 2) : half;
    this.rotatingPairs = rotating;
    const r = precision === 'f32' ? Math.fround : (x: number) => x;
    this.invFreq = new Float64Array(half);
    for (let i = 0; i < rotating; i++) {
      const expo = r((2 * i) / headDim);
      this.invFreq[i] = r(1 / r(Math.pow(spec.theta, expo)));
    }
  }

  /** cos/sin of the d/2 angles at `pos` (the same value serves i and i + d/2). */
  table(pos: number): { cos: Float64Array; sin: Float64Array } {
    let t = this.cache.get(pos);
    if (!t) {
      const half = this.headDim / 2;
      const r = this.precision === 'f32' ? Math.fround : (x: number) => x;
      const cos = new Float64Array(half);
      const sin = new Float64Array(half);
      for (let i = 0; i < half; i++) {
        const a = r(this.invFreq[i] * pos);
        cos[i] = r(Math.cos(a));
        sin[i] = r(Math.sin(a));
      }
      t = { cos, sin };
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
