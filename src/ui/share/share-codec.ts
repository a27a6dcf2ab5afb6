/**
 * Pure encodings of a report for sharing: the URL fragment (`#report=` + base64url of raw DEFLATE of the
 * JSON), a Markdown summary, and file names. The fragment never reaches a server (browsers do not send
 * it), so a shared link carries the report without uploading it anywhere.
 */
import { deflateSync, Inflate, strFromU8, strToU8 } from 'fflate';
import type { ProbeReport, Provenance } from '../../parity/report.ts';
import type { TraceReport } from '../../parity/trace.ts';
import { fmtBytes, fmtInt, fmtList, fmtMs, fmtSci, shortDigest } from '../common/format.ts';
import { bucketLabel, DECIDED_GAP, traceConsequence, traceSetup } from '../trace/trace-model.ts';

export const FRAGMENT_KEY = 'report';
/** A decoded report bigger than this is refused (a deflate bomb in a link must not eat the tab's memory). */
export const MAX_REPORT_BYTES = 32 * 2 ** 20;

export function toBase64Url(bytes: Uint8Array): string {
  let bin = '';
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

export function fromBase64Url(s: string): Uint8Array {
  if (!/^[A-Za-z0-9_-]*$/.test(s))
    throw new Error('the link is damaged: its report part has characters that base64url does not use');
  const b64 = s.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (s.length % 4)) % 4);
  let bin: string;
  try {
    bin = atob(b64);
  } catch {
    throw new Error('the link is damaged: its report part is not valid base64url');
  }
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** `report=<base64url(deflate(JSON))>`, without the leading '#'. */
export function encodeShareFragment(report: unknown): string {
  return `${FRAGMENT_KEY}=${toBase64Url(deflateSync(strToU8(JSON.stringify(report)), { level: 9 }))}`;
}

/** Inflates with a size cap, feeding small input slices so no single step can balloon (deflate tops out near 1032:1). */
function inflateCapped(data: Uint8Array, cap: number): Uint8Array {
  const chunks: Uint8Array[] = [];
  let total = 0;
  const inf = new Inflate((chunk) => {
    total += chunk.length;
    if (total > cap) throw new Error(`the report in the link inflates to more than ${fmtBytes(cap)}; refusing it`);
    chunks.push(chunk);
  });
  const STEP = 4096;
  for (let i = 0; i < data.length; i += STEP) inf.push(data.subarray(i, i + STEP), i + STEP >= data.length);
  if (data.length === 0) inf.push(data, true);
  const out = new Uint8Array(total);
  let o = 0;
  for (const c of chunks) {
    out.set(c, o);
    o += c.length;
  }
  return out;
}

/**
 * Reads the report out of a location hash ("#report=..."); undefined when the hash holds no report.
 * Returns the parsed JSON (untrusted: validate it) or throws an Error that says what is wrong with the link.
 */
export function decodeShareFragment(hash: string): unknown {
  const h = hash.startsWith('#') ? hash.slice(1) : hash;
  const params = new URLSearchParams(h);
  const data = params.get(FRAGMENT_KEY);
  if (data === null) return undefined;
  let bytes: Uint8Array;
  try {
    bytes = inflateCapped(fromBase64Url(data), MAX_REPORT_BYTES);
  } catch (e) {
    const m = (e as Error).message;
    throw new Error(m.startsWith('the ') ? m : `the link is damaged: its report part does not inflate (${m})`);
  }
  try {
    return JSON.parse(strFromU8(bytes));
  } catch (e) {
    throw new Error(`the link is damaged: its report is not JSON (${(e as Error).message})`);
  }
}

/** Escapes what Markdown renderers (GitHub, Slack) would read as markup or HTML in report strings. */
export function mdEscape(s: string): string {
  return s.replace(/[\\`*_[\]<>|#!~]/g, (c) => `\\${c}`).replace(/\r?\n/g, ' ');
}

/** A Markdown summary for an issue or chat: verdict, draws, first divergence, provenance. */
/** The failed exactness self-test's warning, first under the heading (nothing when it passed or did not run). */
function selfTestWarning(p: Provenance): string[] {
  const w = p.exactnessSelfTest?.warning;
  return w ? [`> **Warning:** ${mdEscape(w)}`, ''] : [];
}

export function reportMarkdown(r: ProbeReport, link?: string): string {
  const p = r.provenance;
  const fd = r.draws.find((d) => d.firstDivergence)?.firstDivergence;
  const adapter =
    [p.adapter.vendor, p.adapter.architecture, p.adapter.description].filter(Boolean).join(' ') || 'unknown adapter';
  const lines = [
    `### Ringside block-versus-chain probe: **${r.verdict === 'equal' ? 'EQUAL' : 'DIVERGES'}**`,
    '',
    ...selfTestWarning(p),
    mdEscape(r.summary),
    '',
    `_${mdEscape(r.consequence)}_`,
    '',
    ...r.draws.map((d) => `- draw ${fmtInt(d.index)} (prompt ${fmtInt(d.promptLength)} tokens): ${mdEscape(d.text)}`),
    ...(fd ? ['', `**${mdEscape(fd.text)}**`] : []),
    '',
    '| policy | precision | K | draw lengths | adapter | platform | target | assistant | total |',
    '|---|---|---|---|---|---|---|---|---|',
    `| ${mdEscape(p.policy)} | ${p.precision} | ${fmtInt(p.block)} | ${fmtList(p.drawLengths)} | ${mdEscape(adapter)} | ${mdEscape(p.platform)} | ` +
      `${mdEscape(p.target.modelType)} \`${shortDigest(p.target.digest)}\` | ${p.assistant ? `${mdEscape(p.assistant.modelType)} \`${shortDigest(p.assistant.digest)}\`` : '—'} | ${fmtMs(r.timings.totalMs)} |`,
  ];
  if (link) lines.push('', `[Open the full report](${link})`);
  return `${lines.join('\n')}\n`;
}

const safe = (s: string) =>
  s
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '')
    .slice(0, 40) || 'x';
const whole = (n: number) => (Number.isFinite(n) ? Math.round(n) : 0);

/** "ringside-diverges-ring-chronological-K4-1a2b3c4d5e6f" (only safe characters). */
export function reportFileStem(r: ProbeReport): string {
  return `ringside-${r.verdict}-${safe(r.provenance.policy)}-${r.provenance.precision}-K${whole(r.provenance.block)}-${shortDigest(r.provenance.target.digest).replace('—', 'nodigest')}`;
}

/** "ringside-trace-diverges-ring-chronological-f32-K4-P40-T48-1a2b3c4d5e6f" */
export function traceFileStem(r: TraceReport): string {
  const p = r.provenance;
  return `ringside-trace-${r.verdict}-${safe(p.policy)}-${p.precision}-K${whole(p.block)}-P${whole(p.prefix)}-T${whole(p.traced)}-${shortDigest(p.target.digest).replace('—', 'nodigest')}`;
}

/** A Markdown summary of a trace: verdict, the disagreement metrics, |delta logit| and perplexities, provenance. */
export function traceMarkdown(r: TraceReport, link?: string): string {
  const p = r.provenance;
  const m = r.metrics;
  const d = m.deltaLogit;
  const adapter =
    [p.adapter.vendor, p.adapter.architecture, p.adapter.description].filter(Boolean).join(' ') || 'unknown adapter';
  const lines = [
    `### Ringside teacher-forced trace: **${r.verdict === 'equal' ? 'EQUAL' : 'DIVERGES'}**`,
    '',
    ...selfTestWarning(p),
    mdEscape(r.summary),
    '',
    `_${mdEscape(traceConsequence(r))}_`,
    '',
    `- ${mdEscape(traceSetup(r))}`,
    `- rows byte-equal: ${fmtInt(m.rowsByteEqual)} of ${fmtInt(m.positions)}`,
    `- top-1 disagreements: ${fmtInt(m.top1Disagreements)} of ${fmtInt(m.positions)}; on decided positions (gap >= ${DECIDED_GAP.toFixed(1)}): ${fmtInt(m.decidedDisagreements)} of ${fmtInt(m.decidedPositions)}`,
    `- |delta logit| of the chain's top-1: p50 ${fmtSci(d.p50)}, p90 ${fmtSci(d.p90)}, p99 ${fmtSci(d.p99)}, max ${fmtSci(d.max)}`,
    `- perplexity: chain ${fmtSci(m.perplexity.chain)}, block ${fmtSci(m.perplexity.block)}`,
    '',
    '| chain gap | positions | disagreements |',
    '|---|---|---|',
    ...m.buckets.map((b) => `| ${bucketLabel(b)} | ${fmtInt(b.positions)} | ${fmtInt(b.disagreements)} |`),
    '',
    '| policy | precision | K | prefix | traced | adapter | platform | target | total |',
    '|---|---|---|---|---|---|---|---|---|',
    `| ${mdEscape(p.policy)} | ${p.precision} | ${fmtInt(p.block)} | ${fmtInt(p.prefix)} | ${fmtInt(p.traced)} | ${mdEscape(adapter)} | ${mdEscape(p.platform)} | ` +
      `${mdEscape(p.target.modelType)} \`${shortDigest(p.target.digest)}\` | ${fmtMs(r.timings.totalMs)} |`,
  ];
  if (link) lines.push('', `[Open the full trace](${link})`);
  return `${lines.join('\n')}\n`;
}
