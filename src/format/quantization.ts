import { FormatError } from './errors.ts';
import { normaliseTensorName } from './tensor-names.ts';

/** Affine bit widths MLX produces. 2/4/8 divide 32; 3/5/6 pack contiguously across word boundaries. */
export type AffineBits = 2 | 3 | 4 | 5 | 6 | 8;
const BITS: readonly number[] = [2, 3, 4, 5, 6, 8];

export interface QuantParams {
  groupSize: number;
  bits: AffineBits;
}

/**
 * The `quantization` block of an MLX config.json: defaults plus per-module entries. Entry keys are module paths
 * (e.g. "language_model.model.layers.0.mlp.gate_proj"); a published multimodal folder also has entries for its
 * vision and audio towers, which may be `false` (left unquantized) or of another mode (mxfp4, nvfp4, ...). Entries
 * are read as written and only checked when a module the engine loads asks for its parameters (quantParamsFor):
 * the towers' entries are never looked at, as their tensors are never loaded.
 */
export interface QuantizationConfig {
  mode: 'affine';
  defaults: QuantParams;
  /** Affine entries by key as written; `null` means MLX left that module unquantized (`false`). */
  overrides: ReadonlyMap<string, QuantParams | null>;
  /** Entries this engine cannot use (another mode, malformed), by key: the refusal given if a loaded module has one. */
  refused: ReadonlyMap<string, FormatError>;
  /** Entry keys by the module they name once prefixes are dropped (tensor-names.ts), for quantParamsFor. */
  byModule: ReadonlyMap<string, readonly string[]>;
  /** The config file and where in it the block was found ("quantization", "text_config.quantization", ...). */
  file: string;
  where: string;
}

type Obj = Record<string, unknown>;
const isObj = (x: unknown): x is Obj => typeof x === 'object' && x !== null && !Array.isArray(x);

/** Where MLX's block may be, in the order it is looked for; the first present is the model's. */
const PLACES = [
  ['', 'quantization'],
  ['text_config.', 'quantization'],
  ['', 'quantization_config'],
  ['text_config.', 'quantization_config'],
] as const;

/**
 * The quantization block of a config.json, wherever a published folder has it: `quantization` at the root (what
 * mlx-lm and mlx-vlm write and read, with a copy as `quantization_config` beside it), or inside `text_config`, or
 * only as `quantization_config` (mlx-lm copies a `text_config.quantization_config` to the root when the root has
 * none). Null when there is none. A `quantization_config` of another format (it names a `quant_method`:
 * compressed-tensors, awq, gptq, ...) is refused, naming the file and key.
 */
export function readQuantization(json: Obj, textConfig: Obj | null, file = 'config.json'): QuantizationConfig | null {
  for (const [prefix, key] of PLACES) {
    const holder = prefix === '' ? json : textConfig;
    const raw = holder?.[key];
    if (raw === undefined || raw === null) continue;
    const where = `${prefix}${key}`;
    if (isObj(raw) && raw.quant_method !== undefined && raw.group_size === undefined)
      throw new FormatError(
        `${file}: ${where}.quant_method is ${JSON.stringify(raw.quant_method)}, a quantization format other than MLX's affine "quantization" block; it is not supported`,
        file,
        `${where}.quant_method`,
      );
    return parseQuantization(raw, file, where);
  }
  return null;
}

/** Parses one MLX quantization block (found at `where` in `file`); returns null when absent. */
export function parseQuantization(
  raw: unknown,
  file = 'config.json',
  where = 'quantization',
): QuantizationConfig | null {
  if (raw === undefined || raw === null) return null;
  if (!isObj(raw)) {
    throw new FormatError(`${file}: "${where}" must be an object, found ${JSON.stringify(raw)}`, file, where);
  }
  const mode = raw.mode ?? 'affine';
  // The block's own mode is every loaded module's unless an entry says otherwise: refused at once.
  if (mode === 'mxfp4' || mode === 'nvfp4' || mode === 'mxfp8') {
    throw new FormatError(
      `${file}: ${where} mode "${mode}" is not supported yet (only "affine")`,
      file,
      `${where}.mode`,
    );
  }
  if (mode !== 'affine') {
    throw new FormatError(
      `${file}: unknown ${where} mode ${JSON.stringify(mode)} (expected "affine")`,
      file,
      `${where}.mode`,
    );
  }
  const defaults = parseParams(file, where, raw);
  const overrides = new Map<string, QuantParams | null>();
  const refused = new Map<string, FormatError>();
  const byModule = new Map<string, string[]>();
  for (const [key, value] of Object.entries(raw)) {
    if (key === 'group_size' || key === 'bits' || key === 'mode') continue;
    if (value === false) overrides.set(key, null);
    else if (value === true)
      overrides.set(key, defaults); // mlx-vlm's predicate: quantize with the defaults
    else if (isObj(value)) {
      try {
        overrides.set(key, parseEntry(file, where, key, value));
      } catch (e) {
        if (!(e instanceof FormatError)) throw e;
        refused.set(key, e);
      }
    } else continue; // other scalar keys (quant_method copies and the like) are not module entries
    const module = normaliseTensorName(key);
    byModule.set(module, [...(byModule.get(module) ?? []), key]);
  }
  return { mode: 'affine', defaults, overrides, refused, byModule, file, where };
}

function parseEntry(file: string, where: string, key: string, o: Obj): QuantParams {
  if (o.mode !== undefined && o.mode !== 'affine') {
    throw new FormatError(
      `${file}: ${where} entry "${key}" uses quantization mode ${JSON.stringify(o.mode)}, which is not supported yet (only "affine"); this module is part of the text model`,
      file,
      `${where}.${key}`,
    );
  }
  return parseParams(file, `${where}.${key}`, o);
}

function parseParams(file: string, where: string, o: Obj): QuantParams {
  const g = o.group_size;
  const b = o.bits;
  if (!Number.isSafeInteger(g) || (g as number) <= 0) {
    throw new FormatError(
      `${file}: ${where}.group_size must be a positive integer, found ${JSON.stringify(g)}`,
      file,
      where,
    );
  }
  if (!BITS.includes(b as number)) {
    throw new FormatError(
      `${file}: ${where}.bits must be one of ${BITS.join(', ')}, found ${JSON.stringify(b)}`,
      file,
      where,
    );
  }
  return { groupSize: g as number, bits: b as AffineBits };
}

/**
 * Parameters for one loaded module (its path as written in the weight file, without ".weight"); null = left
 * unquantized. The entry is the one keyed by that path, else the one whose key names the same module under another
 * prefix (mlx-vlm also matches "language_model.X" to an entry "X"; here every prefix tensor-names.ts strips). An
 * entry the engine cannot use is refused here, for the module that needs it, naming the file and key.
 */
export function quantParamsFor(q: QuantizationConfig, modulePath: string): QuantParams | null {
  const key = entryKey(q, modulePath);
  if (key === undefined) return q.defaults;
  const refusal = q.refused.get(key);
  if (refusal) throw refusal;
  return q.overrides.get(key) as QuantParams | null;
}

function entryKey(q: QuantizationConfig, modulePath: string): string | undefined {
  if (q.overrides.has(modulePath) || q.refused.has(modulePath)) return modulePath;
  const keys = q.byModule.get(normaliseTensorName(modulePath)) ?? [];
  if (keys.length > 1)
    throw new FormatError(
      `${q.file}: ${q.where} has entries ${keys.map((k) => `"${k}"`).join(' and ')} for one module ("${modulePath}" in the weights); keep one`,
      q.file,
      `${q.where}.${keys[0]}`,
    );
  return keys[0];
}
