import { FormatError } from './errors.ts';
import type { Linear } from './model-description.ts';
import { toFloat64, toUint32 } from './safetensors.ts';
import type { TensorRef } from './safetensors.ts';

/**
 * Unpacks the codes of one packed row. MLX packs codes as one little-endian bitstream, least significant bits
 * first: for 4-bit, element k is bits 4*(k%8) of word k/8; 3/5/6-bit codes straddle word boundaries.
 * `wordOffset` is where the row starts in `words`.
 */
export function unpackRow(
  words: Uint32Array,
  wordOffset: number,
  inFeatures: number,
  bits: number,
  out: Uint32Array | number[] = new Uint32Array(inFeatures) as Uint32Array,
): Uint32Array | number[] {
  const mask = bits === 32 ? 0xffffffff : (1 << bits) - 1;
  for (let k = 0; k < inFeatures; k++) {
    const bit = k * bits;
    const w = wordOffset + (bit >>> 5);
    const shift = bit & 31;
    let v = words[w] >>> shift;
    if (shift + bits > 32) v |= words[w + 1] << (32 - shift);
    out[k] = (v & mask) >>> 0;
  }
  return out;
}

/** Reads rows [start, start+count) of a 2-D tensor: only those bytes. */
export async function readRows(t: TensorRef, start: number, count: number): Promise<Uint8Array> {
  const rowBytes = (t.byteLength / t.shape[0]) | 0;
  if (start < 0 || count < 0 || start + count > t.shape[0]) {
    throw new FormatError(
      `${t.file.name}: rows [${start}, ${start + count}) outside tensor "${t.name}" with ${t.shape[0]} rows`,
      t.file.name,
      t.name,
    );
  }
  const b = await t.file.read(t.offset + start * rowBytes, count * rowBytes);
  return b.slice(); // fresh aligned copy: file offsets of MLX tensors are not aligned
}

/**
 * Dequantizes (or widens) rows [start, start+count) of a linear's weight to float64, row-major [count, in].
 * Affine: w = scale * q + bias per group of `groupSize` inputs.
 */
export async function dequantizeLinear(lin: Linear, start = 0, count = lin.outFeatures): Promise<Float64Array> {
  const inF = lin.inFeatures;
  if (lin.kind === 'dense') {
    return toFloat64(await readRows(lin.weight, start, count), lin.weight.dtype);
  }
  const words = toUint32(await readRows(lin.weight, start, count));
  const scales = toFloat64(await readRows(lin.scales, start, count), lin.scales.dtype);
  const biases = toFloat64(await readRows(lin.biases, start, count), lin.biases.dtype);
  return dequantAffine(words, scales, biases, count, inF, lin.bits, lin.groupSize);
}

/** Pure dequantization of `rows` packed rows (used by dequantizeLinear and tests). */
export function dequantAffine(
  words: Uint32Array,
  scales: Float64Array,
  biases: Float64Array,
  rows: number,
  inF: number,
  bits: number,
  groupSize: number,
): Float64Array {
  const wordsPerRow = (inF * bits) / 32;
  const groups = inF / groupSize;
  const out = new Float64Array(rows * inF);
  const codes = new Uint32Array(inF);
  for (let r = 0; r < rows; r++) {
    unpackRow(words, r * wordsPerRow, inF, bits, codes);
    for (let k = 0; k < inF; k++) {
      const g = r * groups + ((k / groupSize) | 0);
      out[r * inF + k] = scales[g] * codes[k] + biases[g];
    }
  }
  return out;
}
