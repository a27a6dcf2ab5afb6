/**
 * Uniform parameter blocks packed by name from each shader's `struct Params` (src/gpu/params-layout.ts,
 * used by Recorder.params): field order and types come from the WGSL, a missing or unknown field throws.
 */
import { describe, expect, it } from 'vitest';
import { packParams, paramsBytes, paramsLayout, parseParamsStruct } from '../../src/gpu/params-layout.ts';

const words = (b: ArrayBuffer) => [...new Uint32Array(b)];
const f32Bits = (v: number) => new Uint32Array(Float32Array.of(v).buffer)[0];

describe('Params layouts from WGSL', () => {
  it('reads the fields in declaration order, with their types, past comments', () => {
    const l = parseParamsStruct(
      `
      struct Other { a: u32 }
      struct Params {
        z: u32,          // first, whatever its name
        /* block comment: ignored */ scale: f32,
        off: i32, _pad: u32,
      }`,
      'test.wgsl',
    );
    expect(l.fields).toEqual([
      { name: 'z', type: 'u32', offset: 0 },
      { name: 'scale', type: 'f32', offset: 4 },
      { name: 'off', type: 'i32', offset: 8 },
      { name: '_pad', type: 'u32', offset: 12 },
    ]);
    expect(l.size).toBe(16);
    expect(l.signature).toBe('z: u32, scale: f32, off: i32, _pad: u32');
  });

  it('refuses structs it cannot pack: no Params, two, vector fields, repeated names', () => {
    expect(() => parseParamsStruct('struct P { a: u32 }', 'x.wgsl')).toThrow(
      'x.wgsl: expected one "struct Params { ... }", found 0',
    );
    expect(() => parseParamsStruct('struct Params { a: u32 } struct Params { b: u32 }', 'x.wgsl')).toThrow('found 2');
    expect(() => parseParamsStruct('struct Params { a: vec4<u32> }', 'x.wgsl')).toThrow(
      'Params field "a" has type vec4<u32>; only u32, i32 and f32 are supported',
    );
    expect(() => parseParamsStruct('struct Params { a: u32, a: f32 }', 'x.wgsl')).toThrow(
      'Params field "a" is declared twice',
    );
  });

  it("takes a shader file with its includes: the matmul kernels share matmul_affine_io.wgsl's struct", () => {
    const io = paramsLayout('matmul_affine_io.wgsl');
    expect(io.fields.map((f) => f.name)).toEqual([
      'M',
      'N',
      'K',
      'group_size',
      'n_offset',
      'x_stride',
      'y_stride',
      'round',
      '_zero',
    ]);
    for (const s of ['matmul.wgsl', 'matmul_lanes_loadx.wgsl', 'matmul_lanes_subgroupx.wgsl', 'matmul_coop.wgsl'])
      expect(paramsLayout(s).signature).toBe(io.signature);
    // every shader the engine dispatches has a layout that one 256-byte parameter slot holds (recorder.ts SLOT)
    for (const s of [
      'matmul_dense.wgsl',
      'matmul_split.wgsl',
      'embed.wgsl',
      'rmsnorm.wgsl',
      'rope.wgsl',
      'elementwise.wgsl',
      'argmax.wgsl',
      'attention.wgsl',
    ]) {
      expect(paramsLayout(s).fields.length).toBeGreaterThan(0);
      expect(paramsLayout(s).size).toBeLessThanOrEqual(256);
    }
  });
});

describe('packing a Params block by name', () => {
  const l = parseParamsStruct('struct Params { n: u32, round: u32, cap: f32, _pad: u32 }', 'elementwise-like.wgsl');

  it('places each value at its field, u32 as integers, f32 as floats, booleans as 1 / 0, padding as 0', () => {
    // keys in another order than the struct's: the struct decides
    const b = paramsBytes(l, { cap: 30, round: true, n: 4097 });
    expect(words(b)).toEqual([4097, 1, f32Bits(30), 0]);
    expect(words(paramsBytes(l, { n: 1, round: false, cap: 0.1 }))[2]).toBe(f32Bits(0.1));
    // the same number in a u32 and in an f32 field gives different bits
    const both = words(
      paramsBytes(parseParamsStruct('struct Params { a: u32, b: f32, c: i32 }'), { a: 3, b: 3, c: -3 }),
    );
    expect(both).toEqual([3, 0x40400000, 0xfffffffd, 0]);
  });

  it("gives a block of the struct's size rounded up to 16 bytes, as it is bound", () => {
    expect(paramsBytes(parseParamsStruct('struct Params { n: u32, c: f32 }'), { n: 1, c: 2 }).byteLength).toBe(16);
    expect(
      paramsBytes(paramsLayout('rmsnorm.wgsl'), {
        rows: 1,
        D: 8,
        in_stride: 8,
        out_stride: 8,
        eps: 1e-6,
        has_weight: 1,
        mode: 0,
        round: 0,
        post_scale: 1,
        then_norm: 0,
        has_weight2: 0,
        sums_group: 0,
        rot_pairs: 0,
        heads: 1,
        pos0: 0,
        table_half: 0,
        q_rows: 0,
        kv_rows: 0,
        kv_heads: 0,
      }).byteLength,
    ).toBe(80); // 19 fields, 76 bytes
  });

  it('throws for a missing field, naming it and its type', () => {
    expect(() => paramsBytes(l, { n: 1, cap: 2 })).toThrow(
      'elementwise-like.wgsl: Params field "round" (u32) is missing',
    );
    expect(() =>
      paramsBytes(paramsLayout('rope.wgsl'), { M: 1, heads: 1, d: 8, pos0: 0, rot_pairs: 4, round: 0 }),
    ).toThrow('rope.wgsl: Params field "table_half" (u32) is missing');
  });

  it("throws for an unknown field, listing the struct's fields", () => {
    expect(() => paramsBytes(l, { n: 1, round: 0, cap: 2, rounds: 1 })).toThrow(
      'elementwise-like.wgsl: Params has no field "rounds" (fields: n, round, cap, _pad)',
    );
  });

  it('throws for values a field cannot hold instead of wrapping them', () => {
    expect(() => paramsBytes(l, { n: -1, round: 0, cap: 0 })).toThrow('Params field "n" is u32; -1 does not fit');
    expect(() => paramsBytes(l, { n: 1.5, round: 0, cap: 0 })).toThrow('Params field "n" is u32; 1.5 does not fit');
    expect(() => paramsBytes(l, { n: 2 ** 32, round: 0, cap: 0 })).toThrow('does not fit');
    expect(() => paramsBytes(l, { n: 1, round: 0, cap: true })).toThrow('Params field "cap" is f32, not boolean');
  });

  it("writes into a slot of a larger buffer at the view's offset only", () => {
    const arena = new ArrayBuffer(64);
    packParams(l, { n: 7, round: 1, cap: 1 }, new DataView(arena, 32, 16));
    expect(words(arena)).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 7, 1, f32Bits(1), 0, 0, 0, 0, 0]);
  });
});
