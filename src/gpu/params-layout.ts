/**
 * The uniform parameter block of each kernel, defined once: by the `struct Params { ... }` of its WGSL
 * file (includes expanded, src/gpu/shaders.ts). TypeScript packs a block by field name through the
 * layout parsed from that struct (Recorder.params), so the order, the count and the u32 / f32 type of
 * every field come from the shader, never from a positional array kept in step by hand.
 *
 * Supported: scalar fields of type u32, i32 or f32 (4 bytes each, packed in declaration order with no
 * padding: WGSL's layout for a struct of scalars). Fields whose names start with `_` are padding: they
 * may be left out and are written as 0.
 */
import { shaderSource } from './shaders.ts';

export type ParamType = 'u32' | 'i32' | 'f32';

export interface ParamsField {
  name: string;
  type: ParamType;
  /** Byte offset in the block. */
  offset: number;
}

export interface ParamsLayout {
  /** Where the struct comes from (for error messages). */
  source: string;
  fields: readonly ParamsField[];
  /** Bytes of the struct (4 per field). */
  size: number;
  /** "name: type, ..." of every field: equal for shaders that share one struct (matmul_affine_io.wgsl's). */
  signature: string;
}

/** Values of a block by field name; u32 fields also take booleans (1 / 0). Padding fields (`_...`) may be omitted. */
export type ParamValues = Readonly<Record<string, number | boolean>>;

const SCALARS: ReadonlySet<string> = new Set(['u32', 'i32', 'f32']);

/** Parses the one `struct Params { ... }` of a WGSL text. */
export function parseParamsStruct(wgsl: string, source = 'WGSL'): ParamsLayout {
  const text = wgsl.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/[^\n]*/g, '');
  const found = [...text.matchAll(/\bstruct\s+Params\s*\{([^}]*)\}/g)];
  if (found.length !== 1) throw new Error(`${source}: expected one "struct Params { ... }", found ${found.length}`);
  const fields: ParamsField[] = [];
  for (const decl of found[0][1].split(',')) {
    const d = decl.trim();
    if (d === '') continue;
    const m = /^([A-Za-z_][A-Za-z0-9_]*)\s*:\s*([A-Za-z0-9_<>]+)$/.exec(d);
    if (!m)
      throw new Error(
        `${source}: cannot read the Params field "${d}" (only "name: u32 | i32 | f32" fields are supported)`,
      );
    const [, name, type] = m;
    if (!SCALARS.has(type))
      throw new Error(`${source}: Params field "${name}" has type ${type}; only u32, i32 and f32 are supported`);
    if (fields.some((f) => f.name === name)) throw new Error(`${source}: Params field "${name}" is declared twice`);
    fields.push({ name, type: type as ParamType, offset: fields.length * 4 });
  }
  return { source, fields, size: fields.length * 4, signature: fields.map((f) => `${f.name}: ${f.type}`).join(', ') };
}

const layouts = new Map<string, ParamsLayout>();

/** The Params layout of a shader file (parsed once, with its includes: matmul_lanes.wgsl's comes from matmul_affine_io.wgsl). */
export function paramsLayout(shader: string): ParamsLayout {
  let l = layouts.get(shader);
  if (!l) {
    l = parseParamsStruct(shaderSource(shader), shader);
    layouts.set(shader, l);
  }
  return l;
}

/**
 * Writes `values` into `view` (little-endian, from byte `at` of the view) by the layout's field names. Throws for
 * a field the struct has and `values` lacks (padding excepted), for a name the struct does not have,
 * and for a value its field cannot hold (a u32 that is not an integer in 0 .. 2^32 - 1, an i32 outside
 * its range, a boolean for an f32).
 */
export function packParams(layout: ParamsLayout, values: ParamValues, view: DataView, at = 0): void {
  let given = 0;
  for (const f of layout.fields) {
    const v = values[f.name];
    if (v === undefined) {
      if (f.name.startsWith('_')) {
        view.setUint32(at + f.offset, 0, true);
        continue;
      }
      throw new Error(`${layout.source}: Params field "${f.name}" (${f.type}) is missing`);
    }
    given++;
    if (f.type === 'f32') {
      if (typeof v !== 'number') throw new Error(`${layout.source}: Params field "${f.name}" is f32, not ${typeof v}`);
      view.setFloat32(at + f.offset, v, true);
      continue;
    }
    const n = typeof v === 'boolean' ? (v ? 1 : 0) : v;
    const ok =
      Number.isInteger(n) && (f.type === 'u32' ? n >= 0 && n <= 0xffffffff : n >= -0x80000000 && n <= 0x7fffffff);
    if (!ok) throw new Error(`${layout.source}: Params field "${f.name}" is ${f.type}; ${v} does not fit`);
    if (f.type === 'u32') view.setUint32(at + f.offset, n, true);
    else view.setInt32(at + f.offset, n, true);
  }
  // Counted without Object.keys: this runs for every dispatch of every step, and an array per call is
  // work for the garbage collector on the path that bounds classic decode (Recorder.params).
  let count = 0;
  for (const _ in values) count++;
  if (count !== given) {
    const keys = Object.keys(values);
    const unknown = keys.filter((k) => values[k] !== undefined && !layout.fields.some((f) => f.name === k));
    if (unknown.length)
      throw new Error(
        `${layout.source}: Params has no field ${unknown.map((k) => `"${k}"`).join(', ')} (fields: ${layout.fields.map((f) => f.name).join(', ')})`,
      );
  }
}

/** The bytes of one block: the struct's size rounded up to 16 (at least 16), as bound. */
export function paramsBytes(layout: ParamsLayout, values: ParamValues): ArrayBuffer {
  const data = new ArrayBuffer(boundSize(layout));
  packParams(layout, values, new DataView(data));
  return data;
}

/** Bytes a block's binding covers: the struct's size rounded up to 16, at least 16. */
export function boundSize(layout: ParamsLayout): number {
  return Math.max(16, Math.ceil(layout.size / 16) * 16);
}
