import { describe, expect, it } from 'vitest';
import path from 'node:path';
import { bytesSource } from '../../src/format/bytesource.ts';
import { readSafetensorsHeader, readTensorBytes, toFloat64 } from '../../src/format/safetensors.ts';
import { writeSafetensors } from '../../src/format/safetensors-writer.ts';
import { nodeFileSource } from '../../src/node/file-source.ts';
import { TINY_A } from './fixtures.ts';

/** A file made of an 8-byte length, header text and `data` bytes. */
function file(header: unknown, dataBytes = 0, lengthOverride?: bigint): Uint8Array {
  const json = new TextEncoder().encode(typeof header === 'string' ? header : JSON.stringify(header));
  const out = new Uint8Array(8 + json.byteLength + dataBytes);
  new DataView(out.buffer).setBigUint64(0, lengthOverride ?? BigInt(json.byteLength), true);
  out.set(json, 8);
  return out;
}

describe('safetensors header', () => {
  it('parses the fixture files with absolute, unaligned offsets', async () => {
    for (const f of ['target/model.safetensors', 'assistant/model.safetensors', 'golden.safetensors']) {
      const src = await nodeFileSource(path.join(TINY_A, f));
      const h = await readSafetensorsHeader(src);
      expect(h.tensors.length).toBeGreaterThan(10);
      expect(h.dataStart).toBe(8 + h.headerLength);
      for (const t of h.tensors) expect(t.offset + t.byteLength).toBeLessThanOrEqual(src.size);
      if (f.startsWith('target')) {
        expect(h.metadata).toEqual({ format: 'mlx' });
        const q = h.tensors.find((t) => t.name === 'language_model.model.layers.0.self_attn.q_proj.weight')!;
        expect(q.dtype).toBe('U32');
        expect(q.shape).toEqual([256, 32]);
        // MLX writes no padding: the data section does not start 4-byte aligned here
        expect(h.dataStart % 4).not.toBe(0);
      }
    }
  });

  it('reads an unaligned tensor into aligned typed arrays', async () => {
    const f32 = new Float32Array([1.5, -2, 3.25]);
    const bytes = writeSafetensors([
      { name: 'a', dtype: 'U8', shape: [3], data: new Uint8Array([1, 2, 3]) },
      { name: 'b', dtype: 'F32', shape: [3], data: new Uint8Array(f32.buffer) },
      { name: 'c', dtype: 'BF16', shape: [2], data: new Uint8Array([0x80, 0x3f, 0x00, 0xc0]) }, // 1.0, -2.0
      { name: 'd', dtype: 'F16', shape: [1], data: new Uint8Array([0x00, 0x3c]) }, // 1.0
    ]);
    const h = await readSafetensorsHeader(bytesSource('x.safetensors', bytes));
    const get = (n: string) => h.tensors.find((t) => t.name === n)!;
    expect(get('b').offset % 4).not.toBe(0);
    expect([...toFloat64(await readTensorBytes(get('b')), 'F32')]).toEqual([1.5, -2, 3.25]);
    expect([...toFloat64(await readTensorBytes(get('c')), 'BF16')]).toEqual([1, -2]);
    expect([...toFloat64(await readTensorBytes(get('d')), 'F16')]).toEqual([1]);
  });

  // Every refusal (truncation, bad JSON, dtype, ranges, overlaps, ...) is in bad-input.test.ts.
  it('accepts zero-size tensors and metadata', async () => {
    const h = await readSafetensorsHeader(
      bytesSource(
        'm.safetensors',
        file(
          {
            __metadata__: { format: 'mlx' },
            e: { dtype: 'F32', shape: [0, 3], data_offsets: [0, 0] },
            a: { dtype: 'U8', shape: [], data_offsets: [0, 1] },
          },
          1,
        ),
      ),
    );
    expect(h.tensors.map((t) => t.name).sort()).toEqual(['a', 'e']);
  });
});

describe('safetensors writer', () => {
  it('round-trips and writes an unpadded header', async () => {
    const bytes = writeSafetensors([{ name: 'a', dtype: 'U8', shape: [1], data: new Uint8Array([7]) }], {
      format: 'mlx',
    });
    const n = Number(new DataView(bytes.buffer).getBigUint64(0, true));
    const text = new TextDecoder().decode(bytes.subarray(8, 8 + n));
    expect(text).toBe('{"__metadata__":{"format":"mlx"},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}');
    expect(bytes.byteLength).toBe(8 + n + 1);
  });
  it('refuses data of the wrong size', () => {
    expect(() => writeSafetensors([{ name: 'a', dtype: 'F32', shape: [2], data: new Uint8Array(4) }])).toThrow(
      /shape \[2\] x F32 = 8 bytes but 4 bytes were given/,
    );
  });
});
