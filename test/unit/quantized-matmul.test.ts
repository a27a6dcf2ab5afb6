/**
 * The CPU twin of the quantized matmul kernels (src/reference/quantized-matmul.ts) on a hand-checked
 * case; the kernels themselves are compared with it in test/gpu/kernels-matmul.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { affineMatmul, affineMatrix, affineMatvec } from '../../src/reference/quantized-matmul.ts';

describe('quantized matmul, CPU twin', () => {
  // 2 x 16, 4-bit, groups of 8: row 0 codes 0..15, row 1 codes 15..0 (MLX packs LSB first).
  const words = Uint32Array.of(0x76543210, 0xfedcba98, 0x89abcdef, 0x01234567);
  const scales = Float64Array.of(0.5, 0.25, 1, -1); // [row][group]
  const biases = Float64Array.of(-4, 1, -8, 0);
  const a = affineMatrix(words, scales, biases, 2, 16, 4, 8);

  it('unpacks the codes and dequantizes W = scale q + bias per group', () => {
    expect([...a.codes.subarray(0, 16)]).toEqual([...Array(16).keys()]);
    expect([...a.codes.subarray(16)]).toEqual([...Array(16).keys()].reverse());
    expect(a.w[3]).toBe(0.5 * 3 - 4);
    expect(a.w[9]).toBe(0.25 * 9 + 1);
    expect(a.w[16]).toBe(15 - 8);
    expect(a.w[31]).toBe(-0 + 0);
  });

  it('y = W x with the magnitudes of stored and centred codes', () => {
    const x = Float64Array.from({ length: 16 }, (_, k) => ((k % 2 ? -1 : 1) * (k + 1)) / 16);
    const o = affineMatvec(a, x);
    for (let n = 0; n < 2; n++) {
      let y = 0,
        mag = 0,
        magC = 0;
      for (let g = 0; g < 2; g++) {
        const s = scales[n * 2 + g],
          b = biases[n * 2 + g];
        let qx = 0,
          qcx = 0,
          ax = 0;
        for (let k = g * 8; k < g * 8 + 8; k++) {
          const q = a.codes[n * 16 + k];
          y += (s * q + b) * x[k];
          qx += Math.abs(q * x[k]);
          qcx += Math.abs((q - 8) * x[k]);
          ax += Math.abs(x[k]);
        }
        mag += Math.abs(s) * qx + Math.abs(b) * ax;
        magC += Math.abs(s) * qcx + Math.abs(b + 8 * s) * ax;
      }
      expect(o.y[n]).toBeCloseTo(y, 14);
      expect(o.mag[n]).toBeCloseTo(mag, 14);
      expect(o.magCentred[n]).toBeCloseTo(magC, 14);
    }
    // centring helps where the bias cancels the codes' offset (row 0, group 0: bias = -8 scale)
    expect(o.magCentred[0]).toBeLessThan(o.mag[0]);
  });

  it('M rows at a stride are each row alone', () => {
    const xs = Float64Array.from({ length: 3 * 20 }, (_, i) => Math.sin(i));
    const all = affineMatmul(a, xs, 3, 20);
    for (let m = 0; m < 3; m++)
      expect([...all.y.subarray(m * 2, m * 2 + 2)]).toEqual([...affineMatvec(a, xs, m * 20).y]);
  });

  it('refuses inputs that do not fill whole groups', () => {
    expect(() => affineMatrix(words, scales, biases, 2, 12, 4, 8)).toThrow('12 inputs do not fill whole groups of 8');
  });
});
