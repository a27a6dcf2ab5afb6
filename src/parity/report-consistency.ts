/**
 * A report cannot contradict itself. From an untrusted report's own results this derives what the engine would
 * have written (src/parity/probe.ts, trace.ts, localize.ts) and names every stored field that says otherwise:
 *
 * - a probe draw: its verdict, `position` (the first row that differs), `bytesDiffering` (that row's) and
 *   `bytesTotal` from its rows; `firstDivergence` absent where no row differs, and where the draw carries its
 *   stages, the first stage (in their order) with a row that differs, at that row;
 * - a probe: its verdict from its draws (a draw diverges where a row differs), one draw per
 *   `provenance.drawLengths` entry with that prompt length, `provenance.block` rows per draw;
 * - a trace: `metrics.positions`, `rowsByteEqual`, `top1Disagreements`, `decidedPositions`,
 *   `decidedDisagreements` and each gap bucket's counts from its positions; its verdict from their bytes;
 *   `agree` from the top-1 ids where both lists carry numbers, and never false on a byte-equal row.
 *
 * Every field a verdict or a counter is derived from must have its type (a string where a count belongs is
 * refused, not skipped). Leaves that decide nothing (maxAbs, ULPs, NMSE, a row's position label, top-k logits,
 * texts) are left to the page's normalizer, which prints a non-number as a dash.
 */
import { DECIDED_GAP } from './trace-thresholds.ts';

type Obj = Record<string, unknown>;
type Verdict = 'equal' | 'diverges';
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
/** A value as it appears in the file, for messages. */
const show = (v: unknown): string => (v === undefined ? 'nothing' : (JSON.stringify(v) ?? String(v)));
/** A count of bytes, rows or positions: a non-negative integer. */
const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;

interface Row {
  bytesDiffering: number;
  bytesTotal: number;
}

/**
 * The rows' counts, each checked: `at` names the array ("draws[2].rows"). Undefined where one of them is
 * malformed (its problem is pushed): nothing can be derived from it.
 */
function typedRows(rows: unknown, at: string, errs: string[]): Row[] | undefined {
  if (!Array.isArray(rows)) {
    errs.push(`${at} must be an array`);
    return undefined;
  }
  let ok = true;
  rows.forEach((r, j) => {
    const here = `${at}[${j}]`;
    if (!isObj(r)) {
      errs.push(`${here} is not an object`);
      ok = false;
      return;
    }
    if (!isCount(r.bytesDiffering)) {
      errs.push(`${here}.bytesDiffering must be a count of bytes (found ${show(r.bytesDiffering)})`);
      ok = false;
    }
    if (!isCount(r.bytesTotal) || r.bytesTotal === 0) {
      errs.push(`${here}.bytesTotal must be a positive count of bytes (found ${show(r.bytesTotal)})`);
      ok = false;
    }
    if (isCount(r.bytesDiffering) && isCount(r.bytesTotal) && r.bytesDiffering > r.bytesTotal) {
      errs.push(`${here}.bytesDiffering: ${r.bytesDiffering} bytes differ in a row of ${r.bytesTotal}`);
      ok = false;
    }
  });
  return ok ? (rows as Row[]) : undefined;
}

/** "layer 0 attn", "logits" */
const where = (layer: unknown, stage: unknown) =>
  layer === null || layer === undefined ? String(stage) : `layer ${String(layer)} ${String(stage)}`;

/** A draw's first divergence against its stages (localize.ts: the first stage in order with a row that differs). */
function firstDivergenceProblems(d: Obj, at: string, K: number, errs: string[]): void {
  const fd = d.firstDivergence;
  if (
    isObj(fd) &&
    typeof fd.position === 'number' &&
    !(Number.isInteger(fd.position) && fd.position < K && fd.position >= 0)
  )
    errs.push(`${at}.firstDivergence.position: ${fd.position} is outside the draw's ${K} rows`);
  if (d.stages === undefined || !Array.isArray(d.stages)) return;
  let first: { s: number; row: number; stage: Obj } | undefined;
  let typed = true;
  d.stages.forEach((s, i) => {
    if (!isObj(s)) {
      errs.push(`${at}.stages[${i}] is not an object`);
      typed = false;
      return;
    }
    const rows = typedRows(s.rows, `${at}.stages[${i}].rows`, errs);
    if (!rows) {
      typed = false;
      return;
    }
    const row = rows.findIndex((r) => r.bytesDiffering > 0);
    if (!first && row >= 0) first = { s: i, row, stage: s };
  });
  if (!typed) return;
  const f = first as { s: number; row: number; stage: Obj } | undefined;
  if (!f) {
    if (isObj(fd))
      errs.push(
        `${at}.firstDivergence: ${where(fd.layer, fd.stage)} at position ${show(fd.position)}, but no stage of ${at}.stages differs`,
      );
    return;
  }
  const derived = `${where(f.stage.layer, f.stage.stage)} at position ${f.row} (${at}.stages[${f.s}].rows[${f.row}])`;
  if (fd === null) errs.push(`${at}.firstDivergence: null, but the first stage that differs is ${derived}`);
  else if (isObj(fd) && (fd.layer !== f.stage.layer || fd.stage !== f.stage.stage || fd.position !== f.row))
    errs.push(
      `${at}.firstDivergence: ${where(fd.layer, fd.stage)} at position ${show(fd.position)}, but the first stage that differs is ${derived}`,
    );
}

/** One draw: its shape, then each stored verdict and counter against its rows. Returns the derived verdict. */
function drawProblems(d: unknown, i: number, block: unknown, errs: string[]): Verdict | undefined {
  const at = `draws[${i}]`;
  if (!isObj(d)) {
    errs.push(`${at} is not an object`);
    return undefined;
  }
  const verdictOk = d.verdict === 'equal' || d.verdict === 'diverges';
  if (!verdictOk) errs.push(`${at}.verdict must be "equal" or "diverges" (found ${show(d.verdict)})`);
  for (const k of ['promptLength', 'salt'] as const)
    if (typeof d[k] !== 'number') errs.push(`${at}.${k} must be a number`);
  if (typeof d.text !== 'string') errs.push(`${at}.text must be a string`);
  const fd = d.firstDivergence;
  if (
    !(
      fd === null ||
      (isObj(fd) && typeof fd.stage === 'string' && typeof fd.position === 'number' && typeof fd.text === 'string')
    )
  )
    errs.push(`${at}.firstDivergence invalid`);
  if (d.stages !== undefined && !Array.isArray(d.stages)) errs.push(`${at}.stages must be an array`);
  const positionOk = d.position === null || isCount(d.position);
  if (!positionOk) errs.push(`${at}.position must be a row index or null (found ${show(d.position)})`);
  const bytesOk = isCount(d.bytesDiffering);
  if (!bytesOk) errs.push(`${at}.bytesDiffering must be a count of bytes (found ${show(d.bytesDiffering)})`);
  const totalOk = isCount(d.bytesTotal);
  if (!totalOk) errs.push(`${at}.bytesTotal must be a count of bytes (found ${show(d.bytesTotal)})`);

  const rows = typedRows(d.rows, `${at}.rows`, errs);
  if (!rows) return undefined;
  if (rows.length === 0) {
    errs.push(`${at}.rows: none; a draw compares at least one verify row, so its verdict says nothing`);
    return undefined;
  }
  if (isCount(block) && rows.length !== block)
    errs.push(`${at}.rows: ${rows.length} rows, but provenance.block says K = ${block}`);
  if (totalOk)
    rows.forEach((r, j) => {
      if (r.bytesTotal !== d.bytesTotal)
        errs.push(
          `${at}.rows[${j}].bytesTotal: ${r.bytesTotal}, but ${at}.bytesTotal says rows of ${show(d.bytesTotal)} bytes`,
        );
    });

  const bad = rows.findIndex((r) => r.bytesDiffering > 0);
  const derived: Verdict = bad >= 0 ? 'diverges' : 'equal';
  if (d.verdict === 'equal' && bad >= 0)
    errs.push(
      `${at}.rows[${bad}].bytesDiffering: ${rows[bad].bytesDiffering} of ${rows[bad].bytesTotal} bytes differ but the draw says "equal"`,
    );
  if (d.verdict === 'diverges' && bad < 0)
    errs.push(`${at}.verdict: "diverges", but no row differs (every rows[j].bytesDiffering is 0)`);
  if (positionOk && d.position !== (bad >= 0 ? bad : null))
    errs.push(
      bad >= 0
        ? `${at}.position: ${show(d.position)}, but the first row that differs is rows[${bad}]`
        : `${at}.position: ${show(d.position)}, but no row differs (null)`,
    );
  if (bytesOk && d.bytesDiffering !== (bad >= 0 ? rows[bad].bytesDiffering : 0))
    errs.push(
      bad >= 0
        ? `${at}.bytesDiffering: ${show(d.bytesDiffering)}, but the first row that differs (rows[${bad}]) has ${rows[bad].bytesDiffering}`
        : `${at}.bytesDiffering: ${show(d.bytesDiffering)}, but no row differs (0)`,
    );
  if (bad < 0 && isObj(fd)) errs.push(`${at}.firstDivergence: present, but no row of the draw differs`);
  firstDivergenceProblems(d, at, rows.length, errs);
  return derived;
}

/** A probe report's draws and verdict (the report's top-level shape is validateReport's). */
export function probeProblems(x: Obj): string[] {
  const errs: string[] = [];
  if (!Array.isArray(x.draws)) return ['draws must be an array'];
  const draws = x.draws;
  const p = isObj(x.provenance) ? x.provenance : {};
  const derived = draws.map((d, i) => drawProblems(d, i, p.block, errs));
  if (draws.length === 0) errs.push('draws: none; a probe compares at least one draw, so its verdict says nothing');
  if (Array.isArray(p.drawLengths)) {
    if (p.drawLengths.length !== draws.length)
      errs.push(`provenance.drawLengths: ${p.drawLengths.length} lengths for ${draws.length} draws`);
    else
      draws.forEach((d, i) => {
        const n = (p.drawLengths as unknown[])[i];
        if (isObj(d) && typeof d.promptLength === 'number' && d.promptLength !== n)
          errs.push(`draws[${i}].promptLength: ${d.promptLength}, but provenance.drawLengths[${i}] is ${show(n)}`);
      });
  }
  // The verdict badge is what a reader looks at first: it must be the one the rows give.
  if (draws.length > 0 && derived.every((v) => v !== undefined)) {
    const bad = derived.indexOf('diverges');
    if (x.verdict === 'equal' && bad >= 0) {
      const rows = (draws[bad] as { rows: Row[] }).rows;
      const j = rows.findIndex((r) => r.bytesDiffering > 0);
      errs.push(
        `verdict: "equal", but draws[${bad}] diverges (rows[${j}]: ${rows[j].bytesDiffering} of ${rows[j].bytesTotal} bytes differ)`,
      );
    }
    if (x.verdict === 'diverges' && bad < 0)
      errs.push(`verdict: "diverges", but every row of all ${draws.length} draws is byte-equal`);
  }
  return errs;
}

/**
 * Positions counted by a gap rule, as a range: a share link rounds gaps to 7 significant digits
 * (src/ui/share/share-link.ts), so a gap within a millionth of a boundary may have crossed it.
 */
function gapCount(gaps: number[], lo: number, hi: number | null): { min: number; max: number } {
  const near = (g: number, b: number) => Math.abs(g - b) <= 1e-6 * Math.abs(b);
  let min = 0;
  let max = 0;
  for (const g of gaps) {
    const inside = g >= lo && (hi === null || g < hi);
    const unsure = near(g, lo) || (hi !== null && near(g, hi));
    if (inside && !unsure) min++;
    if (inside || unsure) max++;
  }
  return { min, max };
}

const inRange = (n: number, r: { min: number; max: number }) => n >= r.min && n <= r.max;
const rangeText = (r: { min: number; max: number }) => (r.min === r.max ? `${r.min}` : `${r.min} to ${r.max}`);

interface Position {
  gap: number;
  agree: boolean;
  bytesDiffering: number;
}

/** The top-1 id of a top-k list, where it is a number. */
function top1(list: unknown): number | undefined {
  const t = Array.isArray(list) ? list[0] : undefined;
  return isObj(t) && typeof t.id === 'number' ? t.id : undefined;
}

/** A trace report's positions, metrics and verdict (the report's top-level shape is validateReport's). */
export function traceProblems(x: Obj): string[] {
  const errs: string[] = [];
  const m = x.metrics;
  if (!isObj(m)) errs.push('metrics missing');
  const metrics = isObj(m) ? m : {};
  const counters = ['positions', 'rowsByteEqual', 'top1Disagreements', 'decidedPositions', 'decidedDisagreements'];
  if (isObj(m))
    for (const k of counters) if (!isCount(m[k])) errs.push(`metrics.${k} must be a count (found ${show(m[k])})`);
  if (!Array.isArray(x.positions)) {
    errs.push('positions must be an array');
    return errs;
  }
  let typed = true;
  x.positions.forEach((p, i) => {
    if (!isObj(p) || typeof p.position !== 'number' || typeof p.gap !== 'number' || typeof p.agree !== 'boolean') {
      errs.push(`positions[${i}] invalid`);
      typed = false;
      return;
    }
    if (!isCount(p.bytesDiffering)) {
      errs.push(`positions[${i}].bytesDiffering must be a count of bytes (found ${show(p.bytesDiffering)})`);
      typed = false;
      return;
    }
    // Rows equal in every byte have the same top-1 (bf16 rows hold values already rounded to bf16: compare.ts).
    if (!p.agree && p.bytesDiffering === 0)
      errs.push(`positions[${i}].agree: false (the top-1 tokens differ), but bytesDiffering is 0 (the rows are equal)`);
    const c = top1(p.chainTop);
    const b = top1(p.blockTop);
    if (c !== undefined && b !== undefined && (c === b) !== p.agree)
      errs.push(`positions[${i}].agree: ${p.agree}, but chainTop[0].id is ${c} and blockTop[0].id is ${b}`);
  });
  if (!typed) return errs;
  const ps = x.positions as Position[];
  const n = ps.length;
  if (n === 0) errs.push('positions: none; a trace compares at least one position, so its verdict says nothing');
  const equalRows = ps.filter((p) => p.bytesDiffering === 0).length;
  const disagreeing = ps.filter((p) => !p.agree).length;
  if (isCount(metrics.positions) && metrics.positions !== n)
    errs.push(`metrics.positions: ${metrics.positions}, but the report lists ${n} positions`);
  if (isCount(metrics.rowsByteEqual) && metrics.rowsByteEqual !== equalRows)
    errs.push(
      `metrics.rowsByteEqual: ${metrics.rowsByteEqual}, but ${equalRows} of ${n} positions have bytesDiffering 0`,
    );
  if (isCount(metrics.top1Disagreements) && metrics.top1Disagreements !== disagreeing)
    errs.push(
      `metrics.top1Disagreements: ${metrics.top1Disagreements}, but ${disagreeing} of ${n} positions have agree false`,
    );
  const decided = gapCount(
    ps.map((p) => p.gap),
    DECIDED_GAP,
    null,
  );
  if (isCount(metrics.decidedPositions) && !inRange(metrics.decidedPositions, decided))
    errs.push(
      `metrics.decidedPositions: ${metrics.decidedPositions}, but ${rangeText(decided)} positions have gap >= ${DECIDED_GAP}`,
    );
  const decidedBad = gapCount(
    ps.filter((p) => !p.agree).map((p) => p.gap),
    DECIDED_GAP,
    null,
  );
  if (isCount(metrics.decidedDisagreements) && !inRange(metrics.decidedDisagreements, decidedBad))
    errs.push(
      `metrics.decidedDisagreements: ${metrics.decidedDisagreements}, but ${rangeText(decidedBad)} positions with gap >= ${DECIDED_GAP} have agree false`,
    );
  if (isObj(m)) bucketProblems(m.buckets, ps, errs);
  const p = isObj(x.provenance) ? x.provenance : {};
  if (isCount(p.traced) && p.traced !== n)
    errs.push(`provenance.traced: ${p.traced}, but the report lists ${n} positions`);
  // The verdict badge is what a reader looks at first: it must be the one the rows give (traceVerdict).
  if (n > 0) {
    const bad = ps.findIndex((q) => q.bytesDiffering > 0);
    if (x.verdict === 'equal' && bad >= 0)
      errs.push(
        `verdict: "equal", but ${n - equalRows} of ${n} rows differ (positions[${bad}].bytesDiffering: ${ps[bad].bytesDiffering})`,
      );
    if (x.verdict === 'diverges' && bad < 0)
      errs.push(`verdict: "diverges", but all ${n} rows are byte-equal (every bytesDiffering is 0)`);
  }
  return errs;
}

/** Each gap bucket [lo, hi): its positions and disagreements, counted from the positions' gaps. */
function bucketProblems(buckets: unknown, ps: Position[], errs: string[]): void {
  if (!Array.isArray(buckets)) {
    errs.push(`metrics.buckets must be an array (found ${show(buckets)})`);
    return;
  }
  buckets.forEach((b, i) => {
    const at = `metrics.buckets[${i}]`;
    if (
      !isObj(b) ||
      typeof b.lo !== 'number' ||
      !(b.hi === null || typeof b.hi === 'number') ||
      !isCount(b.positions) ||
      !isCount(b.disagreements)
    ) {
      errs.push(`${at} must have numbers lo, hi (or null) and counts positions, disagreements`);
      return;
    }
    const hi = b.hi as number | null;
    const all = gapCount(
      ps.map((p) => p.gap),
      b.lo,
      hi,
    );
    const bad = gapCount(
      ps.filter((p) => !p.agree).map((p) => p.gap),
      b.lo,
      hi,
    );
    const range = `[${b.lo}, ${hi === null ? '∞' : hi})`;
    if (!inRange(b.positions, all))
      errs.push(`${at}.positions: ${b.positions}, but ${rangeText(all)} positions have a gap in ${range}`);
    if (!inRange(b.disagreements, bad))
      errs.push(
        `${at}.disagreements: ${b.disagreements}, but ${rangeText(bad)} positions with a gap in ${range} have agree false`,
      );
  });
}
