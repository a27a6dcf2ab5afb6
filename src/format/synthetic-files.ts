/**
 * What every synthetic checkpoint is made of, whatever its family (src/format/synthetic.ts for Gemma 4,
 * src/format/qwen3_5/synthetic.ts): the tensor planner (names, dtypes, shapes and how each tensor's elements are
 * generated) and the virtual files (config.json, safetensors shards and their index) whose bytes are computed on
 * read from (seed, tensor, element index) by a counter-based hash.
 */
import { bytesSource, checkRange, type ByteSource } from './bytesource.ts';
import { roundToBf16 } from './dtype.ts';
import type { AffineBits } from './quantization.ts';

/** MLX's default shard size is 5 GB; stay strictly under it. */
export const DEFAULT_SHARD_BYTES = 5e9;

export interface SynthOptions {
  seed?: number;
  /** Largest data section per weight file; more data is split into model-0000k-of-0000n shards + index. */
  shardBytes?: number;
}

// ---------------------------------------------------------------- tensors

/**
 * How a tensor's elements are made: random u32 words, or bf16 (table) or f32 (table32) values drawn from a
 * 256-entry table.
 */
type Gen =
  | { kind: 'words'; seed: number }
  | { kind: 'table'; seed: number; table: Uint16Array }
  | { kind: 'table32'; seed: number; table: Float32Array }
  | { kind: 'ints'; data: Int32Array }; // exact values (an E-series assistant's token_ordering)

export interface PlannedTensor {
  name: string;
  dtype: 'U32' | 'BF16' | 'F32' | 'I32';
  shape: number[];
  byteLength: number;
  gen: Gen;
}

/** 32-bit integer hash (Wellons' lowbias32): good avalanche, a handful of ops per element. */
function hash32(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d);
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b);
  return (x ^ (x >>> 16)) >>> 0;
}

function seedOf(globalSeed: number, key: string): number {
  let h = 0x811c9dc5 ^ hash32(globalSeed >>> 0);
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return hash32(h >>> 0);
}

const bf16Bits = (x: number): number => {
  const f = new Float32Array([roundToBf16(x)]);
  return new Uint32Array(f.buffer)[0] >>> 16;
};
/** 256 bf16 values, f(u) for u evenly spread over (0, 1). */
const table = (f: (u: number) => number) => Uint16Array.from({ length: 256 }, (_, k) => bf16Bits(f((k + 0.5) / 256)));
/** The same in f32 (tensors MLX keeps in float32, such as Qwen3.5's A_log). */
const table32 = (f: (u: number) => number) => Float32Array.from({ length: 256 }, (_, k) => f((k + 0.5) / 256));
const ELEMENT_BYTES = { U32: 4, BF16: 2, F32: 4, I32: 4 } as const;

/**
 * Uniform codes over L = 2^bits levels give w = s q + b mean 0, std s sqrt((L^2-1)/12) when b = -s (L-1)/2.
 * Per group s varies by +-25% around the value giving std 1/sqrt(in); scales and biases tensors of one
 * module share a seed, so group k of both draws the same table index and each (s, b) pair stays mean-zero.
 */
function scaleBiasTables(bits: number, inF: number): { scales: Uint16Array; biases: Uint16Array } {
  const L = 2 ** bits;
  const s0 = Math.sqrt(12 / (L * L - 1)) / Math.sqrt(inF);
  const s = (u: number) => roundToBf16(s0 * (0.75 + 0.5 * u));
  return { scales: table(s), biases: table((u) => (-s(u) * (L - 1)) / 2) };
}

/** Plans tensors (names, dtypes, shapes, generators); the Qwen3.5 presets (src/format/qwen3_5/synthetic.ts) use it too. */
export class Planner {
  readonly tensors: PlannedTensor[] = [];
  constructor(private readonly seed: number) {}

  private add(name: string, dtype: PlannedTensor['dtype'], shape: number[], gen: Gen): void {
    this.tensors.push({
      name,
      dtype,
      shape,
      byteLength: shape.reduce((a, d) => a * d, 1) * ELEMENT_BYTES[dtype],
      gen,
    });
  }

  /** A float tensor of any shape whose values are f(u), u drawn uniformly per element from 256 levels. */
  values(name: string, dtype: 'BF16' | 'F32', shape: number[], f: (u: number) => number): void {
    const seed = seedOf(this.seed, name);
    this.add(
      name,
      dtype,
      shape,
      dtype === 'F32' ? { kind: 'table32', seed, table: table32(f) } : { kind: 'table', seed, table: table(f) },
    );
  }

  linear(path: string, out: number, inF: number, bits: AffineBits | null, groupSize: number): void {
    if (bits === null) {
      const a = Math.sqrt(3 / inF); // uniform +-a has std 1/sqrt(in)
      this.add(`${path}.weight`, 'BF16', [out, inF], {
        kind: 'table',
        seed: seedOf(this.seed, path),
        table: table((u) => a * (2 * u - 1)),
      });
      return;
    }
    const t = scaleBiasTables(bits, inF);
    const sb = seedOf(this.seed, `${path}:scales+biases`);
    this.add(`${path}.weight`, 'U32', [out, (inF * bits) / 32], { kind: 'words', seed: seedOf(this.seed, path) });
    this.add(`${path}.scales`, 'BF16', [out, inF / groupSize], { kind: 'table', seed: sb, table: t.scales });
    this.add(`${path}.biases`, 'BF16', [out, inF / groupSize], { kind: 'table', seed: sb, table: t.biases });
  }

  vector(name: string, size: number, center: number, spread: number): void {
    this.add(name, 'BF16', [size], {
      kind: 'table',
      seed: seedOf(this.seed, name),
      table: table((u) => center + spread * (u - 0.5)),
    });
  }
}

// ---------------------------------------------------------------- files

const json = (name: string, value: unknown) =>
  bytesSource(name, new TextEncoder().encode(JSON.stringify(value, null, 2)));

/**
 * config.json and the weight files (sharded past shardBytes, with an index) of one checkpoint folder, then `extra`
 * files (a target's tokenizer files).
 */
export function files(
  config: unknown,
  tensors: PlannedTensor[],
  shardBytes: number,
  extra: readonly ByteSource[] = [],
): ByteSource[] {
  const shards: PlannedTensor[][] = [[]];
  let used = 0;
  for (const t of tensors) {
    if (used > 0 && used + t.byteLength > shardBytes) {
      shards.push([]);
      used = 0;
    }
    shards[shards.length - 1].push(t);
    used += t.byteLength;
  }
  const out: ByteSource[] = [json('config.json', config)];
  if (shards.length === 1) return [...out, new SyntheticFile('model.safetensors', shards[0]), ...extra];
  const n = shards.length;
  const names = shards.map(
    (_, i) => `model-${String(i + 1).padStart(5, '0')}-of-${String(n).padStart(5, '0')}.safetensors`,
  );
  const weightMap: Record<string, string> = {};
  shards.forEach((s, i) =>
    s.forEach((t) => {
      weightMap[t.name] = names[i];
    }),
  );
  const total = tensors.reduce((a, t) => a + t.byteLength, 0);
  out.push(json('model.safetensors.index.json', { metadata: { total_size: total }, weight_map: weightMap }));
  return [...out, ...shards.map((s, i) => new SyntheticFile(names[i], s)), ...extra];
}

/** Elements generated per step when filling a range (bounds the scratch to 4 MB). */
const STEP = 1 << 20;

/** A safetensors file whose bytes are computed on read: header as MLX writes it (no padding), then data. */
export class SyntheticFile implements ByteSource {
  readonly size: number;
  private readonly header: Uint8Array;
  /** Absolute start offset of each tensor's data, ascending. */
  private readonly starts: number[] = [];
  /** Allocated on the first data read, so header-only use (opening a 31B in a test) costs nothing. */
  private scratch?: Uint32Array;

  constructor(
    readonly name: string,
    private readonly tensors: readonly PlannedTensor[],
  ) {
    const h: Record<string, unknown> = { __metadata__: { format: 'mlx' } };
    let off = 0;
    for (const t of tensors) {
      h[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [off, off + t.byteLength] };
      off += t.byteLength;
    }
    const text = new TextEncoder().encode(JSON.stringify(h));
    this.header = new Uint8Array(8 + text.byteLength);
    new DataView(this.header.buffer).setBigUint64(0, BigInt(text.byteLength), true);
    this.header.set(text, 8);
    let start = this.header.byteLength;
    for (const t of tensors) {
      this.starts.push(start);
      start += t.byteLength;
    }
    this.size = start;
  }

  async read(offset: number, length: number): Promise<Uint8Array> {
    const out = new Uint8Array(length);
    this.readInto(offset, out);
    return out;
  }

  /** Fills `out` with the file's bytes from `offset` (synchronous: pure computation). */
  readInto(offset: number, out: Uint8Array): void {
    checkRange(this.name, this.size, offset, out.byteLength);
    const end = offset + out.byteLength;
    let pos = offset;
    if (pos < this.header.byteLength) {
      const n = Math.min(end, this.header.byteLength) - pos;
      out.set(this.header.subarray(pos, pos + n), 0);
      pos += n;
    }
    for (let i = this.tensorAt(pos); pos < end && i < this.tensors.length; i++) {
      const t = this.tensors[i];
      const from = pos - this.starts[i];
      const n = Math.min(end - pos, t.byteLength - from);
      this.fill(t, from, out.subarray(pos - offset, pos - offset + n));
      pos += n;
    }
  }

  /** Index of the tensor containing absolute byte `pos` (binary search over starts). */
  private tensorAt(pos: number): number {
    let lo = 0;
    let hi = this.starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.starts[mid] <= pos) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  /** Writes bytes [from, from + out.length) of tensor t's data into out (any alignment). */
  private fill(t: PlannedTensor, from: number, out: Uint8Array): void {
    const es = ELEMENT_BYTES[t.dtype];
    const scratch = (this.scratch ??= new Uint32Array(STEP));
    const bytes = new Uint8Array(scratch.buffer);
    let done = 0;
    while (done < out.byteLength) {
      const byte = from + done;
      const first = Math.floor(byte / es);
      const skip = byte - first * es;
      const count = Math.min(Math.ceil((skip + out.byteLength - done) / es), (STEP * 4) / es);
      generate(t.gen, first, count, scratch);
      const n = Math.min(count * es - skip, out.byteLength - done);
      out.set(bytes.subarray(skip, skip + n), done);
      done += n;
    }
  }
}

/**
 * Elements [first, first+count) of a generator into `scratch` (u32 words, f32 values, or u16 values packed two
 * per word).
 */
function generate(gen: Gen, first: number, count: number, scratch: Uint32Array): void {
  if (gen.kind === 'ints') {
    scratch.set(new Uint32Array(gen.data.buffer, gen.data.byteOffset + 4 * first, count));
    return;
  }
  const seed = gen.seed;
  if (gen.kind === 'words') {
    for (let j = 0; j < count; j++) scratch[j] = hash32((first + j + seed) | 0);
    return;
  }
  if (gen.kind === 'table32') {
    const f32 = new Float32Array(scratch.buffer, 0, count);
    for (let j = 0; j < count; j++) f32[j] = gen.table[hash32((first + j + seed) | 0) & 255];
    return;
  }
  const u16 = new Uint16Array(scratch.buffer, 0, count);
  const tab = gen.table;
  for (let j = 0; j < count; j++) u16[j] = tab[hash32((first + j + seed) | 0) & 255];
}
