/** Parsing helpers for CLI option values, with messages that name the option. */
export function intOption(
  values: Record<string, unknown>,
  name: string,
  min = 0,
  max = Number.MAX_SAFE_INTEGER,
): number | undefined {
  const v = values[name];
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new Error(`--${name} must be an integer between ${min} and ${max} (got "${String(v)}")`);
  return n;
}

export function intList(values: Record<string, unknown>, name: string): number[] | undefined {
  const v = values[name];
  if (v === undefined) return undefined;
  const parts = String(v)
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);
  const out = parts.map(Number);
  if (!out.length || out.some((n) => !Number.isInteger(n) || n < 0))
    throw new Error(`--${name} must be a comma-separated list of non-negative integers (got "${String(v)}")`);
  return out;
}

export function choice<T extends string>(
  values: Record<string, unknown>,
  name: string,
  allowed: readonly T[],
): T | undefined {
  const v = values[name];
  if (v === undefined) return undefined;
  if (!allowed.includes(v as T)) throw new Error(`--${name} must be one of ${allowed.join(', ')} (got "${String(v)}")`);
  return v as T;
}

export function requireString(values: Record<string, unknown>, name: string): string {
  const v = values[name];
  if (typeof v !== 'string' || !v) throw new Error(`--${name} is required`);
  return v;
}
