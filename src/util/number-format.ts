/** Shared number formatting for the page and the worker's messages. */
const DASH = '\u2014';

/** Thousands separators, no locale surprises (the same on every machine and in the PNG). */
export function fmtInt(n: number): string {
  if (!Number.isFinite(n)) return DASH;
  const s = Math.round(Math.abs(n))
    .toString()
    .replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return n < 0 ? `-${s}` : s;
}
