/**
 * The judgement of two teacher-forced traces of the same token stream (mlxcel's `compare_logit_traces.py` reads its
 * `examples/logit_trace` TSVs this way; MODEL.md section 8): a reference and a candidate, each a list of rows with
 * the stream's next token, its nll and the row's top logits by descending logit. Pure: no engine, no files, so the
 * CLI, the trace report and the page share it. Arithmetic in double precision throughout.
 */
import { DECIDED_GAP, GAP_BUCKETS } from './trace-thresholds.ts';

/** One traced position of one trace: what the judgement reads. */
export interface TraceRow {
  /** The stream's token this row predicts (the corpus token: both traces must have the same at every index). */
  target: number;
  /** -log_softmax(row)[target], positive. */
  nll: number;
  /** Token ids of the row's top logits, by logit descending. */
  ids: readonly number[];
  /** Their logits, in the same order. */
  logits: readonly number[];
}

export type JudgementVerdict = 'identical' | 'undecided-only' | 'decided';

/** The judgement's JSON (`compare-traces --json`, and a trace report's `judgement` field). */
export interface TraceJudgement {
  positions: number;
  /** Positions where the candidate's top-1 is not the reference's. */
  disagreements: number;
  /** Positions where the reference's top-1 leads its top-2 by at least the decided gap. */
  decided: number;
  decidedDisagreements: number;
  /** [from, to) by the reference's top-1 - top-2 gap; `to` null for infinity. All six, in order. */
  buckets: { from: number; to: number | null; positions: number; disagreed: number }[];
  /**
   * Where each disagreement put the reference's top-1 in the candidate's list: "2" .. "L" (L the candidate's list
   * length), and ">L" when the candidate does not list it. Every key, zeros included.
   */
  ranks: Record<string, number>;
  /**
   * |reference logit - candidate logit| of the reference's top-1, over the positions where the candidate lists it:
   * element min(floor(p n), n - 1) of the sorted list. Null when the candidate lists it nowhere.
   */
  delta: { p50: number | null; p90: number | null; p99: number | null; max: number | null };
  /** exp(mean nll) of each trace. */
  perplexity: { reference: number; candidate: number };
  /**
   * identical: no disagreement; undecided-only: every disagreement is on a position the reference had not decided
   * (the rounding class); decided: some disagreement is on a decided position.
   */
  verdict: JudgementVerdict;
}

/** Two traces that cannot be judged together: different lengths, or a different corpus token at some index. */
export class TraceMismatchError extends Error {
  constructor(
    message: string,
    /** The first index where the traces part. */
    readonly index: number,
  ) {
    super(message);
    this.name = 'TraceMismatchError';
  }
}

/** Names of the two traces for messages ("chain.tsv", "block arm of report.json"). */
export interface TraceNames {
  reference: string;
  candidate: string;
}

/** The verdict in words, as the CLI and the page say it. */
export const VERDICT_TEXT: Record<JudgementVerdict, string> = {
  identical: 'the top-1 agrees at every position',
  'undecided-only': 'the top-1 differs only where the reference was undecided, its top-2 gap under the decided gap',
  decided: 'the top-1 differs on positions the reference had decided: read the rank table before calling it noise',
};

/**
 * Refuses two traces that are not of the same stream: a different number of positions, or a different corpus token
 * at any index (each message names the first index where they part).
 */
export function checkComparable(ref: readonly TraceRow[], cand: readonly TraceRow[], names: TraceNames): void {
  if (ref.length !== cand.length) {
    const n = Math.min(ref.length, cand.length);
    throw new TraceMismatchError(
      `${names.reference} has ${ref.length} positions and ${names.candidate} ${cand.length}: traces of different streams or chunkings cannot be judged together (the first index one lacks is ${n})`,
      n,
    );
  }
  let first = -1;
  let count = 0;
  for (let i = 0; i < ref.length; i++)
    if (ref[i].target !== cand[i].target) {
      if (first < 0) first = i;
      count++;
    }
  if (first >= 0)
    throw new TraceMismatchError(
      `${names.reference} and ${names.candidate} disagree about the corpus token at ${count} of ${ref.length} positions, first at index ${first} (${ref[first].target} vs ${cand[first].target}): they are not traces of the same stream`,
      first,
    );
}

/**
 * Every row of one trace lists the same number of entries (at least `min`: the rank keys depend on it), finite
 * logits in descending order (the top-1 is the first, the gap is not negative) and a finite nll. Returns the length.
 */
function checkRows(rows: readonly TraceRow[], name: string, min: number): number {
  const L = rows[0].ids.length;
  rows.forEach((r, i) => {
    if (r.ids.length !== r.logits.length)
      throw new Error(`${name}: index ${i} lists ${r.ids.length} ids but ${r.logits.length} logits`);
    if (r.ids.length !== L)
      throw new Error(
        `${name}: index ${i} lists ${r.ids.length} entries, index 0 lists ${L}: every row must list as many`,
      );
    if (!Number.isFinite(r.nll)) throw new Error(`${name}: index ${i} has a non-finite nll (${r.nll})`);
    r.logits.forEach((v, j) => {
      if (!Number.isFinite(v)) throw new Error(`${name}: index ${i} has a non-finite logit (${v}) at entry ${j + 1}`);
      if (j > 0 && v > r.logits[j - 1])
        throw new Error(`${name}: index ${i} lists its logits out of order (entry ${j + 1} above entry ${j})`);
    });
  });
  if (L < min) throw new Error(`${name}: its rows list ${L} entries; the judgement needs at least ${min}`);
  return L;
}

/** Element min(floor(p n), n - 1) of an ascending list; null for an empty one. */
export function sortedElement(sorted: readonly number[], p: number): number | null {
  if (!sorted.length) return null;
  return sorted[Math.min(Math.floor(p * sorted.length), sorted.length - 1)];
}

/**
 * The judgement of `cand` against `ref` (same stream, same positions): see TraceJudgement. `decidedGap` is the
 * reference's top-1 - top-2 gap from which a position counts as decided (default 2.0). Throws TraceMismatchError for
 * traces of different streams, Error for an empty trace or malformed rows (checkRows).
 */
export function judgeTraces(
  ref: readonly TraceRow[],
  cand: readonly TraceRow[],
  opts: { decidedGap?: number; names?: TraceNames } = {},
): TraceJudgement {
  const names = opts.names ?? { reference: 'the reference', candidate: 'the candidate' };
  const decidedGap = opts.decidedGap ?? DECIDED_GAP;
  if (!(Number.isFinite(decidedGap) && decidedGap >= 0))
    throw new Error(`the decided gap must be a finite number >= 0 (got ${decidedGap})`);
  checkComparable(ref, cand, names);
  if (!ref.length) throw new Error(`${names.reference} and ${names.candidate} have no positions to judge`);
  // the gap needs the reference's top two; a rank needs the candidate's list
  checkRows(ref, names.reference, 2);
  const L = checkRows(cand, names.candidate, 1);

  const buckets = GAP_BUCKETS.slice(0, -1).map((from, i) => {
    const to = GAP_BUCKETS[i + 1];
    return { from, to: Number.isFinite(to) ? (to as number) : null, positions: 0, disagreed: 0 };
  });
  const ranks: Record<string, number> = {};
  for (let r = 2; r <= L; r++) ranks[String(r)] = 0;
  const beyond = `>${L}`;
  ranks[beyond] = 0;
  const deltas: number[] = [];
  let disagreements = 0;
  let decided = 0;
  let decidedDisagreements = 0;

  for (let i = 0; i < ref.length; i++) {
    const r = ref[i];
    const c = cand[i];
    const choice = r.ids[0];
    const gap = r.logits[0] - r.logits[1];
    const at = c.ids.indexOf(choice);
    if (at >= 0) deltas.push(Math.abs(r.logits[0] - c.logits[at]));
    const agree = c.ids[0] === choice;
    if (!agree) {
      disagreements++;
      ranks[at >= 0 ? String(at + 1) : beyond]++;
    }
    // checkRows: the gap is finite and >= 0, so exactly one bucket holds it
    const b = buckets.find((x) => gap >= x.from && (x.to === null || gap < x.to))!;
    b.positions++;
    if (!agree) b.disagreed++;
    if (gap >= decidedGap) {
      decided++;
      if (!agree) decidedDisagreements++;
    }
  }

  deltas.sort((a, b) => a - b);
  const meanNll = (rows: readonly TraceRow[]) => rows.reduce((s, x) => s + x.nll, 0) / rows.length;
  return {
    positions: ref.length,
    disagreements,
    decided,
    decidedDisagreements,
    buckets,
    ranks,
    delta: {
      p50: sortedElement(deltas, 0.5),
      p90: sortedElement(deltas, 0.9),
      p99: sortedElement(deltas, 0.99),
      max: deltas.length ? deltas[deltas.length - 1] : null,
    },
    perplexity: { reference: Math.exp(meanNll(ref)), candidate: Math.exp(meanNll(cand)) },
    verdict: disagreements === 0 ? 'identical' : decidedDisagreements === 0 ? 'undecided-only' : 'decided',
  };
}

/**
 * Problems with an untrusted judgement (a report's `judgement` field): the schema's fields and types, counts that
 * add up (buckets and ranks to the disagreements), the verdict the counts give, and, with the report's `metrics`,
 * the same positions, disagreements and decided positions (both come from the same rows). Empty = valid.
 */
export function validateJudgement(j: unknown, metrics?: Record<string, unknown>): string[] {
  const errs: string[] = [];
  const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
  const count = (v: unknown) => Number.isInteger(v) && (v as number) >= 0;
  const need = (cond: boolean, msg: string) => {
    if (!cond) errs.push(msg);
  };
  if (!isObj(j)) return ['not an object'];
  for (const k of ['positions', 'disagreements', 'decided', 'decidedDisagreements'] as const)
    need(count(j[k]), `${k} must be a whole number >= 0`);
  if (errs.length) return errs;
  const n = j.positions as number;
  const dis = j.disagreements as number;
  const decided = j.decided as number;
  const decDis = j.decidedDisagreements as number;
  need(dis <= n && decided <= n, 'disagreements and decided positions cannot exceed the positions');
  need(decDis <= Math.min(dis, decided), 'decidedDisagreements cannot exceed the disagreements or decided positions');
  const edges = GAP_BUCKETS;
  if (!Array.isArray(j.buckets) || j.buckets.length !== edges.length - 1)
    errs.push(`buckets must list the ${edges.length - 1} gap buckets`);
  else {
    let sp = 0;
    let sd = 0;
    j.buckets.forEach((b, i) => {
      const to = Number.isFinite(edges[i + 1]) ? edges[i + 1] : null;
      if (!isObj(b) || b.from !== edges[i] || b.to !== to || !count(b.positions) || !count(b.disagreed))
        return errs.push(`buckets[${i}] must be {from: ${edges[i]}, to: ${to}, positions, disagreed}`);
      need((b.disagreed as number) <= (b.positions as number), `buckets[${i}].disagreed exceeds its positions`);
      sp += b.positions as number;
      sd += b.disagreed as number;
    });
    need(sp === n && sd === dis, `the buckets hold ${sp} positions and ${sd} disagreements, not ${n} and ${dis}`);
  }
  if (!isObj(j.ranks)) errs.push('ranks must be an object');
  else {
    const entries = Object.entries(j.ranks);
    need(
      entries.every(([k, v]) => /^(\d+|>\d+)$/.test(k) && count(v)),
      'ranks must map "2".."L" and ">L" to whole numbers',
    );
    const total = entries.reduce((s, [, v]) => s + (count(v) ? (v as number) : 0), 0);
    need(total === dis, `the ranks hold ${total} disagreements, not ${dis}`);
  }
  const d = j.delta;
  need(
    isObj(d) &&
      (['p50', 'p90', 'p99', 'max'] as const).every((k) => d[k] === null || (typeof d[k] === 'number' && d[k] >= 0)),
    'delta must hold p50, p90, p99 and max (numbers >= 0, or null)',
  );
  const p = j.perplexity;
  need(
    isObj(p) && typeof p.reference === 'number' && typeof p.candidate === 'number',
    'perplexity must hold reference and candidate numbers',
  );
  const verdict: JudgementVerdict = dis === 0 ? 'identical' : decDis === 0 ? 'undecided-only' : 'decided';
  need(j.verdict === verdict, `verdict "${String(j.verdict)}" contradicts its counts (they give "${verdict}")`);
  if (metrics)
    for (const [k, m] of [
      ['positions', 'positions'],
      ['disagreements', 'top1Disagreements'],
      ['decided', 'decidedPositions'],
      ['decidedDisagreements', 'decidedDisagreements'],
    ] as const)
      need(j[k] === metrics[m], `${k} ${String(j[k])} contradicts metrics.${m} ${String(metrics[m])}`);
  return errs;
}
