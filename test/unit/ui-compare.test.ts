/**
 * The Compare view's model without a DOM: two hand-made logit-trace TSVs judged as compare-traces judges them, the
 * strip of every position agreeing with the judgement's counts, what differs between the two sides marked, two
 * probe reports draw by draw, the refusals, and a comparison document that opens the same comparison again.
 */
import { describe, expect, it } from 'vitest';
import { formatLogitTraceTsv, type LogitTraceRow } from '../../src/format/logit-trace-tsv.ts';
import { reportArmTsv } from '../../src/parity/trace-files.ts';
import { judgeTraces } from '../../src/parity/trace-judgement.ts';
import {
  compare,
  comparisonDocument,
  readComparisonDocument,
  reportHeatmap,
  type CompareInput,
} from '../../src/ui/compare/compare-model.ts';
import { comparisonFileStem, comparisonMarkdown } from '../../src/ui/compare/compare-share.ts';
import { fileSource } from '../../src/ui/compare/compare-view.ts';
import { normalizeReport } from '../../src/ui/report/report-model.ts';
import { divergingReport, equalReport } from '../e2e/sample-report.ts';
import { sampleTrace } from '../e2e/sample-trace.ts';

/** A row of three entries: the reference's choice first unless `ids` says otherwise. */
const row = (target: number, ids: number[], logits: number[], nll = 2): LogitTraceRow => ({
  chunk: 0,
  pos: 0,
  target,
  nll,
  ids,
  logits,
});

// Reference: gaps 0.2 (undecided), 3 (decided), 12 (decided), 1.5 (undecided).
const REF = [
  row(7, [1, 2, 3], [5, 4.8, 1]),
  row(8, [4, 5, 6], [9, 6, 1]),
  row(9, [7, 8, 9], [20, 8, 1]),
  row(10, [1, 3, 5], [3, 1.5, 0]),
];
// Candidate: keeps 1 and 3, flips 0 (the reference's choice at rank 2) and 2 (the choice beyond its list).
const CAND = [
  row(7, [2, 1, 3], [5, 4.9, 1], 2.1),
  row(8, [4, 5, 6], [9.25, 6, 1], 1.9),
  row(9, [8, 9, 10], [19, 18, 1], 3),
  row(10, [1, 3, 5], [3, 1.5, 0], 2),
];

const tsv = (rows: LogitTraceRow[], arm: string, adapter: string) =>
  formatLogitTraceTsv({
    meta: [
      { key: 'model', values: ['gemma-4-12b-it-4bit'] },
      { key: 'arm', values: [arm] },
      { key: 'adapter', values: [adapter] },
    ],
    rows: rows.map((r, i) => ({ ...r, chunk: Math.floor(i / 2), pos: i % 2 })),
  });

const TSVS: CompareInput = {
  a: { name: 'mac-chain.tsv', tsv: tsv(REF, 'chain', 'Apple M3 Max') },
  b: { name: 'mac-block.tsv', tsv: tsv(CAND, 'block', 'Apple M3 Max') },
};

describe('two traces side by side', () => {
  it('judges them as compare-traces does, and the strip says the same per position', () => {
    const c = compare(TSVS);
    if (c.kind !== 'traces') throw new Error(c.kind);
    expect(c.judgement).toEqual(judgeTraces(REF, CAND));
    expect(c.judgement.verdict).toBe('decided');
    expect(c.judgement.ranks).toEqual({ '2': 1, '3': 0, '>3': 1 });
    expect(c.strip).toEqual([
      { agree: false, decided: false },
      { agree: true, decided: true },
      { agree: false, decided: true },
      { agree: true, decided: false },
    ]);
    // the strip's counts are the judgement's
    expect(c.strip.filter((s) => !s.agree).length).toBe(c.judgement.disagreements);
    expect(c.strip.filter((s) => s.decided).length).toBe(c.judgement.decided);
    expect(c.strip.filter((s) => s.decided && !s.agree).length).toBe(c.judgement.decidedDisagreements);
    expect(c.a.about).toBe('gemma-4-12b-it-4bit, arm chain, adapter Apple M3 Max');
  });

  it('marks what differs between the two sides, and only that', () => {
    const c = compare({ ...TSVS, b: { name: 'h200-block.tsv', tsv: tsv(CAND, 'block', 'NVIDIA H200') } });
    if (c.kind !== 'traces') throw new Error(c.kind);
    const facts = Object.fromEntries(c.facts.map((f) => [f.label, [f.a, f.b, f.differs]]));
    expect(facts.model).toEqual(['gemma-4-12b-it-4bit', 'gemma-4-12b-it-4bit', false]);
    expect(facts.arm).toEqual(['chain', 'block', true]);
    expect(facts.adapter).toEqual(['Apple M3 Max', 'NVIDIA H200', true]);
    expect(facts.positions).toEqual(['4', '4', false]);
  });

  it('the decided gap moves positions between decided and undecided', () => {
    const c = compare({ ...TSVS, decidedGap: 1 });
    if (c.kind !== 'traces') throw new Error(c.kind);
    expect(c.strip.map((s) => s.decided)).toEqual([false, true, true, true]);
    expect(c.judgement).toEqual(judgeTraces(REF, CAND, { decidedGap: 1 }));
  });

  it('a Ringside trace report is a trace too: its chain against a TSV of its block, and arm by arm', () => {
    const r = sampleTrace({ prefix: 40, traced: 48, disagreeAt: [3, 10] });
    const report = JSON.parse(JSON.stringify(r));
    const mixed = compare({
      a: { name: 'trace.json', report },
      b: { name: 'block.tsv', tsv: reportArmTsv(r, 'block') },
    });
    if (mixed.kind !== 'traces') throw new Error(mixed.kind);
    // the TSV's logits are printed with 6 decimals: the counts are the report's own
    expect(mixed.judgement.disagreements).toBe(r.metrics.top1Disagreements);
    expect(mixed.judgement.decidedDisagreements).toBe(r.metrics.decidedDisagreements);
    // one report given twice is its own chain against its own block; chain against chain is identical
    const same = compare({ a: { name: 'x', report }, b: { name: 'x', report }, arms: { a: 'chain', b: 'chain' } });
    expect(same.kind === 'traces' && same.judgement.verdict).toBe('identical');
  });

  it('refuses traces of different streams, naming the first index where they part', () => {
    const other = CAND.map((r, i) => (i === 2 ? { ...r, target: 99 } : r));
    expect(() => compare({ ...TSVS, b: { name: 'other.tsv', tsv: tsv(other, 'block', 'x') } })).toThrow(
      /disagree about the corpus token at 1 of 4 positions, first at index 2 \(9 vs 99\)/,
    );
    expect(() => compare({ ...TSVS, b: { name: 'short.tsv', tsv: tsv(CAND.slice(0, 3), 'block', 'x') } })).toThrow(
      /has 4 positions and short\.tsv 3/,
    );
  });
});

describe('two probe reports side by side', () => {
  it('draw by draw, what parts marked, both heatmaps, provenance row by row', () => {
    const c = compare({
      a: { name: 'mac.json', report: JSON.parse(JSON.stringify(equalReport())) },
      b: { name: 'h200.json', report: JSON.parse(JSON.stringify(divergingReport())) },
    });
    if (c.kind !== 'probes') throw new Error(c.kind);
    expect(c.headline).toBe('A EQUAL, B DIVERGES: 1 of 4 draws part (draw 3)');
    expect(c.same).toBe(false);
    expect(c.draws.map((d) => [d.index, d.differs])).toEqual([
      [0, false],
      [1, false],
      [2, false],
      [3, true],
    ]);
    const facts = Object.fromEntries(c.facts.map((f) => [f.label, f.differs]));
    expect(facts).toMatchObject({
      policy: true,
      precision: false,
      adapter: false,
      'draw lengths': false,
      created: false,
    });
    expect(c.facts.map((f) => f.label)).toEqual(
      expect.arrayContaining(['adapter', 'browser', 'policy', 'precision', 'commit', 'self-test']),
    );
    // the equal report localized nothing; the diverging one opens on its long draw, first divergence outlined
    expect(reportHeatmap(c.a.report)).toBeUndefined();
    const m = reportHeatmap(c.b.report)!;
    expect(m.draw.index).toBe(3);
    expect(m.grid.cells.some((x) => x.first)).toBe(true);
    expect(comparisonFileStem(c)).toBe('ringside-compare-probes-part');
    const md = comparisonMarkdown(c);
    expect(md).toMatch(/^### Ringside comparison of two probes: \*\*the draws part\*\*/);
    expect(md).toContain('| **3** ≠ | equal: all 4 verify block positions');
    expect(md).toContain('| **policy** ≠ | exact | mlx-metal |');
  });

  it('the same report twice: every draw the same', () => {
    const r = JSON.parse(JSON.stringify(divergingReport()));
    const c = compare({ a: { name: 'a.json', report: r }, b: { name: 'b.json', report: r } });
    expect(c.kind === 'probes' && c.headline).toBe('A DIVERGES, B DIVERGES: every draw has the same outcome in both');
    expect(normalizeReport(r).verdict).toBe('diverges');
  });
});

describe('what cannot be compared', () => {
  it('a probe and a trace, or something that is no report, each named', () => {
    const probe = { name: 'probe.json', report: JSON.parse(JSON.stringify(equalReport())) };
    expect(() => compare({ a: probe, b: TSVS.b })).toThrow(
      'A (probe.json) is a probe report and B (mac-block.tsv) a logit-trace TSV: compare two probe reports, or two traces (logit-trace TSVs or trace reports)',
    );
    expect(() => compare({ a: { name: 'gen.json', report: { schema: 'ringside-generation/1' } }, b: probe })).toThrow(
      /^A \(gen\.json\) is neither a logit-trace TSV nor a Ringside probe or trace report/,
    );
    expect(() => compare({ a: { name: 'notes.tsv', tsv: 'hello\tworld\n' }, b: TSVS.b })).toThrow(
      /notes\.tsv line 1: 2 tab-separated fields, expected 6/,
    );
  });

  it('a file: JSON is a report, anything else a TSV; broken JSON is named', () => {
    expect(fileSource('a.tsv', '#model\tx\n0\t0\t1\t2.0\t1,2\t3.0,2.0\n')).toEqual({
      name: 'a.tsv',
      tsv: '#model\tx\n0\t0\t1\t2.0\t1,2\t3.0,2.0\n',
    });
    expect(fileSource('r.json', ' {"kind": "probe"}')).toEqual({ name: 'r.json', report: { kind: 'probe' } });
    expect(() => fileSource('r.json', '{"kind": ')).toThrow(/^r\.json starts like JSON but is not valid JSON/);
  });
});

describe('a comparison as a document', () => {
  it('carries both inputs and the judgement; read back, it compares to the same', () => {
    const input: CompareInput = { ...TSVS, arms: { a: 'chain', b: 'block' }, decidedGap: 1.5 };
    const c = compare(input);
    const doc = JSON.parse(JSON.stringify(comparisonDocument(input, c, '2026-12-07T05:00:00.000Z')));
    expect(doc.schema).toBe('ringside-comparison/1');
    expect(doc.judgement).toEqual(c.kind === 'traces' && c.judgement);
    const again = readComparisonDocument(doc);
    expect(again).toEqual(input);
    expect(compare(again)).toEqual(c);
  });

  it('refuses a document that does not hold two inputs', () => {
    expect(() => readComparisonDocument({ schema: 'ringside-comparison/1', a: { name: 'x' }, b: TSVS.b })).toThrow(
      "a must hold a TSV's text (tsv) or a report (report)",
    );
    expect(() =>
      readComparisonDocument({ ...TSVS, schema: 'ringside-comparison/1', arms: { a: 'left', b: 'block' } }),
    ).toThrow('arms.a must be "chain" or "block"');
  });
});
