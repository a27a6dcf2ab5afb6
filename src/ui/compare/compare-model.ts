/**
 * Two runs side by side, without a DOM: two traces (mlxcel logit-trace TSVs or Ringside trace reports, in any mix)
 * judged as `compare-traces` judges them (src/parity/trace-judgement.ts: the verdict, disagreements overall and on
 * decided positions, gap buckets, ranks, |delta logit|, perplexities) with a strip of every position; or two probe
 * reports, their draws, first divergences and provenance row by row with what differs marked. The inputs are kept
 * as they came (a TSV's text, a report's JSON): a comparison document carries them, so a file or a link of it
 * opens the same comparison again, computed afresh.
 */
import { metaValue, parseLogitTraceTsv } from '../../format/logit-trace-tsv.ts';
import type { DrawResult, ProbeReport, Provenance } from '../../parity/report.ts';
import { readTraceText, type ReadTrace, type TraceArm } from '../../parity/trace-files.ts';
import { judgeTraces, type TraceJudgement } from '../../parity/trace-judgement.ts';
import { DECIDED_GAP } from '../../parity/trace-thresholds.ts';
import { fmtBytes, fmtInt, fmtList, shortDigest } from '../common/format.ts';
import { readAnyReport } from '../report/read-report.ts';
import { buildHeatmap, type HeatGrid } from '../report/heatmap-model.ts';
import { defaultDetailDraw } from '../report/report-model.ts';
import { commitText, selfTestOutcome } from '../report/provenance-view.ts';

export const COMPARISON_SCHEMA = 'ringside-comparison/1';

/** One side as it came: a logit-trace TSV's text, or a Ringside report's JSON (a trace or a probe). */
export type CompareSource = { name: string; tsv: string } | { name: string; report: unknown };

/** The two sides and how to read them: which arm of a trace report each side is, and the decided gap. */
export interface CompareInput {
  a: CompareSource;
  b: CompareSource;
  /** For trace reports: A's arm (the reference) and B's (the candidate); compare-traces' defaults, chain and block. */
  arms?: { a: TraceArm; b: TraceArm };
  decidedGap?: number;
}

/** A name and value of one side, and whether the other side's value differs. */
export interface FactRow {
  label: string;
  a: string;
  b: string;
  differs: boolean;
}

/** One traced position of the strip: the reference's top-1 kept by the candidate or not, decided or not. */
export interface StripCell {
  agree: boolean;
  decided: boolean;
}

export interface TraceComparison {
  kind: 'traces';
  decidedGap: number;
  arms: { a: TraceArm; b: TraceArm };
  a: ReadTrace;
  b: ReadTrace;
  judgement: TraceJudgement;
  strip: StripCell[];
  facts: FactRow[];
}

/** Draw i of both reports (by index), and whether their verdicts or first divergences differ. */
export interface DrawPair {
  index: number;
  a?: DrawResult;
  b?: DrawResult;
  differs: boolean;
}

export interface ProbeComparison {
  kind: 'probes';
  a: { name: string; report: ProbeReport };
  b: { name: string; report: ProbeReport };
  /** One line on top: both verdicts, and where they part. */
  headline: string;
  same: boolean;
  draws: DrawPair[];
  facts: FactRow[];
}

export type Comparison = TraceComparison | ProbeComparison;

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** What a source holds, by its content: a TSV, a trace report, a probe report, or something else (named). */
export function sourceKind(s: CompareSource): 'tsv' | 'trace' | 'probe' | 'other' {
  if ('tsv' in s) return 'tsv';
  const k = isObj(s.report) ? s.report.kind : undefined;
  return k === 'trace' ? 'trace' : k === 'probe' ? 'probe' : 'other';
}

/** A side's words for messages: "A (probe.json)". */
const side = (which: 'A' | 'B', s: CompareSource) => `${which} (${s.name})`;

/**
 * The comparison of two sources; throws an Error that says what cannot be compared (two kinds, a malformed file,
 * traces of different streams: the judgement's own refusal, naming the first index where they part).
 */
export function compare(input: CompareInput): Comparison {
  const ka = sourceKind(input.a);
  const kb = sourceKind(input.b);
  for (const [w, s, k] of [
    ['A', input.a, ka],
    ['B', input.b, kb],
  ] as const)
    if (k === 'other')
      throw new Error(
        `${side(w, s)} is neither a logit-trace TSV nor a Ringside probe or trace report (a generation run cannot be compared here)`,
      );
  const trace = (k: string) => k === 'tsv' || k === 'trace';
  if (trace(ka) && trace(kb)) return compareTraces(input);
  if (ka === 'probe' && kb === 'probe') return compareProbes(input);
  const what = (k: string) => (k === 'probe' ? 'a probe report' : k === 'tsv' ? 'a logit-trace TSV' : 'a trace report');
  throw new Error(
    `${side('A', input.a)} is ${what(ka)} and ${side('B', input.b)} ${what(kb)}: compare two probe reports, or two traces (logit-trace TSVs or trace reports)`,
  );
}

function readSide(s: CompareSource, arm: TraceArm): ReadTrace {
  return readTraceText('tsv' in s ? s.tsv : JSON.stringify(s.report), s.name, arm);
}

/** The facts of one trace side: a TSV's metadata lines, or a trace report's provenance, as label -> value. */
function traceFacts(s: CompareSource, arm: TraceArm): Map<string, string> {
  const m = new Map<string, string>();
  if ('tsv' in s) {
    const t = parseLogitTraceTsv(s.tsv, s.name);
    m.set('file', 'logit-trace TSV');
    for (const { key, values } of t.meta) if (key !== 'columns') m.set(key, values.join(' '));
    m.set('positions', fmtInt(t.rows.length));
    if (metaValue(t, 'arm') === undefined) m.set('arm', 'one arm (a TSV holds one)');
    return m;
  }
  const r = s.report as { provenance: Provenance & { prefix: number; traced: number }; positions: unknown[] };
  const p = r.provenance;
  m.set('file', 'Ringside trace report');
  m.set('model', p.target.label);
  m.set('checkpoint', `${p.target.modelType} · digest ${shortDigest(p.target.digest)}`);
  m.set('arm', arm);
  m.set('policy', p.policy);
  m.set('precision', p.precision);
  m.set('K', fmtInt(p.block));
  m.set('prefix', fmtInt(p.prefix));
  m.set('positions', fmtInt(r.positions.length));
  // a trace has no draws: its prefix and positions stand in their place
  for (const [k, v] of provenanceFacts(p)) if (!m.has(k) && k !== 'draw lengths') m.set(k, v);
  return m;
}

/** Rows of two label -> value maps, in A's order then B's new labels; a value missing on one side reads "—". */
function factRows(a: Map<string, string>, b: Map<string, string>, unmarked: readonly string[] = []): FactRow[] {
  const labels = [...a.keys(), ...[...b.keys()].filter((k) => !a.has(k))];
  return labels.map((label) => {
    const va = a.get(label) ?? '—';
    const vb = b.get(label) ?? '—';
    return { label, a: va, b: vb, differs: va !== vb && !unmarked.includes(label) };
  });
}

function compareTraces(input: CompareInput): TraceComparison {
  const decidedGap = input.decidedGap ?? DECIDED_GAP;
  const arms = input.arms ?? { a: 'chain', b: 'block' };
  const a = readSide(input.a, arms.a);
  const b = readSide(input.b, arms.b);
  const judgement = judgeTraces(a.rows, b.rows, { decidedGap, names: { reference: a.name, candidate: b.name } });
  // judgeTraces accepted them: same length, every row with a top-2 on the reference side
  const strip = a.rows.map((r, i) => ({
    agree: b.rows[i].ids[0] === r.ids[0],
    decided: r.logits[0] - r.logits[1] >= decidedGap,
  }));
  return {
    kind: 'traces',
    decidedGap,
    arms,
    a,
    b,
    judgement,
    strip,
    facts: factRows(traceFacts(input.a, arms.a), traceFacts(input.b, arms.b), ['app', 'created']),
  };
}

/** The provenance of a report as label -> value: what a comparison lines up. */
export function provenanceFacts(p: Provenance): Map<string, string> {
  const a = p.adapter;
  const c = p.compiler;
  return new Map([
    ['adapter', [a.vendor, a.architecture, a.description].filter(Boolean).join(' · ') || 'unknown'],
    ['browser', c ? `${c.browser} on ${c.os}` : 'not recorded'],
    ['compiler', c ? `${c.engine} → ${c.backend}, ${c.math}` : 'not recorded'],
    ['platform', p.platform],
    ['policy', p.policy],
    ['precision', p.precision],
    ['K', fmtInt(p.block)],
    ['draw lengths', fmtList(p.drawLengths)],
    ['prefill chunk', fmtInt(p.prefillChunk)],
    [
      'target',
      `${p.target.label} · ${p.target.modelType} · ${fmtBytes(p.target.bytes)} · digest ${shortDigest(p.target.digest)}`,
    ],
    ['assistant', p.assistant ? `${p.assistant.label} · digest ${shortDigest(p.assistant.digest)}` : '—'],
    ['ringside', p.app.version],
    ['commit', commitText(p)],
    ['self-test', p.selfTest ? selfTestOutcome(p.selfTest) : 'none ran before the report'],
    [
      'exactness self-test',
      p.exactnessSelfTest
        ? p.exactnessSelfTest.ok
          ? `passed: ${fmtInt(p.exactnessSelfTest.checks)} verify blocks (${p.exactnessSelfTest.kernelClasses.join(', ')})`
          : `FAILED in ${p.exactnessSelfTest.kernel ?? 'no single kernel'}`
        : 'not recorded',
    ],
    ['created', p.createdAt],
  ]);
}

function readProbe(s: CompareSource, which: 'A' | 'B'): ProbeReport {
  const r = readAnyReport('report' in s ? s.report : undefined);
  if (!r.ok) throw new Error(`${side(which, s)} is not a valid report: ${r.problems.slice(0, 3).join('; ')}`);
  if (r.kind !== 'probe') throw new Error(`${side(which, s)} is a ${r.kind} report, not a probe report`);
  return r.report;
}

/** A draw's outcome in a few words, for telling two apart: "equal", or its divergence and where it was localized. */
const drawOutcome = (d: DrawResult | undefined) =>
  !d
    ? 'absent'
    : d.verdict === 'equal'
      ? 'equal'
      : `${d.text}${d.firstDivergence ? `; ${d.firstDivergence.text}` : ''}`;

function compareProbes(input: CompareInput): ProbeComparison {
  const ra = readProbe(input.a, 'A');
  const rb = readProbe(input.b, 'B');
  const n = Math.max(ra.draws.length, rb.draws.length);
  const draws: DrawPair[] = Array.from({ length: n }, (_, i) => {
    const a = ra.draws[i];
    const b = rb.draws[i];
    return { index: a?.index ?? b?.index ?? i, a, b, differs: drawOutcome(a) !== drawOutcome(b) };
  });
  const parted = draws.filter((d) => d.differs);
  const verdicts = `A ${ra.verdict.toUpperCase()}, B ${rb.verdict.toUpperCase()}`;
  const headline =
    parted.length === 0
      ? `${verdicts}: every draw has the same outcome in both`
      : `${verdicts}: ${parted.length} of ${n} draw${n === 1 ? '' : 's'} part (draw${parted.length === 1 ? '' : 's'} ${parted.map((d) => d.index).join(', ')})`;
  return {
    kind: 'probes',
    a: { name: input.a.name, report: ra },
    b: { name: input.b.name, report: rb },
    headline,
    same: parted.length === 0,
    draws,
    facts: factRows(provenanceFacts(ra.provenance), provenanceFacts(rb.provenance), ['created']),
  };
}

/** The comparison as a document: its inputs (so it opens again anywhere) and, for traces, the judgement's JSON. */
export function comparisonDocument(input: CompareInput, c: Comparison, createdAt: string): Obj {
  return {
    schema: COMPARISON_SCHEMA,
    kind: c.kind,
    createdAt,
    ...(c.kind === 'traces' ? { arms: c.arms, decidedGap: c.decidedGap, judgement: c.judgement } : {}),
    a: input.a,
    b: input.b,
  };
}

export function isComparisonDocument(x: unknown): boolean {
  return isObj(x) && x.schema === COMPARISON_SCHEMA;
}

/**
 * A comparison document read back: its inputs, to compare afresh (the judgement it carries is for readers of the
 * file; the page computes its own). Throws an Error naming what is wrong.
 */
export function readComparisonDocument(x: unknown): CompareInput {
  if (!isObj(x) || x.schema !== COMPARISON_SCHEMA) throw new Error(`schema must be "${COMPARISON_SCHEMA}"`);
  const src = (v: unknown, which: 'a' | 'b'): CompareSource => {
    if (!isObj(v) || typeof v.name !== 'string') throw new Error(`${which} must be {name, tsv} or {name, report}`);
    if (typeof v.tsv === 'string') return { name: v.name.slice(0, 200), tsv: v.tsv };
    if (v.report !== undefined) return { name: v.name.slice(0, 200), report: v.report };
    throw new Error(`${which} must hold a TSV's text (tsv) or a report (report)`);
  };
  const arm = (v: unknown, which: string): TraceArm => {
    if (v !== 'chain' && v !== 'block') throw new Error(`arms.${which} must be "chain" or "block"`);
    return v;
  };
  const arms = isObj(x.arms) ? { a: arm(x.arms.a, 'a'), b: arm(x.arms.b, 'b') } : undefined;
  const gap = x.decidedGap;
  if (gap !== undefined && !(typeof gap === 'number' && Number.isFinite(gap) && gap >= 0))
    throw new Error('decidedGap must be a number >= 0');
  return {
    a: src(x.a, 'a'),
    b: src(x.b, 'b'),
    ...(arms ? { arms } : {}),
    ...(gap !== undefined ? { decidedGap: gap } : {}),
  };
}

/**
 * The heatmap a probe report's own view opens on (its first diverging draw with captures, every position, bytes
 * differing), with that draw; undefined when the report localized nothing.
 */
export function reportHeatmap(r: ProbeReport): { draw: DrawResult; grid: HeatGrid } | undefined {
  const draw = r.draws[defaultDetailDraw(r)];
  if (!draw?.stages?.length) return undefined;
  const grid = buildHeatmap(draw.stages, 'all', 'bytes', draw.firstDivergence);
  return grid.cells.length ? { draw, grid } : undefined;
}

/** The words of a trace judgement's verdict, for the headline: "identical", "differs only where undecided", ... */
export const VERDICT_WORDS = {
  identical: 'identical',
  'undecided-only': 'differs only where undecided',
  decided: 'differs on decided positions',
} as const;
