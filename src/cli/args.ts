import { statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';

/** Parsing helpers for CLI option values, with messages that name the option. */

/**
 * A decimal integer, optionally signed, and nothing else: Number() alone takes "0x4", "1e1", " 4 " and "" (0), so a
 * typo would run with a value nobody wrote.
 */
const INTEGER = /^-?\d+$/;
/** A decimal integer option's value, or NaN for anything else (the options' own checks then refuse it by name). */
export const parseInteger = (s: string | boolean | undefined): number =>
  typeof s === 'string' && INTEGER.test(s) ? Number(s) : Number.NaN;

export function intOption(
  values: Record<string, unknown>,
  name: string,
  min = 0,
  max = Number.MAX_SAFE_INTEGER,
): number | undefined {
  const v = values[name];
  if (v === undefined) return undefined;
  const n = parseInteger(String(v));
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
  const out = parts.map(parseInteger);
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

/**
 * The path option `name` names for a file the command writes, checked before any work: a run of minutes must not end
 * in "ENOENT" because the folder was mistyped. Refuses a path that is a folder and a folder that does not exist.
 */
export function outputFileOption(values: Record<string, unknown>, name: string): string | undefined {
  const v = values[name];
  if (v === undefined) return undefined;
  const file = String(v);
  if (!file) throw new Error(`--${name} needs a file name`);
  const kind = (p: string) => {
    try {
      return statSync(p).isDirectory() ? 'folder' : 'file';
    } catch {
      return 'none';
    }
  };
  if (kind(file) === 'folder') throw new Error(`--${name} ${file}: is a folder; give the path of the file to write`);
  const dir = path.dirname(path.resolve(file));
  if (kind(dir) !== 'folder') throw new Error(`--${name} ${file}: the folder ${dir} does not exist`);
  return file;
}

/** outputFileOption for a required option. */
export function requireOutputFile(values: Record<string, unknown>, name: string): string {
  requireString(values, name);
  return outputFileOption(values, name)!;
}
