import { FormatError } from './errors.ts';

/** The safetensors dtypes this project accepts (the safetensors spec's common numeric set). */
export type Dtype =
  | 'F64'
  | 'F32'
  | 'F16'
  | 'BF16'
  | 'I64'
  | 'I32'
  | 'I16'
  | 'I8'
  | 'U64'
  | 'U32'
  | 'U16'
  | 'U8'
  | 'BOOL';

export const DTYPE_SIZE: Readonly<Record<Dtype, number>> = {
  F64: 8,
  F32: 4,
  F16: 2,
  BF16: 2,
  I64: 8,
  I32: 4,
  I16: 2,
  I8: 1,
  U64: 8,
  U32: 4,
  U16: 2,
  U8: 1,
  BOOL: 1,
};

export function isDtype(x: unknown): x is Dtype {
  return typeof x === 'string' && Object.hasOwn(DTYPE_SIZE, x);
}

/** Float dtypes a dense (unquantized) weight or a norm may use. */
export type FloatDtype = 'F32' | 'F16' | 'BF16';
export function isFloatDtype(d: Dtype): d is FloatDtype {
  return d === 'F32' || d === 'F16' || d === 'BF16';
}

/** bf16 bits -> number (exact: bf16 is the top half of an f32). */
export function bf16ToNumber(bits: number): number {
  F32_SCRATCH_U32[0] = (bits & 0xffff) << 16;
  return F32_SCRATCH[0];
}

/** f16 (IEEE half) bits -> number, exact including subnormals, inf and NaN. */
export function f16ToNumber(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exp = (bits >> 10) & 0x1f;
  const frac = bits & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 31) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

/** Rounds a number to the nearest bf16 value (round to nearest even, via f32 first as MLX/torch do). */
export function roundToBf16(x: number): number {
  F32_SCRATCH[0] = x;
  const u = F32_SCRATCH_U32[0];
  if ((u & 0x7f800000) === 0x7f800000) return F32_SCRATCH[0]; // inf / NaN unchanged
  const rounded = (u + 0x7fff + ((u >>> 16) & 1)) >>> 16;
  return bf16ToNumber(rounded);
}

const F32_SCRATCH = new Float32Array(1);
const F32_SCRATCH_U32 = new Uint32Array(F32_SCRATCH.buffer);

/**
 * Widens the little-endian bytes of a tensor to float64. Integer dtypes are accepted too (goldens hold I32
 * token ids). The bytes need not be aligned: values are read with a DataView.
 */
export function toFloat64(bytes: Uint8Array, dtype: Dtype): Float64Array {
  const size = DTYPE_SIZE[dtype];
  if (bytes.byteLength % size !== 0) {
    throw new FormatError(`toFloat64: ${bytes.byteLength} bytes is not a whole number of ${dtype} elements`);
  }
  const n = bytes.byteLength / size;
  const out = new Float64Array(n);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  switch (dtype) {
    case 'F64':
      for (let i = 0; i < n; i++) out[i] = dv.getFloat64(i * 8, true);
      break;
    case 'F32':
      for (let i = 0; i < n; i++) out[i] = dv.getFloat32(i * 4, true);
      break;
    case 'F16':
      for (let i = 0; i < n; i++) out[i] = f16ToNumber(dv.getUint16(i * 2, true));
      break;
    case 'BF16':
      for (let i = 0; i < n; i++) out[i] = bf16ToNumber(dv.getUint16(i * 2, true));
      break;
    case 'I64':
      for (let i = 0; i < n; i++) out[i] = Number(dv.getBigInt64(i * 8, true));
      break;
    case 'U64':
      for (let i = 0; i < n; i++) out[i] = Number(dv.getBigUint64(i * 8, true));
      break;
    case 'I32':
      for (let i = 0; i < n; i++) out[i] = dv.getInt32(i * 4, true);
      break;
    case 'U32':
      for (let i = 0; i < n; i++) out[i] = dv.getUint32(i * 4, true);
      break;
    case 'I16':
      for (let i = 0; i < n; i++) out[i] = dv.getInt16(i * 2, true);
      break;
    case 'U16':
      for (let i = 0; i < n; i++) out[i] = dv.getUint16(i * 2, true);
      break;
    case 'I8':
      for (let i = 0; i < n; i++) out[i] = dv.getInt8(i);
      break;
    case 'U8':
    case 'BOOL':
      for (let i = 0; i < n; i++) out[i] = dv.getUint8(i);
      break;
  }
  return out;
}

/**
 * Copies tensor bytes into a fresh, aligned buffer and views them as u32 words (packed quantized codes).
 * The copy is what makes unaligned file offsets (MLX writes no padding) safe.
 */
export function toUint32(bytes: Uint8Array): Uint32Array {
  if (bytes.byteLength % 4 !== 0)
    throw new FormatError(`toUint32: ${bytes.byteLength} bytes is not a whole number of u32 words`);
  const copy = new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  return new Uint32Array(copy.buffer);
}

/** Same as toUint32 for 16-bit raw values (bf16/f16 bits). */
export function toUint16(bytes: Uint8Array): Uint16Array {
  if (bytes.byteLength % 2 !== 0)
    throw new FormatError(`toUint16: ${bytes.byteLength} bytes is not a whole number of u16 values`);
  const copy = new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  return new Uint16Array(copy.buffer);
}
