import type { ByteSource } from './bytesource.ts';
import { DTYPE_SIZE, isDtype, type Dtype } from './dtype.ts';
import { FormatError, fmtShape } from './errors.ts';

export { toFloat64, toUint32, toUint16 } from './dtype.ts';

/**
 * Where one tensor's bytes live. Offsets are absolute (from the start of the file), already validated to lie
 * inside the file, so a reader can fetch exactly [offset, offset+byteLength) and nothing else.
 */
export interface TensorRef {
  /** The name as written in the file (before any prefix normalisation). */
  readonly name: string;
  readonly file: ByteSource;
  readonly dtype: Dtype;
  readonly shape: readonly number[];
  /** Absolute byte offset in the file (8 + header length + data_offsets[0]); not necessarily aligned. */
  readonly offset: number;
  readonly byteLength: number;
}

export interface SafetensorsHeader {
  readonly file: ByteSource;
  /** N, the length of the JSON header. */
  readonly headerLength: number;
  /** 8 + N: where data_offsets count from. */
  readonly dataStart: number;
  /** Tensors in ascending offset order. */
  readonly tensors: readonly TensorRef[];
  readonly metadata?: Readonly<Record<string, string>>;
}

/** A header larger than this is refused: real checkpoints have headers of a few MB at most. */
export const MAX_HEADER_BYTES = 100 * 1024 * 1024;

/** Reads and fully validates the header of a safetensors file; reads no tensor data. */
export async function readSafetensorsHeader(file: ByteSource): Promise<SafetensorsHeader> {
  const name = file.name;
  if (file.size < 8) {
    throw new FormatError(
      `${name}: file is ${file.size} bytes, too short for the 8-byte safetensors header length`,
      name,
    );
  }
  const lenBytes = await file.read(0, 8);
  const n64 = new DataView(lenBytes.buffer, lenBytes.byteOffset, 8).getBigUint64(0, true);
  if (n64 === 0n) throw new FormatError(`${name}: safetensors header length is 0`, name);
  if (n64 > BigInt(MAX_HEADER_BYTES)) {
    throw new FormatError(
      `${name}: safetensors header length ${n64} exceeds the ${MAX_HEADER_BYTES}-byte cap (not a safetensors file?)`,
      name,
    );
  }
  const n = Number(n64);
  if (8 + n > file.size) {
    throw new FormatError(
      `${name}: safetensors header length ${n} runs past the end of the file (8 + ${n} > ${file.size} bytes)`,
      name,
    );
  }
  const json = await file.read(8, n);
  return parseSafetensorsHeader(file, json);
}

/** Validates header JSON bytes (the N bytes after the length) against the file they came from. */
export function parseSafetensorsHeader(file: ByteSource, jsonBytes: Uint8Array): SafetensorsHeader {
  const name = file.name;
  const n = jsonBytes.byteLength;
  const dataStart = 8 + n;
  let parsed: unknown;
  try {
    // fatal: invalid UTF-8 is a format error, not silently replaced characters
    parsed = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(jsonBytes));
  } catch (e) {
    throw new FormatError(`${name}: safetensors header is not valid UTF-8 JSON (${(e as Error).message})`, name);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new FormatError(
      `${name}: safetensors header must be a JSON object, found ${Array.isArray(parsed) ? 'an array' : typeof parsed}`,
      name,
    );
  }
  const dataSize = file.size - dataStart;
  const tensors: TensorRef[] = [];
  let metadata: Record<string, string> | undefined;
  for (const [key, value] of Object.entries(parsed as Record<string, unknown>)) {
    if (key === '__metadata__') {
      metadata = parseMetadata(name, value);
      continue;
    }
    tensors.push(parseEntry(file, key, value, dataStart, dataSize));
  }
  tensors.sort((a, b) => a.offset - b.offset || a.byteLength - b.byteLength);
  // Overlap check on sorted ranges; empty tensors occupy no bytes and cannot overlap anything.
  let prev: TensorRef | undefined;
  for (const t of tensors) {
    if (t.byteLength === 0) continue;
    if (prev && t.offset < prev.offset + prev.byteLength) {
      const r = (x: TensorRef) => `[${x.offset - dataStart}, ${x.offset - dataStart + x.byteLength})`;
      throw new FormatError(
        `${name}: tensor "${t.name}" data ${r(t)} overlaps tensor "${prev.name}" data ${r(prev)}`,
        name,
        t.name,
      );
    }
    prev = t;
  }
  // The data section ends where the last tensor's data ends: the reference implementation refuses any other
  // length (MetadataIncompleteBuffer). Bytes past the last tensor belong to no tensor, so a file with them was cut
  // and re-joined, appended to, or not written by a safetensors writer; its tensors cannot be trusted to be
  // the ones the header describes. (A data section shorter than a tensor's range was refused in parseEntry.)
  const end = tensors.reduce((m, t) => Math.max(m, t.offset - dataStart + t.byteLength), 0);
  if (end !== dataSize)
    throw new FormatError(
      `${name}: ${dataSize - end} bytes after the last tensor's data: the tensors' data_offsets end at ${end}, so the data section after the ${dataStart}-byte header must be ${end} bytes, but it is ${dataSize} (file of ${file.size} bytes, expected ${dataStart + end}); safetensors allows no trailing bytes`,
      name,
    );
  return { file, headerLength: n, dataStart, tensors, metadata };
}

function parseMetadata(name: string, value: unknown): Record<string, string> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new FormatError(
      `${name}: "__metadata__" must be an object of strings, found ${JSON.stringify(value)}`,
      name,
      '__metadata__',
    );
  }
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(value)) {
    if (typeof v !== 'string') {
      throw new FormatError(
        `${name}: "__metadata__" entry "${k}" must be a string, found ${JSON.stringify(v)}`,
        name,
        '__metadata__',
      );
    }
    out[k] = v;
  }
  return out;
}

function parseEntry(file: ByteSource, key: string, value: unknown, dataStart: number, dataSize: number): TensorRef {
  const name = file.name;
  const where = `${name}: tensor "${key}"`;
  const fail = (msg: string): never => {
    throw new FormatError(`${where} ${msg}`, name, key);
  };
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    fail(`entry must be an object, found ${JSON.stringify(value)}`);
  const e = value as Record<string, unknown>;
  if (!isDtype(e.dtype)) {
    fail(`has unknown dtype ${JSON.stringify(e.dtype)} (expected one of ${Object.keys(DTYPE_SIZE).join(', ')})`);
  }
  const dtype = e.dtype as Dtype;
  const shape = e.shape;
  if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    fail(`shape must be an array of non-negative integers, found ${JSON.stringify(shape)}`);
  }
  const offs = e.data_offsets;
  if (!Array.isArray(offs) || offs.length !== 2 || !offs.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    fail(`data_offsets must be [begin, end] non-negative integers, found ${JSON.stringify(offs)}`);
  }
  const [begin, end] = offs as number[];
  if (end < begin) fail(`data_offsets [${begin}, ${end}] end before they begin`);
  const dims = shape as number[];
  const expected = dims.reduce((a, d) => a * d, 1) * DTYPE_SIZE[dtype];
  if (expected !== end - begin) {
    fail(`has shape ${fmtShape(dims)} x ${dtype} = ${expected} bytes but its data_offsets span ${end - begin} bytes`);
  }
  if (end > dataSize) {
    fail(
      `data_offsets [${begin}, ${end}] run past the end of the data section (${dataSize} bytes after the ${dataStart}-byte header)`,
    );
  }
  return { name: key, file, dtype, shape: dims, offset: dataStart + begin, byteLength: end - begin };
}

/** Reads one tensor's bytes (only its own range) into a fresh buffer starting at byte 0 (so aligned). */
export async function readTensorBytes(t: TensorRef): Promise<Uint8Array> {
  const b = await t.file.read(t.offset, t.byteLength);
  if (b.byteOffset === 0 && b.byteLength === b.buffer.byteLength) return b;
  return b.slice();
}

/** Number of elements of a shape. */
export function numel(shape: readonly number[]): number {
  return shape.reduce((a, d) => a * d, 1);
}
