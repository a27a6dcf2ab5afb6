/**
 * How big a share link may get, and what to do past that. A link carries the whole report (deflated,
 * base64url) in its fragment; browsers take megabytes, but chat tools, issue trackers and some browsers'
 * address bars choke well before, so links stop at MAX_LINK_CHARS. A trace past it is compacted (top-k
 * lists cut to what the view shows, numbers rounded to 7 significant digits, marked `linkCompacted`);
 * anything still too large gets no link and the user is told to share the JSON file instead.
 */
import { encodeShareFragment } from './share-codec.ts';
import { fmtInt } from '../../util/number-format.ts';

export const MAX_LINK_CHARS = 64 * 1024;

export type LinkResult = { ok: true; link: string; compacted: boolean } | { ok: false; chars: number; message: string };

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const round = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v !== 0 ? Number(v.toPrecision(7)) : v);

/** A smaller trace for a link: top-2 of the chain's list (top-1 and the gap's runner-up), top-1 of the block's, rounded numbers. */
export function compactTrace(raw: Obj): Obj {
  const positions = Array.isArray(raw.positions) ? raw.positions : [];
  const top = (v: unknown, n: number) =>
    Array.isArray(v) ? v.slice(0, n).map((t) => (isObj(t) ? { id: t.id, logit: round(t.logit) } : t)) : v;
  return {
    ...raw,
    linkCompacted: true,
    positions: positions.map((p) => {
      if (!isObj(p)) return p;
      const out: Obj = { ...p, chainTop: top(p.chainTop, 2), blockTop: top(p.blockTop, 1) };
      for (const k of ['nllChain', 'nllBlock', 'gap', 'deltaChosen']) out[k] = round(p[k]);
      return out;
    }),
  };
}

/** `base` is the page address without a fragment (origin + path). */
export function buildShareLink(raw: unknown, base: string, max = MAX_LINK_CHARS): LinkResult {
  const full = `${base}#${encodeShareFragment(raw)}`;
  if (full.length <= max) return { ok: true, link: full, compacted: false };
  let chars = full.length;
  if (isObj(raw) && raw.kind === 'trace') {
    const small = `${base}#${encodeShareFragment(compactTrace(raw))}`;
    if (small.length <= max) return { ok: true, link: small, compacted: true };
    chars = small.length;
  }
  return {
    ok: false,
    chars,
    message: `This report is too large for a link (${fmtInt(chars)} characters even compressed; links stop at ${fmtInt(max)}). Share the JSON file instead (Download JSON): it opens in this page with "Open a report (JSON)".`,
  };
}
