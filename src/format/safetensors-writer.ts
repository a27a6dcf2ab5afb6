import { DTYPE_SIZE, type Dtype } from './dtype.ts';
import { FormatError, fmtShape } from './errors.ts';

/** One tensor to write: raw little-endian bytes of `dtype` elements. */
export interface TensorToWrite {
  name: string;
  dtype: Dtype;
  shape: readonly number[];
  data: Uint8Array;
}

/**
 * Serialises tensors to safetensors bytes the way MLX does: compact JSON header, no padding (so tensor data
 * is generally unaligned), data in the given order. Used by tests (name-prefix variants built from fixture
 * bytes) and by the synthetic-checkpoint generator.
 */
export function writeSafetensors(tensors: readonly TensorToWrite[], metadata?: Record<string, string>): Uint8Array {
  const header: Record<string, unknown> = {};
  if (metadata) header.__metadata__ = metadata;
  let offset = 0;
  for (const t of tensors) {
    const bytes = t.shape.reduce((a, d) => a * d, 1) * DTYPE_SIZE[t.dtype];
    if (bytes !== t.data.byteLength) {
      throw new FormatError(
        `writeSafetensors: tensor "${t.name}" has shape ${fmtShape(t.shape)} x ${t.dtype} = ${bytes} bytes but ${t.data.byteLength} bytes were given`,
      );
    }
    if (t.name in header) throw new FormatError(`writeSafetensors: duplicate tensor name "${t.name}"`);
    header[t.name] = { dtype: t.dtype, shape: [...t.shape], data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  const json = new TextEncoder().encode(JSON.stringify(header));
  const out = new Uint8Array(8 + json.byteLength + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.byteLength), true);
  out.set(json, 8);
  let p = 8 + json.byteLength;
  for (const t of tensors) {
    out.set(t.data, p);
    p += t.data.byteLength;
  }
  return out;
}
