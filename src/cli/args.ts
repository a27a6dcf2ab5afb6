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

/** The value as typed, for a message: long values (a list of thousands of token ids) cut to keep the message one line. */
export function shown(v: unknown): string {
  const s = String(v);
  return JSON.stringify(s.length > 48 ? `${s.slice(0, 45)}...` : s);
}

/**
 * An integer option between `min` and `max` (both required: every numeric option states its range, src/cli/bounds.ts
 * has the shared ones), or undefined without the option. A value outside is refused naming the option and the range.
 */
export function intOption(values: Record<string, unknown>, name: string, min: number, max: number): number | undefined {
  const v = values[name];
  if (v === undefined) return undefined;
  const n = parseInteger(String(v));
  if (!Number.isSafeInteger(n) || n < min || n > max)
    throw new Error(`--${name} must be an integer between ${min} and ${max} (got ${shown(v)})`);
  return n;
}

/** The bounds of a list option: each item's range and the most items. */
export interface ListBounds {
  min: number;
  max: number;
  count: number;
}

/** A comma-separated list of integers, each within `b`, at most `b.count` of them; undefined without the option. */
export function intList(values: Record<string, unknown>, name: string, b: ListBounds): number[] | undefined {
  const v = values[name];
  if (v === undefined) return undefined;
  const parts = String(v)
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);
  if (parts.length > b.count) throw new Error(`--${name} lists ${parts.length} values, more than ${b.count}`);
  const out = parts.map(parseInteger);
  if (!out.length || out.some((n) => !Number.isSafeInteger(n) || n < b.min || n > b.max))
    throw new Error(
      `--${name} must be a comma-separated list of integers between ${b.min} and ${b.max} (got ${shown(v)})`,
    );
  return out;
}

/**
 * A decimal number option in (0, max] (sizes in GB, seconds), or undefined without the option. Number() alone takes
 * "0x10", "1e3" and "" (0), so the value must be digits with one optional point.
 */
export function positiveNumberOption(values: Record<string, unknown>, name: string, max: number): number | undefined {
  const v = values[name];
  if (v === undefined) return undefined;
  const n = typeof v === 'string' && /^(\d+\.?\d*|\.\d+)$/.test(v) ? Number(v) : Number.NaN;
  if (!(n > 0 && n <= max)) throw new Error(`--${name} must be a number above 0 and at most ${max} (got ${shown(v)})`);
  return n;
}

export function choice<T extends string>(
  values: Record<string, unknown>,
  name: string,
  allowed: readonly T[],
): T | undefined {
  const v = values[name];
  if (v === undefined) return undefined;
  if (!allowed.includes(v as T)) throw new Error(`--${name} must be one of ${allowed.join(', ')} (got ${shown(v)})`);
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
