/**
 * Number and text formatting for the page, the PNG export and the Markdown summary. Pure functions:
 * every value that reaches the screen from a report goes through one of these, so NaN, Infinity and
 * non-numbers print as a dash instead of leaking "NaN" or a crafted string into the layout.
 */

/** A finite number, or NaN for anything else (strings, null, objects from a crafted report). */
export function num(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) ? v : NaN;
}

/** A non-negative integer, or NaN. */
export function count(v: unknown): number {
  const n = num(v);
  return Number.isInteger(n) && n >= 0 ? n : NaN;
}

/** A string (cut to `max` characters so a crafted report cannot blow up the layout), or ''. */
export function str(v: unknown, max = 4000): string {
  return typeof v === 'string' ? (v.length > max ? `${v.slice(0, max)}…` : v) : '';
}

const DASH = '—';

import { fmtInt, fmtIntList, fmtTokenId } from '../../util/number-format.ts';

export { fmtInt, fmtTokenId };

/** Bytes in decimal units, as MLX and Finder show checkpoint sizes. */
export function fmtBytes(n: number): string {
  if (!Number.isFinite(n) || n < 0) return DASH;
  if (n < 1000) return `${n} B`;
  const units = ['kB', 'MB', 'GB', 'TB'];
  let v = n / 1000;
  let i = 0;
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return `${v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0)} ${units[i]}`;
}

export function fmtMs(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return DASH;
  if (ms < 1000) return `${ms.toFixed(ms < 10 ? 1 : 0)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  const m = Math.floor(ms / 60_000);
  return `${m} min ${Math.round((ms - m * 60_000) / 1000)} s`;
}

/** Small or large magnitudes (max abs difference, NMSE) in a compact scientific form; exact 0 stays "0". */
export function fmtSci(x: number): string {
  if (!Number.isFinite(x)) return DASH;
  if (x === 0) return '0';
  const a = Math.abs(x);
  if (a >= 1e-3 && a < 1e4) return x.toPrecision(3).replace(/\.?0+$/, '');
  return x.toExponential(2);
}

export function fmtPercent(part: number, whole: number): string {
  if (!Number.isFinite(part) || !Number.isFinite(whole) || whole <= 0) return DASH;
  const p = (100 * part) / whole;
  if (p === 0) return '0%';
  return p < 0.01 ? '<0.01%' : `${p.toFixed(p < 10 ? 2 : 1)}%`;
}

/** First 12 hex digits of a SHA-256 digest; anything that is not hex is dropped (digests end up in file names). */
export function shortDigest(d: unknown): string {
  const hex = str(d, 200)
    .toLowerCase()
    .replace(/[^0-9a-f]/g, '');
  return hex ? hex.slice(0, 12) : DASH;
}

/** "8; 8; 8; 1,056" (number-format.ts: the semicolons keep fmtInt's commas unambiguous). */
export const fmtList = fmtIntList;

/** Parses "8, 8, 8, 1056" (commas or spaces); returns undefined for an empty field, throws on bad input. */
export function parseLengths(text: string): number[] | undefined {
  const t = text.trim();
  if (t === '') return undefined;
  const parts = t.split(/[\s,]+/).filter(Boolean);
  const out = parts.map((p) => Number(p));
  const bad = parts.filter((_, i) => !Number.isInteger(out[i]) || out[i] < 1 || out[i] > 65536);
  if (bad.length)
    throw new Error(
      `Draw lengths must be whole numbers from 1 to 65536, separated by commas (not ${bad.map((b) => JSON.stringify(b)).join(', ')}).`,
    );
  if (out.length > 16) throw new Error('At most 16 draws.');
  return out;
}

/** Parses a prompt of token ids ("2, 105, 2364" or spaces); throws an Error that says what is wrong. */
export function parseTokenIds(text: string, vocab: number, max = 32_768): number[] {
  const parts = text
    .trim()
    .split(/[\s,]+/)
    .filter(Boolean);
  if (!parts.length) throw new Error('Give the prompt as token ids, e.g. 2, 105, 2364.');
  if (parts.length > max) throw new Error(`At most ${max} prompt tokens.`);
  const ids = parts.map((p) => (/^\d+$/.test(p) ? Number(p) : NaN));
  const limit = Number.isFinite(vocab) && vocab > 0 ? vocab : Number.MAX_SAFE_INTEGER;
  const bad = parts.filter((_, i) => !Number.isSafeInteger(ids[i]) || ids[i] >= limit);
  if (bad.length) {
    const shown =
      bad
        .slice(0, 5)
        .map((b) => JSON.stringify(b))
        .join(', ') + (bad.length > 5 ? ', …' : '');
    throw new Error(
      `Token ids must be whole numbers from 0 to ${Number.isFinite(vocab) && vocab > 0 ? vocab - 1 : 'the vocabulary size'} separated by commas (not ${shown}).`,
    );
  }
  return ids;
}

/** "1 position", "3 positions" (the count formatted with fmtInt). */
export function plural(n: number, one: string, many = `${one}s`): string {
  return `${fmtInt(n)} ${n === 1 ? one : many}`;
}
