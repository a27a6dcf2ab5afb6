import { describe, expect, it } from 'vitest';
import path from 'node:path';
import { dequantAffine, dequantizeLinear, readRows, unpackRow } from '../../src/format/dequant.ts';
import { toFloat64, toUint32 } from '../../src/format/dtype.ts';
import type { Linear } from '../../src/format/model-description.ts';
import { openCheckpointDir } from '../../src/node/file-source.ts';
import { TINY_A } from './fixtures.ts';

function linearsOf(d: {
  embed: Linear;
  layers: {
    qProj: Linear;
    kProj: Linear | null;
    vProj: Linear | null;
    oProj: Linear;
    gate: Linear;
    up: Linear;
    down: Linear;
  }[];
}): Linear[] {
  const out: Linear[] = [d.embed];
  for (const l of d.layers)
    out.push(...[l.qProj, l.kProj, l.vProj, l.oProj, l.gate, l.up, l.down].filter((x): x is Linear => x !== null));
  return out;
}

/** Packs codes as MLX does: one LSB-first little-endian bitstream per row. */
function pack(codes: number[], bits: number): Uint32Array {
  const words = new Uint32Array((codes.length * bits) / 32);
  codes.forEach((c, k) => {
    for (let b = 0; b < bits; b++) {
      if ((c >> b) & 1) {
        const bit = k * bits + b;
        words[bit >>> 5] |= 1 << (bit & 31);
      }
    }
  });
  return words;
}

describe('dequantization', () => {
  it('unpacks 4-bit and 8-bit words LSB first', () => {
    expect([...unpackRow(new Uint32Array([0x76543210]), 0, 8, 4)]).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect([...unpackRow(new Uint32Array([0xfedcba98]), 0, 8, 4)]).toEqual([8, 9, 10, 11, 12, 13, 14, 15]);
    expect([...unpackRow(new Uint32Array([0x04030201]), 0, 4, 8)]).toEqual([1, 2, 3, 4]);
  });

  it('round-trips 2/3/4/5/6/8-bit codes packed across word boundaries', () => {
    for (const bits of [2, 3, 4, 5, 6, 8]) {
      const n = 64;
      const codes = Array.from({ length: n }, (_, k) => (k * 7 + 3) % (1 << bits));
      expect([...unpackRow(pack(codes, bits), 0, n, bits)]).toEqual(codes);
      const s = new Float64Array([0.5]),
        b = new Float64Array([-1]);
      const w = dequantAffine(pack(codes, bits), s, b, 1, n, bits, 64);
      expect([...w]).toEqual(codes.map((c) => 0.5 * c - 1));
    }
  });

  it('reproduces the stored codes of every tiny-a linear (4-bit and 8-bit): (w - bias) / scale is the code', async () => {
    let checked = 0;
    const seen = new Set<number>();
    for (const which of ['target', 'assistant']) {
      const ck = await openCheckpointDir(path.join(TINY_A, which));
      const d = ck.description;
      const all = d.role === 'assistant' ? [...linearsOf(d), d.preProjection, d.postProjection] : linearsOf(d);
      for (const lin of all) {
        if (lin.kind !== 'affine') throw new Error(`${lin.name} is not quantized`);
        seen.add(lin.bits);
        const w = await dequantizeLinear(lin);
        expect(w.length).toBe(lin.outFeatures * lin.inFeatures);
        const words = toUint32(await readRows(lin.weight, 0, lin.outFeatures));
        const scales = toFloat64(await readRows(lin.scales, 0, lin.outFeatures), lin.scales.dtype);
        const biases = toFloat64(await readRows(lin.biases, 0, lin.outFeatures), lin.biases.dtype);
        const groups = lin.inFeatures / lin.groupSize;
        const wordsPerRow = (lin.inFeatures * lin.bits) / 32;
        let worst = 0;
        for (let r = 0; r < lin.outFeatures; r++) {
          const codes = unpackRow(words, r * wordsPerRow, lin.inFeatures, lin.bits);
          for (let k = 0; k < lin.inFeatures; k++) {
            const g = r * groups + Math.floor(k / lin.groupSize);
            const q = (w[r * lin.inFeatures + k] - biases[g]) / scales[g];
            worst = Math.max(worst, Math.abs(q - codes[k]));
            if (codes[k] >= 1 << lin.bits) throw new Error('code out of range');
          }
        }
        expect(worst, lin.name).toBeLessThan(1e-6);
        // a row range reads only those rows and equals the same slice of the whole
        const part = await dequantizeLinear(lin, 3, 2);
        expect([...part]).toEqual([...w.subarray(3 * lin.inFeatures, 5 * lin.inFeatures)]);
        checked++;
      }
    }
    expect(seen).toEqual(new Set([4, 8]));
    expect(checked).toBe(1 + 10 * 7 + 2 * 6 + (1 + 4 * 5 + 2)); // target: embed, 7 per sliding layer, 6 per k_eq_v full layer; assistant: embed, 5 per layer, pre/post projection
  });
});
