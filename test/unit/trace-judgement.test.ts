/**
 * The judgement of two traces (src/parity/trace-judgement.ts) on hand-made traces, against a second computation
 * written here from the definitions (mlxcel's compare_logit_traces as the format's documentation states it): gap =
 * reference top-1 - top-2 logit; buckets [0, .5) [.5, 1) [1, 2) [2, 5) [5, 10) [10, inf); decided = gap >= GAP; the
 * rank of the reference's choice in the candidate's list at each disagreement, or beyond it; |delta logit| of the
 * reference's choice where the candidate lists it, percentile p = element min(floor(p n), n - 1) of the sorted list;
 * perplexity exp(mean nll). Also the refusals, and the report field's validation.
 */
import { describe, expect, it } from 'vitest';
import {
  judgeTraces,
  TraceMismatchError,
  type TraceJudgement,
  type TraceRow,
  validateJudgement,
} from '../../src/parity/trace-judgement.ts';

/** The second computation, from the definitions above; nothing of the module under test is used. */
function byDefinition(ref: TraceRow[], cand: TraceRow[], GAP: number) {
  const edges = [0, 0.5, 1, 2, 5, 10, Number.POSITIVE_INFINITY];
  const L = cand[0].ids.length;
  const buckets = [] as { from: number; to: number | null; positions: number; disagreed: number }[];
  for (let b = 0; b < 6; b++)
    buckets.push({ from: edges[b], to: b === 5 ? null : edges[b + 1], positions: 0, disagreed: 0 });
  const ranks: Record<string, number> = {};
  for (let k = 2; k <= L; k++) ranks[`${k}`] = 0;
  ranks[`>${L}`] = 0;
  let disagreements = 0;
  let decided = 0;
  let decidedDisagreements = 0;
  const deltas: number[] = [];
  let nllRef = 0;
  let nllCand = 0;
  for (let i = 0; i < ref.length; i++) {
    const choice = ref[i].ids[0];
    const gap = ref[i].logits[0] - ref[i].logits[1];
    let listed = -1;
    for (let k = 0; k < cand[i].ids.length; k++) if (cand[i].ids[k] === choice && listed < 0) listed = k;
    const differs = cand[i].ids[0] !== choice;
    if (listed >= 0) deltas.push(Math.abs(ref[i].logits[0] - cand[i].logits[listed]));
    if (differs) {
      disagreements += 1;
      if (listed >= 0) ranks[`${listed + 1}`] += 1;
      else ranks[`>${L}`] += 1;
    }
    for (let b = 0; b < 6; b++)
      if (edges[b] <= gap && gap < edges[b + 1]) {
        buckets[b].positions += 1;
        if (differs) buckets[b].disagreed += 1;
      }
    if (gap >= GAP) {
      decided += 1;
      if (differs) decidedDisagreements += 1;
    }
    nllRef += ref[i].nll;
    nllCand += cand[i].nll;
  }
  const sorted = [...deltas].sort((a, b) => a - b);
  const at = (p: number) => (sorted.length ? sorted[Math.min(Math.floor(p * sorted.length), sorted.length - 1)] : null);
  let verdict: TraceJudgement['verdict'] = 'decided';
  if (disagreements === 0) verdict = 'identical';
  else if (decidedDisagreements === 0) verdict = 'undecided-only';
  return {
    positions: ref.length,
    disagreements,
    decided,
    decidedDisagreements,
    buckets,
    ranks,
    delta: { p50: at(0.5), p90: at(0.9), p99: at(0.99), max: sorted.length ? sorted[sorted.length - 1] : null },
    perplexity: { reference: Math.exp(nllRef / ref.length), candidate: Math.exp(nllCand / cand.length) },
    verdict,
  };
}

/** A reference row: top-1 `id` leading its runner-up by `gap`, then six more entries 0.25 apart. */
function refRow(target: number, id: number, gap: number, nll: number): TraceRow {
  const ids = [id, ...Array.from({ length: 7 }, (_, k) => 1000 + id * 10 + k)];
  const logits = [20, 20 - gap, ...Array.from({ length: 6 }, (_, k) => 20 - gap - 0.25 * (k + 1))];
  return { target, nll, ids, logits };
}

/**
 * A candidate row for `r`: the reference's choice at `rank` (1 = agrees; 0 = not listed), its logit moved by `delta`;
 * the other entries are the reference's runner-ups, in order, then unrelated ids.
 */
function candRow(r: TraceRow, rank: number, delta: number, nll: number): TraceRow {
  const others = r.ids.slice(1);
  const ids = rank === 0 ? [...others, 99_999] : [...others.slice(0, rank - 1), r.ids[0], ...others.slice(rank - 1, 7)];
  // one apart, descending, the moved entry in its place
  const moved = r.logits[0] + delta;
  const logits = ids.map((_, k) => (rank === 0 ? 30 - k : moved + (rank - 1 - k)));
  return { target: r.target, nll, ids, logits };
}

/** A small deterministic generator. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x297a2d39) >>> 0;
    return s / 2 ** 32;
  };
}

describe('trace judgement', () => {
  // Every bucket, both edges of the decided gap, ranks 2, 3, 8 and beyond the list, one position whose choice the
  // candidate does not list though it agrees elsewhere.
  const plan: [gap: number, rank: number][] = [
    [0, 2], // a tie: bucket [0, 0.5), the candidate took the runner-up
    [0.2, 1],
    [0.49, 0], // beyond the list
    [0.5, 1], // the edge: bucket [0.5, 1)
    [0.7, 3],
    [1.5, 1],
    [1.99, 8],
    [2, 1], // decided from 2.0 on
    [3, 1],
    [7, 1],
    [10, 1], // bucket [10, inf)
    [12.5, 1],
  ];
  const ref = plan.map(([gap], i) => refRow(100 + i, 7 * i + 1, gap, 1 + i / 8));
  const cand = plan.map(([, rank], i) => candRow(ref[i], rank, (i % 3) * 0.125, 1.25 + i / 16));

  it('equals the computation from the definitions on a trace that fills every bucket', () => {
    const j = judgeTraces(ref, cand);
    expect(j).toEqual(byDefinition(ref, cand, 2));
    // what the plan was built to hold
    expect(j.buckets.map((b) => [b.positions, b.disagreed])).toEqual([
      [3, 2],
      [2, 1],
      [2, 1],
      [2, 0],
      [1, 0],
      [2, 0],
    ]);
    expect(j.ranks).toEqual({ '2': 1, '3': 1, '4': 0, '5': 0, '6': 0, '7': 0, '8': 1, '>8': 1 });
    expect([j.disagreements, j.decided, j.decidedDisagreements, j.verdict]).toEqual([4, 5, 0, 'undecided-only']);
    // 11 positions list the choice (one does not): p50 = element 5, p90 = element 9, p99 and max = element 10
    expect(j.delta.p99).toBe(j.delta.max);
    expect(j.perplexity.reference).toBeCloseTo(Math.exp(1 + 11 / 16), 12);
  });

  it('decided: a disagreement at a gap of exactly the decided gap; --decided moves the line', () => {
    const c = [...cand];
    c[7] = candRow(ref[7], 2, 0, cand[7].nll); // gap 2.0
    const j = judgeTraces(ref, c);
    expect(j).toEqual(byDefinition(ref, c, 2));
    expect([j.decidedDisagreements, j.verdict]).toEqual([1, 'decided']);
    const k = judgeTraces(ref, c, { decidedGap: 2.5 });
    expect(k).toEqual(byDefinition(ref, c, 2.5));
    expect([k.decided, k.decidedDisagreements, k.verdict]).toEqual([4, 0, 'undecided-only']);
  });

  it('identical: the same trace twice; differing only below the gap with no decided position is undecided-only', () => {
    const j = judgeTraces(ref, ref);
    expect(j).toEqual(byDefinition(ref, ref, 2));
    expect([j.disagreements, j.verdict, j.delta.max, j.perplexity.candidate]).toEqual([
      0,
      'identical',
      0,
      j.perplexity.reference,
    ]);
    // a trace with no decided position at all: its disagreements are all undecided ones
    const low = ref.slice(0, 7);
    const u = judgeTraces(low, cand.slice(0, 7));
    expect(u).toEqual(byDefinition(low, cand.slice(0, 7), 2));
    expect([u.decided, u.disagreements, u.verdict]).toEqual([0, 4, 'undecided-only']);
  });

  it('delta percentiles: element min(floor(p n), n - 1) of the sorted list, for n = 1 .. 120', () => {
    const rand = rng(53);
    for (let n = 1; n <= 120; n++) {
      const r = Array.from({ length: n }, (_, i) => refRow(i, i + 1, 0.1 + 12 * rand(), 2 * rand()));
      const c = r.map((x) => candRow(x, 1, (rand() - 0.5) * 2e-3, 2 * rand()));
      const j = judgeTraces(r, c);
      expect(j, `n = ${n}`).toEqual(byDefinition(r, c, 2));
      const sorted = r.map((x, i) => Math.abs(x.logits[0] - c[i].logits[0])).sort((a, b) => a - b);
      expect([j.delta.p50, j.delta.p90, j.delta.p99], `n = ${n}`).toEqual([
        sorted[Math.floor(n / 2)],
        sorted[Math.min(Math.floor(0.9 * n), n - 1)],
        sorted[Math.min(Math.floor(0.99 * n), n - 1)],
      ]);
    }
  });

  it('random traces: every field as the definitions give it', () => {
    const rand = rng(7);
    for (let t = 0; t < 40; t++) {
      const n = 1 + Math.floor(rand() * 300);
      const r = Array.from({ length: n }, (_, i) => refRow(i % 97, i + 1, 15 * rand() ** 2, 10 * rand()));
      const c = r.map((x) => candRow(x, rand() < 0.7 ? 1 : Math.floor(rand() * 9), rand() * 0.5, 10 * rand()));
      const gap = [2, 0.5, 5][t % 3];
      expect(judgeTraces(r, c, { decidedGap: gap }), `trace ${t}`).toEqual(byDefinition(r, c, gap));
    }
  });

  it('the candidate listing the choice nowhere: no delta at all', () => {
    const c = ref.map((x) => candRow(x, 0, 0, 1));
    const j = judgeTraces(ref, c);
    expect(j.delta).toEqual({ p50: null, p90: null, p99: null, max: null });
    expect(j.ranks['>8']).toBe(ref.length);
    expect(j.verdict).toBe('decided');
  });

  it('refuses traces of different lengths or corpus tokens, naming the first index', () => {
    const names = { reference: 'a.tsv', candidate: 'b.tsv' };
    const short = () => judgeTraces(ref, cand.slice(0, 9), { names });
    expect(short).toThrow(TraceMismatchError);
    expect(short).toThrow(
      'a.tsv has 12 positions and b.tsv 9: traces of different streams or chunkings cannot be judged together (the first index one lacks is 9)',
    );
    const other = cand.map((x, i) => (i === 4 || i === 9 ? { ...x, target: x.target + 1 } : x));
    let err: unknown;
    try {
      judgeTraces(ref, other, { names });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(TraceMismatchError);
    expect((err as TraceMismatchError).index).toBe(4);
    expect((err as Error).message).toBe(
      'a.tsv and b.tsv disagree about the corpus token at 2 of 12 positions, first at index 4 (104 vs 105): they are not traces of the same stream',
    );
    // the token at index 0 counts too
    expect(() => judgeTraces(ref, [{ ...cand[0], target: 7 }, ...cand.slice(1)], { names })).toThrow(
      /first at index 0 \(100 vs 7\)/,
    );
  });

  it('refuses rows it cannot judge', () => {
    const names = { reference: 'r', candidate: 'c' };
    expect(() => judgeTraces([], [], { names })).toThrow('r and c have no positions to judge');
    const oneEntry = ref.map((x) => ({ ...x, ids: x.ids.slice(0, 1), logits: x.logits.slice(0, 1) }));
    expect(() => judgeTraces(oneEntry, cand, { names })).toThrow(
      'r: its rows list 1 entries; the judgement needs at least 2',
    );
    const ragged = [
      ...cand.slice(0, 3),
      { ...cand[3], ids: cand[3].ids.slice(0, 5), logits: cand[3].logits.slice(0, 5) },
    ];
    expect(() => judgeTraces(ref.slice(0, 4), ragged, { names })).toThrow(
      'c: index 3 lists 5 entries, index 0 lists 8: every row must list as many',
    );
    const unordered = ref.map((x, i) =>
      i === 2 ? { ...x, logits: [x.logits[1], x.logits[0], ...x.logits.slice(2)] } : x,
    );
    expect(() => judgeTraces(unordered, cand, { names })).toThrow(
      'r: index 2 lists its logits out of order (entry 2 above entry 1)',
    );
    const nan = cand.map((x, i) => (i === 5 ? { ...x, nll: Number.NaN } : x));
    expect(() => judgeTraces(ref, nan, { names })).toThrow('c: index 5 has a non-finite nll (NaN)');
    expect(() => judgeTraces(ref, cand, { decidedGap: -1 })).toThrow('the decided gap must be a finite number >= 0');
  });
});

describe("a report's judgement field (validateJudgement)", () => {
  const ref = [0.3, 1.2, 2.5, 6, 11].map((g, i) => refRow(i, i + 1, g, 1));
  const cand = ref.map((r, i) => candRow(r, i === 0 ? 2 : i === 2 ? 0 : 1, 0.01, 1));
  const j = judgeTraces(ref, cand);
  const metrics = { positions: 5, top1Disagreements: 2, decidedPositions: 3, decidedDisagreements: 1 };
  const copy = () => JSON.parse(JSON.stringify(j)) as Record<string, any>;

  it('accepts the judgement as JSON delivers it, and its agreement with the metrics', () => {
    expect(validateJudgement(copy(), metrics)).toEqual([]);
  });

  it('refuses a verdict its counts contradict, sums that do not add up, and a mismatch with the metrics', () => {
    const v = copy();
    v.verdict = 'identical';
    expect(validateJudgement(v)).toEqual(['verdict "identical" contradicts its counts (they give "decided")']);
    const b = copy();
    b.buckets[1].positions += 1;
    expect(validateJudgement(b)).toEqual(['the buckets hold 6 positions and 2 disagreements, not 5 and 2']);
    const r = copy();
    r.ranks['>8'] = 0;
    expect(validateJudgement(r)).toEqual(['the ranks hold 1 disagreements, not 2']);
    expect(validateJudgement(copy(), { ...metrics, top1Disagreements: 3 })).toEqual([
      'disagreements 2 contradicts metrics.top1Disagreements 3',
    ]);
    const e = copy();
    e.buckets = e.buckets.slice(1);
    expect(validateJudgement(e)[0]).toBe('buckets must list the 6 gap buckets');
    expect(validateJudgement([])).toEqual(['not an object']);
    const d = copy();
    d.delta.p50 = 'x';
    expect(validateJudgement(d)).toEqual(['delta must hold p50, p90, p99 and max (numbers >= 0, or null)']);
  });
});
