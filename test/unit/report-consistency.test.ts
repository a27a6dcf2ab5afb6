/**
 * A report that contradicts itself is refused, naming the field: each verdict and counter a report stores is
 * derived again from its draws, rows and positions (src/parity/report-consistency.ts). One test per crafted
 * contradiction that used to be accepted, then one per derived rule; the sample reports (shaped like the engine's,
 * the trace's metrics computed by traceMetrics) and a share link's compacted trace still validate.
 */
import { describe, expect, it } from 'vitest';
import { divergingReport, equalReport } from '../e2e/sample-report.ts';
import { asJson, sampleTrace } from '../e2e/sample-trace.ts';
import { MAX_PROBLEMS, validateReport } from '../../src/parity/report.ts';
import { DECIDED_GAP } from '../../src/parity/trace-thresholds.ts';
import { traceMetrics, traceVerdict } from '../../src/parity/trace.ts';
import { compactTrace } from '../../src/ui/share/share-link.ts';
import { readAnyReport } from '../../src/ui/report/read-report.ts';

// crafted reports are edited field by field, as a user would
type Crafted = Record<string, any>;
const probe = (r: unknown): Crafted => asJson(r) as Crafted;
const ROW = 262144 * 2; // the samples' bf16 logits row of a 262,144-token vocabulary

const FD = {
  layer: 0,
  layerKind: 'sliding',
  stage: 'attn',
  position: 0,
  text: 'first divergence: layer 0 (sliding) attention output at position 0',
};

describe('the contradictions a crafted report used to get past', () => {
  it('probe "equal", every draw "equal", bytesDiffering == bytesTotal and a firstDivergence', () => {
    // every row of draw 2 differs in all its bytes, yet every verdict says equal
    const r = probe(equalReport());
    const d = r.draws[2];
    for (const row of d.rows) row.bytesDiffering = row.bytesTotal;
    d.bytesDiffering = d.bytesTotal;
    d.firstDivergence = FD;
    expect(validateReport(r)).toEqual([
      `draws[2].rows[0].bytesDiffering: ${ROW} of ${ROW} bytes differ but the draw says "equal"`,
      'draws[2].position: null, but the first row that differs is rows[0]',
      `verdict: "equal", but draws[2] diverges (rows[0]: ${ROW} of ${ROW} bytes differ)`,
    ]);
    // the same with the rows left equal: the draw's own counters and its first divergence contradict its rows
    const s = probe(equalReport());
    s.draws[2].bytesDiffering = s.draws[2].bytesTotal;
    s.draws[2].firstDivergence = FD;
    expect(validateReport(s)).toEqual([
      `draws[2].bytesDiffering: ${ROW}, but no row differs (0)`,
      'draws[2].firstDivergence: present, but no row of the draw differs',
    ]);
  });

  it('probe "equal" with no draws, and a draw with no rows', () => {
    const r = probe(equalReport());
    r.draws = [];
    r.provenance.drawLengths = [];
    expect(validateReport(r)).toEqual(['draws: none; a probe compares at least one draw, so its verdict says nothing']);
    const s = probe(equalReport());
    s.draws[1].rows = [];
    expect(validateReport(s)).toEqual([
      'draws[1].rows: none; a draw compares at least one verify row, so its verdict says nothing',
    ]);
  });

  it('a trace marked "equal" whose positions all disagree', () => {
    const t = probe(sampleTrace({ equal: true, traced: 8 }));
    for (const p of t.positions) {
      p.agree = false;
      p.blockTop = [p.chainTop[1], p.chainTop[0], ...p.chainTop.slice(2)];
    }
    const problems = validateReport(t);
    for (let i = 0; i < 8; i++)
      expect(problems).toContain(
        `positions[${i}].agree: false (the top-1 tokens differ), but bytesDiffering is 0 (the rows are equal)`,
      );
    expect(problems).toContain('metrics.top1Disagreements: 0, but 8 of 8 positions have agree false');
    // the same positions with bytes that differ, under the equal run's metrics and verdict
    const u = probe(sampleTrace({ equal: true, traced: 8 }));
    u.positions.forEach((p: Crafted, i: number) => {
      p.agree = false;
      p.blockTop = [p.chainTop[1]];
      p.bytesDiffering = 1000 + i;
    });
    expect(validateReport(u)).toEqual(
      expect.arrayContaining([
        'metrics.rowsByteEqual: 8, but 0 of 8 positions have bytesDiffering 0',
        'metrics.top1Disagreements: 0, but 8 of 8 positions have agree false',
        'verdict: "equal", but 8 of 8 rows differ (positions[0].bytesDiffering: 1000)',
      ]),
    );
  });

  it('a trace whose metrics.rowsByteEqual is a string', () => {
    const t = probe(sampleTrace({ traced: 16 }));
    expect(t.verdict).toBe('diverges');
    t.verdict = 'equal';
    t.metrics.rowsByteEqual = '16';
    expect(validateReport(t)).toEqual([
      'metrics.rowsByteEqual must be a count (found "16")',
      `verdict: "equal", but 16 of 16 rows differ (positions[0].bytesDiffering: ${t.positions[0].bytesDiffering})`,
    ]);
  });
});

describe('a probe draw: verdict and counters from its rows', () => {
  it('a draw "diverges" whose rows are all equal, and a report "diverges" whose draws all are', () => {
    const r = probe(equalReport());
    r.draws[0].verdict = 'diverges';
    r.verdict = 'diverges';
    expect(validateReport(r)).toEqual([
      'draws[0].verdict: "diverges", but no row differs (every rows[j].bytesDiffering is 0)',
      'verdict: "diverges", but every row of all 4 draws is byte-equal',
    ]);
  });

  it('position and bytesDiffering are the first differing row and its count', () => {
    const r = probe(divergingReport());
    r.draws[3].position = 2;
    r.draws[3].bytesDiffering = 7;
    expect(validateReport(r)).toEqual([
      'draws[3].position: 2, but the first row that differs is rows[0]',
      'draws[3].bytesDiffering: 7, but the first row that differs (rows[0]) has 411230',
    ]);
  });

  it('row counts must be counts, within the row, and of the row size the draw states', () => {
    const r = probe(divergingReport());
    r.draws[3].rows[1].bytesDiffering = '411230';
    r.draws[3].rows[2].bytesDiffering = ROW + 1;
    r.draws[0].rows[3].bytesTotal = 4096;
    expect(validateReport(r)).toEqual([
      `draws[0].rows[3].bytesTotal: 4096, but draws[0].bytesTotal says rows of ${ROW} bytes`,
      'draws[3].rows[1].bytesDiffering must be a count of bytes (found "411230")',
      `draws[3].rows[2].bytesDiffering: ${ROW + 1} bytes differ in a row of ${ROW}`,
    ]);
  });

  it('K rows per draw and one draw per provenance.drawLengths entry, of that prompt length', () => {
    const r = probe(equalReport());
    r.draws[1].rows.pop();
    r.draws[2].promptLength = 9;
    expect(validateReport(r)).toEqual([
      'draws[1].rows: 3 rows, but provenance.block says K = 4',
      'draws[2].promptLength: 9, but provenance.drawLengths[2] is 8',
    ]);
    r.draws[1].rows.push({ ...r.draws[1].rows[0], position: 3 });
    r.draws[2].promptLength = 8;
    r.provenance.drawLengths.push(16);
    expect(validateReport(r)).toEqual(['provenance.drawLengths: 5 lengths for 4 draws']);
  });

  it('the first divergence is the first stage, in order, with a row that differs, at that row', () => {
    const r = probe(divergingReport());
    expect(validateReport(r)).toEqual([]);
    const first = r.draws[3].stages.findIndex((s: Crafted) => s.rows.some((x: Crafted) => x.bytesDiffering > 0));
    expect(r.draws[3].stages[first]).toMatchObject({ layer: 0, stage: 'attn' });
    r.draws[3].firstDivergence = { ...FD, layer: 40, stage: 'mlp', position: 2 };
    expect(validateReport(r)).toEqual([
      `draws[3].firstDivergence: layer 40 mlp at position 2, but the first stage that differs is layer 0 attn at position 0 (draws[3].stages[${first}].rows[0])`,
    ]);
    r.draws[3].firstDivergence = null;
    expect(validateReport(r)).toEqual([
      `draws[3].firstDivergence: null, but the first stage that differs is layer 0 attn at position 0 (draws[3].stages[${first}].rows[0])`,
    ]);
    // without stages (localization off) only its position is checked: a row of the block
    r.draws[3].firstDivergence = { ...FD, position: 4 };
    delete r.draws[3].stages;
    expect(validateReport(r)).toEqual(["draws[3].firstDivergence.position: 4 is outside the draw's 4 rows"]);
  });

  it('lists at most MAX_PROBLEMS problems and says how many more', () => {
    const r = probe(equalReport());
    r.draws[3].rows = Array.from({ length: 1000 }, (_, j) => ({ position: j, bytesDiffering: 'x', bytesTotal: ROW }));
    const problems = validateReport(r);
    expect(problems).toHaveLength(MAX_PROBLEMS);
    expect(problems[0]).toBe('draws[3].rows[0].bytesDiffering must be a count of bytes (found "x")');
    expect(problems.at(-1)).toBe(`and ${1000 - MAX_PROBLEMS + 1} more problems`);
  });
});

describe('a trace: metrics and verdict from its positions', () => {
  it('positions, traced and the top-1 flag must match the positions listed', () => {
    const t = probe(sampleTrace({ traced: 16, disagreeAt: [3] }));
    expect(validateReport(t)).toEqual([]);
    t.positions.pop();
    expect(validateReport(t)).toEqual(
      expect.arrayContaining([
        'metrics.positions: 16, but the report lists 15 positions',
        'provenance.traced: 16, but the report lists 15 positions',
      ]),
    );
    const u = probe(sampleTrace({ traced: 16, disagreeAt: [3] }));
    u.positions[5].agree = false;
    u.positions[3].agree = true;
    // (the gap buckets' disagreement counts move with the flags too)
    expect(validateReport(u)).toEqual(
      expect.arrayContaining([
        `positions[3].agree: true, but chainTop[0].id is ${u.positions[3].chainTop[0].id} and blockTop[0].id is ${u.positions[3].blockTop[0].id}`,
        `positions[5].agree: false, but chainTop[0].id is ${u.positions[5].chainTop[0].id} and blockTop[0].id is ${u.positions[5].blockTop[0].id}`,
      ]),
    );
  });

  it('decided positions and gap buckets are counted from the gaps', () => {
    const t = probe(sampleTrace({ traced: 64, disagreeAt: [4, 7] }));
    expect(t.metrics.decidedDisagreements).toBe(1);
    t.metrics.decidedDisagreements = 0;
    t.metrics.decidedPositions += 1;
    t.metrics.buckets[0].positions += 1;
    const { lo, hi } = t.metrics.buckets[0];
    expect(validateReport(t)).toEqual([
      `metrics.decidedPositions: ${t.metrics.decidedPositions}, but ${t.metrics.decidedPositions - 1} positions have gap >= ${DECIDED_GAP}`,
      `metrics.decidedDisagreements: 0, but 1 positions with gap >= ${DECIDED_GAP} have agree false`,
      `metrics.buckets[0].positions: ${t.metrics.buckets[0].positions}, but ${t.metrics.buckets[0].positions - 1} positions have a gap in [${lo}, ${hi})`,
    ]);
    const u = probe(sampleTrace({ traced: 8 }));
    u.metrics.buckets = 'none';
    expect(validateReport(u)).toEqual(['metrics.buckets must be an array (found "none")']);
  });

  it('a gap a share link rounded onto a boundary may count either side of it', () => {
    const t = probe(sampleTrace({ traced: 8 }));
    // the engine's gap just under the decided boundary; the link's 7 digits round it onto the boundary
    t.positions[2].gap = DECIDED_GAP * (1 - 1e-8);
    Object.assign(t, traceVerdict(traceMetrics(t.positions)), { metrics: traceMetrics(t.positions) });
    expect(validateReport(t)).toEqual([]);
    const link = compactTrace(t) as Crafted;
    expect(link.positions[2].gap).toBe(DECIDED_GAP);
    expect(validateReport(link)).toEqual([]);
    // but not a gap a long way over it
    link.positions[2].gap = 3;
    expect(validateReport(link)).toEqual(
      expect.arrayContaining([
        `metrics.decidedPositions: ${t.metrics.decidedPositions}, but ${t.metrics.decidedPositions + 1} positions have gap >= ${DECIDED_GAP}`,
      ]),
    );
  });

  it('a trace "diverges" whose rows are all byte-equal, and one with no positions', () => {
    const t = probe(sampleTrace({ equal: true, traced: 8 }));
    t.verdict = 'diverges';
    expect(validateReport(t)).toEqual([
      'verdict: "diverges", but all 8 rows are byte-equal (every bytesDiffering is 0)',
    ]);
    const u = probe(sampleTrace({ equal: true, traced: 8 }));
    u.positions = [];
    u.metrics = traceMetrics([]);
    u.provenance.traced = 0;
    expect(validateReport(u)).toEqual([
      'positions: none; a trace compares at least one position, so its verdict says nothing',
    ]);
  });
});

describe('the page refuses what the validator refuses', () => {
  it('a contradictory share link or file does not render', () => {
    const r = probe(equalReport());
    r.draws[0].rows[2].bytesDiffering = 4096;
    const read = readAnyReport(r);
    expect(read.ok).toBe(false);
    if (!read.ok)
      expect(read.problems).toContain(
        `draws[0].rows[2].bytesDiffering: 4096 of ${ROW} bytes differ but the draw says "equal"`,
      );
  });
});
