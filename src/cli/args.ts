import { readFile } from 'node:fs/promises';

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

/**
 * The JSON in the file that option `name` names, or undefined without the option; a file that cannot be read or
 * does not hold JSON is refused with the option, the path and the reason (JSON.parse's own message names neither).
 */
export async function jsonFileOption(values: Record<string, unknown>, name: string): Promise<unknown> {
  const v = values[name];
  if (v === undefined) return undefined;
  const file = String(v);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    throw new Error(`--${name} ${file}: cannot read the file (${(e as Error).message})`);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    throw new Error(`--${name} ${file}: not valid JSON (${(e as Error).message})`);
  }
}
