/**
 * Shared number formatting for the page and the worker's messages: every count, size, length and position reads
 * the same everywhere ("16,384", never "16384" beside it). Token ids are names, not amounts: they print as plain
 * digits, as a prompt of ids is typed ("2, 105, 2364"). Lists of amounts separate their items with semicolons
 * (fmtIntList), so a thousands separator never reads as a list separator.
 */
const DASH = '\u2014';

/** Thousands separators, no locale surprises (the same on every machine and in the PNG). */
export function fmtInt(n: number): string {
  if (!Number.isFinite(n)) return DASH;
  const s = Math.round(Math.abs(n))
    .toString()
    .replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return n < 0 ? `-${s}` : s;
}

/** Amounts in a list: "8; 8; 8; 1,056" (semicolons, as fmtInt's commas are part of a number). */
export function fmtIntList(xs: readonly number[]): string {
  return xs.map(fmtInt).join('; ');
}

/** A token id: plain digits (a name, not an amount; see the top of this file). */
export function fmtTokenId(id: number): string {
  return Number.isInteger(id) && id >= 0 ? String(id) : DASH;
}
