import { FormatError } from './errors.ts';

/**
 * Random access to one file of a checkpoint. Browser (File/Blob) and Node (file handle) implement it, so
 * the format layer never holds a whole shard in memory: it reads the header, then one tensor at a time.
 */
export interface ByteSource {
  /** Path relative to the checkpoint folder, e.g. "model-00001-of-00002.safetensors". */
  readonly name: string;
  /** File size in bytes. */
  readonly size: number;
  /** Reads exactly `length` bytes at `offset`; rejects with a FormatError if the range is outside the file. */
  read(offset: number, length: number): Promise<Uint8Array>;
}

/** Throws unless [offset, offset+length) lies inside a file of `size` bytes. */
export function checkRange(name: string, size: number, offset: number, length: number): void {
  if (
    !Number.isSafeInteger(offset) ||
    !Number.isSafeInteger(length) ||
    offset < 0 ||
    length < 0 ||
    offset + length > size
  ) {
    throw new FormatError(
      `${name}: read of ${length} bytes at offset ${offset} is outside the file (${size} bytes)`,
      name,
    );
  }
}

/** A ByteSource over a Blob or File; each read slices the blob, so only the requested bytes are loaded. */
export function blobSource(name: string, blob: Blob): ByteSource {
  return {
    name,
    size: blob.size,
    async read(offset, length) {
      checkRange(name, blob.size, offset, length);
      return new Uint8Array(await blob.slice(offset, offset + length).arrayBuffer());
    },
  };
}

/** A ByteSource over bytes already in memory (tests, synthetic checkpoints, small files). */
export function bytesSource(name: string, bytes: Uint8Array): ByteSource {
  return {
    name,
    size: bytes.byteLength,
    async read(offset, length) {
      checkRange(name, bytes.byteLength, offset, length);
      return bytes.subarray(offset, offset + length);
    },
  };
}

/** Reads a whole (small) file, e.g. config.json. */
export async function readAll(src: ByteSource): Promise<Uint8Array> {
  return src.read(0, src.size);
}

/** Reads a whole file as UTF-8 text and parses it as JSON; a syntax error becomes a FormatError naming the file. */
export async function readJson(src: ByteSource): Promise<unknown> {
  return parseJsonBytes(await readAll(src), src.name);
}

/**
 * UTF-8 bytes of file `name` parsed as JSON; a syntax error becomes a FormatError naming the file (`where`: what
 * the message starts with, the file name by default).
 */
export function parseJsonBytes(bytes: Uint8Array, name: string, where = name): unknown {
  try {
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch (e) {
    throw new FormatError(`${where}: not valid JSON (${(e as Error).message})`, name);
  }
}
