import { FormatError } from './errors.ts';

/** Affine bit widths MLX produces. 2/4/8 divide 32; 3/5/6 pack contiguously across word boundaries. */
export type AffineBits = 2 | 3 | 4 | 5 | 6 | 8;
const BITS: readonly number[] = [2, 3, 4, 5, 6, 8];

export interface QuantParams {
  groupSize: number;
  bits: AffineBits;
}

/**
 * The `quantization` block of an MLX config.json: defaults plus per-module overrides. Override keys are the
 * module path exactly as written in the checkpoint (e.g. "language_model.model.layers.0.mlp.gate_proj").
 */
export interface QuantizationConfig {
  mode: 'affine';
  defaults: QuantParams;
  /** Per-module parameters; `null` means MLX left that module unquantized. */
  overrides: ReadonlyMap<string, QuantParams | null>;
}

/** Parses config.json's `quantization` (or `quantization_config`); returns null when absent. */
export function parseQuantization(raw: unknown, file = 'config.json'): QuantizationConfig | null {
  if (raw === undefined || raw === null) return null;
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    throw new FormatError(
      `${file}: "quantization" must be an object, found ${JSON.stringify(raw)}`,
      file,
      'quantization',
    );
  }
  const q = raw as Record<string, unknown>;
  const mode = q.mode ?? 'affine';
  if (mode === 'mxfp4' || mode === 'nvfp4' || mode === 'mxfp8') {
    throw new FormatError(
      `${file}: quantization mode "${mode}" is not supported yet (only "affine")`,
      file,
      'quantization.mode',
    );
  }
  if (mode !== 'affine') {
    throw new FormatError(
      `${file}: unknown quantization mode ${JSON.stringify(mode)} (expected "affine")`,
      file,
      'quantization.mode',
    );
  }
  const defaults = parseParams(file, 'quantization', q);
  const overrides = new Map<string, QuantParams | null>();
  for (const [key, value] of Object.entries(q)) {
    if (key === 'group_size' || key === 'bits' || key === 'mode') continue;
    if (value === false) {
      overrides.set(key, null);
      continue;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) continue; // unrelated scalar keys
    const o = value as Record<string, unknown>;
    if (o.mode !== undefined && o.mode !== 'affine') {
      throw new FormatError(
        `${file}: module "${key}" uses quantization mode ${JSON.stringify(o.mode)}, which is not supported yet (only "affine")`,
        file,
        `quantization.${key}`,
      );
    }
    overrides.set(key, parseParams(file, `quantization.${key}`, o));
  }
  return { mode: 'affine', defaults, overrides };
}

function parseParams(file: string, where: string, o: Record<string, unknown>): QuantParams {
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

/** Parameters for one module (by its checkpoint path, without ".weight"). */
export function quantParamsFor(q: QuantizationConfig, modulePath: string): QuantParams | null {
  const o = q.overrides.get(modulePath);
  return o === undefined ? q.defaults : o;
}
