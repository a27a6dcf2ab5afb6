/**
 * Turns an untrusted trace report (kind "trace": a live run, a file, a share link) into a TraceReport
 * whose every field has the promised type and a bounded size, like report-model.ts does for probes; and
 * the pure facts the trace view, its chart, the PNG and the Markdown say about one.
 */
import { REPORT_SCHEMA } from '../../parity/report.ts';
import type { TraceMetrics, TracePosition, TraceReport } from '../../parity/trace.ts';
import { count, num, str } from '../common/format.ts';
import { normalizeProvenance } from '../report/report-model.ts';
import { DECIDED_GAP } from '../../parity/trace-thresholds.ts';
import { type JudgementVerdict, type TraceJudgement, VERDICT_TEXT } from '../../parity/trace-judgement.ts';

/** Re-exported for the views: the one definition lives in src/parity/trace-thresholds.ts. */
export { DECIDED_GAP };

/** Far above a real trace (1,536 prefix + 256 traced, top-5), low enough that a crafted one cannot freeze the page. */
export const TRACE_LIMITS = { positions: 65_536, topK: 32, buckets: 64, strings: 400 } as const;

/** A trace as the page renders it; `linkCompacted` marks one that was shrunk to fit a share link. */
export type TraceView = TraceReport & { linkCompacted?: boolean };

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : {});
const arr = (v: unknown, max: number): unknown[] => (Array.isArray(v) ? v.slice(0, max) : []);

function tops(v: unknown): { id: number; logit: number }[] {
  return arr(v, TRACE_LIMITS.topK).map((t) => {
    const o = obj(t);
    return { id: num(o.id), logit: num(o.logit) };
  });
}

function position(p: Obj): TracePosition {
  return {
    position: num(p.position),
    next: num(p.next),
    chainTop: tops(p.chainTop),
    blockTop: tops(p.blockTop),
    nllChain: num(p.nllChain),
    nllBlock: num(p.nllBlock),
    gap: num(p.gap),
    deltaChosen: num(p.deltaChosen),
    agree: p.agree === true,
    bytesDiffering: num(p.bytesDiffering),
  };
}

function metrics(m: Obj): TraceMetrics {
  const d = obj(m.deltaLogit);
  const ppl = obj(m.perplexity);
  return {
    positions: num(m.positions),
    rowsByteEqual: num(m.rowsByteEqual),
    top1Disagreements: num(m.top1Disagreements),
    decidedPositions: num(m.decidedPositions),
    decidedDisagreements: num(m.decidedDisagreements),
    buckets: arr(m.buckets, TRACE_LIMITS.buckets).map((b) => {
      const o = obj(b);
      return {
        lo: num(o.lo),
        hi: o.hi === null ? null : num(o.hi),
        positions: num(o.positions),
        disagreements: num(o.disagreements),
      };
    }),
    deltaLogit: { p50: num(d.p50), p90: num(d.p90), p99: num(d.p99), max: num(d.max) },
    perplexity: { chain: num(ppl.chain), block: num(ppl.block) },
  };
}

/** A finite number or null (the judgement's percentiles are null where the block arm never lists the choice). */
const numOrNull = (v: unknown): number | null => (v === null ? null : num(v));

/** The report's judgement, typed and bounded (validateReport checked its shape and counts). */
function judgement(j: Obj): TraceJudgement {
  const d = obj(j.delta);
  const ppl = obj(j.perplexity);
  return {
    positions: num(j.positions),
    disagreements: num(j.disagreements),
    decided: num(j.decided),
    decidedDisagreements: num(j.decidedDisagreements),
    buckets: arr(j.buckets, TRACE_LIMITS.buckets).map((b) => {
      const o = obj(b);
      return {
        from: num(o.from),
        to: o.to === null ? null : num(o.to),
        positions: num(o.positions),
        disagreed: num(o.disagreed),
      };
    }),
    // keys "2".."L" and ">L": L is a top-k length, so no more than TRACE_LIMITS.topK of them are real
    ranks: Object.fromEntries(
      Object.entries(obj(j.ranks))
        .slice(0, TRACE_LIMITS.topK + 1)
        .map(([k, v]) => [str(k, 8), num(v)]),
    ),
    delta: { p50: numOrNull(d.p50), p90: numOrNull(d.p90), p99: numOrNull(d.p99), max: numOrNull(d.max) },
    perplexity: { reference: num(ppl.reference), candidate: num(ppl.candidate) },
    verdict: (Object.keys(VERDICT_TEXT).includes(String(j.verdict)) ? j.verdict : 'decided') as JudgementVerdict,
  };
}

/** A deep, typed, bounded copy of a report that validateReport accepted as kind "trace". */
export function normalizeTrace(x: Obj): TraceView {
  const t = obj(x.timings);
  const p = obj(x.provenance);
  return {
    schema: REPORT_SCHEMA,
    kind: 'trace',
    verdict: x.verdict === 'equal' ? 'equal' : 'diverges',
    summary: str(x.summary, TRACE_LIMITS.strings),
    provenance: { ...normalizeProvenance(p), prefix: count(p.prefix), traced: count(p.traced) },
    metrics: metrics(obj(x.metrics)),
    ...(x.judgement === undefined ? {} : { judgement: judgement(obj(x.judgement)) }),
    positions: arr(x.positions, TRACE_LIMITS.positions).map((q) => position(obj(q))),
    timings: { totalMs: num(t.totalMs), prefillMs: num(t.prefillMs), chainMs: num(t.chainMs), blockMs: num(t.blockMs) },
    ...(x.linkCompacted === true ? { linkCompacted: true } : {}),
  };
}

/** What the verdict means for MTP, in one line (the report itself carries only the summary). */
export function traceConsequence(r: TraceReport): string {
  const m = r.metrics;
  if (r.verdict === 'equal')
    return 'every block row equals the chain byte for byte: batched verify is exact on this setup';
  if (m.top1Disagreements === 0)
    return 'rows differ in their bytes, but the top-1 token agrees at every traced position';
  if (!(m.decidedDisagreements > 0))
    return `top-1 differs only where the chain's top-2 gap is under ${DECIDED_GAP.toFixed(1)} (near ties)`;
  return `top-1 differs on ${m.decidedDisagreements} decided position${m.decidedDisagreements === 1 ? '' : 's'} (gap >= ${DECIDED_GAP.toFixed(1)}): more than near-tie rounding`;
}

/** "48 traced positions after a prefix of 40 tokens · K = 4 · policy ring-chronological · f32" */
export function traceSetup(r: TraceReport): string {
  const p = r.provenance;
  const n = Number.isFinite(p.traced) ? p.traced : r.positions.length;
  return `${n} traced positions after a prefix of ${Number.isFinite(p.prefix) ? p.prefix : '—'} tokens · K = ${Number.isFinite(p.block) ? p.block : '—'} · policy ${p.policy} · ${p.precision}`;
}

/** The judgement's verdict in words: the chain is the reference, the block arm the candidate. */
export const JUDGEMENT_TEXT: Record<JudgementVerdict, string> = {
  identical: "the block arm's top-1 is the chain's at every position",
  'undecided-only': `the block arm's top-1 differs only where the chain's top-2 gap is under ${DECIDED_GAP.toFixed(1)}`,
  decided: `the block arm's top-1 differs where the chain's top-2 gap is ${DECIDED_GAP.toFixed(1)} or more`,
};

/** Positions where the block arm's top-1 differs from the chain's. */
export const disagreements = (r: TraceReport): TracePosition[] => r.positions.filter((p) => !p.agree);

/** "[0, 0.5)" or "[10, ∞)" */
export function bucketLabel(b: { lo: number; hi: number | null }): string {
  const f = (x: number) => (Number.isFinite(x) ? String(x) : '—');
  return `[${f(b.lo)}, ${b.hi === null ? '∞' : f(b.hi)})`;
}
