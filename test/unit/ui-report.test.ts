/**
 * The page's pure report modules in Node: reading untrusted reports, heatmap grids, lens points, ring
 * facts, share-link encoding, Markdown and formatting. DOM rendering is covered in test/e2e.
 */
import { describe, expect, it } from 'vitest';
import { deflateSync } from 'fflate';
import { divergingReport, equalReport, craftedReport, XSS } from '../e2e/sample-report.ts';
import { sampleTrace } from '../e2e/sample-trace.ts';
import {
  readReport,
  normalizeReport,
  defaultDetailDraw,
  firstDivergenceOf,
  longRing,
  LIMITS,
} from '../../src/ui/report/report-model.ts';
import { buildHeatmap, bytesLevel, heatColor, EQUAL_COLOR, pickRows } from '../../src/ui/report/heatmap-model.ts';
import { lensPoints } from '../../src/ui/report/lens-chart.ts';
import { ringFacts, describeRing } from '../../src/ui/report/ring-view.ts';
import {
  decodeShareFragment,
  encodeShareFragment,
  mdEscape,
  reportFileStem,
  reportMarkdown,
  toBase64Url,
  MAX_REPORT_BYTES,
} from '../../src/ui/share/share-codec.ts';
import { fmtBytes, fmtInt, fmtMs, fmtSci, num, parseLengths, shortDigest } from '../../src/ui/common/format.ts';
import { validateReport } from '../../src/parity/report.ts';

describe('sample reports follow the schema', () => {
  it('validate with no problems', () => {
    expect(validateReport(equalReport())).toEqual([]);
    expect(validateReport(divergingReport())).toEqual([]);
    expect(validateReport(craftedReport())).toEqual([]); // the validator checks shape, not every leaf
  });
});

describe('a report whose verdict badge contradicts its own results is refused', () => {
  it('probe: the verdict must be the one its draws give; trace: the one its rows give', () => {
    // Every other contradiction has its test in report-consistency.test.ts.
    const lie = { ...divergingReport(), verdict: 'equal' };
    expect(validateReport(lie)).toEqual([
      'verdict: "equal", but draws[3] diverges (rows[0]: 411230 of 524288 bytes differ)',
    ]);
    const trace = sampleTrace();
    expect(trace.verdict).toBe('diverges');
    const flipped = { ...trace, verdict: 'equal' };
    expect(validateReport(trace)).toEqual([]);
    expect(validateReport(flipped)).toEqual([
      `verdict: "equal", but 256 of 256 rows differ (positions[0].bytesDiffering: ${trace.positions[0].bytesDiffering})`,
    ]);
  });

  it('a generation result is named as such, not listed field by field', () => {
    expect(validateReport({ schema: 'ringside-generation/1', classic: {}, mtp: {} })).toEqual([
      'this is a generation result (schema "ringside-generation/1"): the viewer opens probe and trace reports; a generation is shown where it is run',
    ]);
  });
});

describe('readReport', () => {
  it("returns the validator's problems for invalid input", () => {
    const r = readReport({ schema: 'x' });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.problems.join('\n')).toMatch(/schema must be "ringside-report\/1"/);
    expect(readReport(null)).toEqual({ ok: false, problems: ['report is not a JSON object'] });
  });

  it('keeps a valid report as it is', () => {
    const src = divergingReport();
    const r = readReport(JSON.parse(JSON.stringify(src)));
    expect(r.ok).toBe(true);
    if (r.ok) expect(r.report).toEqual(src);
  });

  it('coerces a crafted report: strings kept verbatim, non-numbers become NaN, unknown stages dropped', () => {
    const r = readReport(craftedReport());
    if (!r.ok) throw new Error(r.problems.join());
    const rep = r.report;
    expect(rep.summary).toBe(`summary ${XSS}`);
    expect(rep.provenance.target.layers).toBeNaN();
    expect(rep.draws[0].rows[0].maxAbs).toBeNaN();
    expect(rep.draws[0].rows[0].position).toBeNaN();
    const long = rep.draws[3];
    expect(
      long.stages!.every((s) => ['q', 'k', 'v', 'attn', 'mlp', 'layer', 'final_norm', 'logits'].includes(s.stage)),
    ).toBe(true);
    expect(long.stages![0].layerKind).toBeNull();
    expect(long.ring!.blockOrder).toBe('masked-chronological');
    expect(long.ring!.slotPositions[0]).toBeNaN();
    expect(long.lens![0].rows[0].kl).toBeNaN();
  });

  it('caps sizes a crafted report could use to freeze the page', () => {
    // The normalizer's caps, past validation (which refuses a draw of 10,000 rows under K = 4 on its own).
    const x = divergingReport(4, 12, 16) as unknown as { draws: Record<string, unknown>[] };
    x.draws[3].ring = { ...(x.draws[3].ring as object), window: 1e9, slotPositions: [] };
    x.draws[3].rows = Array.from({ length: 10_000 }, (_, i) => ({ position: i }));
    const r = normalizeReport(x);
    expect(r.draws[3].ring).toBeUndefined();
    expect(r.draws[3].rows.length).toBe(LIMITS.rows);
    expect(readReport(x).ok).toBe(false);
  });

  it('picks the draw, the first divergence and the long ring the views start on', () => {
    const d = divergingReport();
    expect(defaultDetailDraw(d)).toBe(3);
    expect(firstDivergenceOf(d)?.fd.text).toBe('first divergence: layer 0 (sliding) attention output at position 0');
    expect(longRing(d)?.draw.promptLength).toBe(1056);
    expect(defaultDetailDraw(equalReport())).toBe(3);
    expect(firstDivergenceOf(equalReport())).toBeUndefined();
  });
});

describe('heatmap grid', () => {
  const rep = divergingReport(4, 48, 1024);
  const long = rep.draws[3];

  it('has one column per layer plus head, stages in execution order, kinds marked', () => {
    const g = buildHeatmap(long.stages!, 0, 'bytes', long.firstDivergence);
    expect(g.columns.length).toBe(49);
    expect(g.columns[48]).toEqual({ layer: null, kind: null, label: 'head' });
    expect(g.columns[5].kind).toBe('full');
    expect(g.columns[0].kind).toBe('sliding');
    expect(g.stages).toEqual(['q', 'k', 'v', 'attn', 'mlp', 'layer', 'final_norm', 'logits']);
    expect(g.cells.length).toBe(48 * 6 + 2);
    expect(g.positions).toEqual([0, 1, 2, 3]);
    // Final stages sit only in the head column.
    expect(g.at(48, 6)?.stage).toBe('final_norm');
    expect(g.at(0, 6)).toBeUndefined();
  });

  it('marks the first divergence (at its position or over all) and leaves equal cells neutral', () => {
    const g = buildHeatmap(long.stages!, 0, 'bytes', long.firstDivergence);
    const first = g.cells.filter((c) => c.first);
    expect(first.map((c) => [c.layer, c.stage])).toEqual([[0, 'attn']]);
    expect(g.at(0, 0)?.level).toBe(0);
    expect(heatColor(g.at(0, 0)!.level)).toBe(EQUAL_COLOR);
    expect(g.at(0, 3)!.level).toBeGreaterThan(0);
    expect(buildHeatmap(long.stages!, 'all', 'bytes', long.firstDivergence).cells.some((c) => c.first)).toBe(true);
    expect(buildHeatmap(long.stages!, 2, 'bytes', long.firstDivergence).cells.some((c) => c.first)).toBe(false);
  });

  it('aggregates positions: bytes summed, maxima taken', () => {
    const rows = [
      { position: 0, bytesDiffering: 1, bytesTotal: 10, maxAbs: 0.5, maxUlp: 3, nmse: 1e-9 },
      { position: 1, bytesDiffering: 4, bytesTotal: 10, maxAbs: 0.25, maxUlp: 9, nmse: 1e-8 },
    ];
    expect(pickRows(rows, 'all')).toMatchObject({
      bytesDiffering: 5,
      bytesTotal: 20,
      maxAbs: 0.5,
      maxUlp: 9,
      nmse: 1e-8,
    });
    expect(pickRows(rows, 1)).toMatchObject({ position: 1, bytesDiffering: 4 });
    expect(pickRows(rows, 7)).toBeUndefined();
  });

  it('colours bytes on a floored square-root scale and ULPs relative to the grid maximum', () => {
    expect(bytesLevel(0, 100)).toBe(0);
    expect(bytesLevel(100, 100)).toBe(1);
    expect(bytesLevel(1, 1e6)).toBeGreaterThanOrEqual(0.15);
    expect(bytesLevel(40, 100) - bytesLevel(15, 100)).toBeGreaterThan(0.15);
    const g = buildHeatmap(long.stages!, 'all', 'ulp', long.firstDivergence);
    expect(Math.max(...g.cells.map((c) => c.level))).toBe(1);
    expect(g.cells.every((c) => c.level >= 0 && c.level <= 1)).toBe(true);
  });

  it('a Qwen3.5 hybrid report keeps its linear layers and Gated DeltaNet stages (rows of their own)', () => {
    // qwen-tiny's shape: layers 0, 1 linear, 2 full; the first divergence in layer 0's recurrence at row 1
    const row = (position: number, bad: boolean) => ({
      position,
      bytesDiffering: bad ? 7 : 0,
      bytesTotal: 64,
      maxAbs: bad ? 1e-6 : 0,
      maxUlp: bad ? 3 : 0,
      nmse: 0,
    });
    const linear = ['proj', 'conv', 'recurrence', 'gated_norm', 'out', 'mlp', 'layer'];
    const stages = [0, 1, 2].flatMap((layer) =>
      (layer === 2 ? ['q', 'k', 'v', 'attn', 'mlp', 'layer'] : linear).map((stage) => ({
        layer,
        layerKind: layer === 2 ? 'full' : 'linear',
        stage,
        rows: [row(0, false), row(1, layer > 0 || !['proj', 'conv'].includes(stage))],
      })),
    );
    stages.push(
      ...(['final_norm', 'logits'].map((stage) => ({
        layer: null,
        layerKind: null,
        stage,
        rows: [row(0, false), row(1, true)],
      })) as never[]),
    );
    // K = 2, on the diverging long draw: a report's first divergence must be the first stage that differs
    const rep = structuredClone(divergingReport(2, 3, 1024)) as unknown as Record<string, unknown> & {
      draws: Record<string, unknown>[];
    };
    const first = {
      layer: 0,
      layerKind: 'linear',
      stage: 'recurrence',
      position: 1,
      text: 'first divergence: layer 0 (linear) recurrence (o = S q) at position 1',
    };
    Object.assign(rep.draws[3], { stages, firstDivergence: first });
    const read = readReport(rep);
    if (!read.ok) throw new Error(read.problems.join('; '));
    const d = read.report.draws[3];
    expect(d.stages!.length).toBe(stages.length);
    expect(d.firstDivergence).toEqual(first);
    const g = buildHeatmap(d.stages!, 'all', 'bytes', d.firstDivergence);
    expect(g.columns.map((c) => c.kind)).toEqual(['linear', 'linear', 'full', null]);
    expect(g.stages).toEqual([
      'q',
      'k',
      'v',
      'attn',
      'proj',
      'conv',
      'recurrence',
      'gated_norm',
      'out',
      'mlp',
      'layer',
      'final_norm',
      'logits',
    ]);
    expect(g.cells.length).toBe(stages.length);
    expect(g.cells.filter((c) => c.first).map((c) => [c.layer, c.stage])).toEqual([[0, 'recurrence']]);
  });
});

describe('lens points and ring facts', () => {
  it('takes the largest KL and requires every picked position to agree', () => {
    const lens = [
      {
        layer: 1,
        rows: [
          { position: 0, kl: 1e-6, top1Agree: true },
          { position: 1, kl: 1e-3, top1Agree: false },
        ],
      },
      { layer: 0, rows: [{ position: 0, kl: 0, top1Agree: true }] },
    ];
    expect(lensPoints(lens, 'all')).toEqual([
      { layer: 0, kl: 0, agree: true },
      { layer: 1, kl: 1e-3, agree: false },
    ]);
    expect(lensPoints(lens, 0)).toEqual([
      { layer: 0, kl: 0, agree: true },
      { layer: 1, kl: 1e-6, agree: true },
    ]);
  });

  it('finds where chronological order wraps and what each arm reads', () => {
    const ring = divergingReport(4, 12, 16).draws[3].ring!; // P = 48, W = 16
    const f = ringFacts(ring);
    expect(f.filled).toBe(16);
    expect([f.minPos, f.maxPos]).toEqual([32, 47]);
    expect(f.blockPositions).toEqual([48, 49, 50, 51]);
    expect(f.physical.slice(0, 5)).toEqual([48, 49, 50, 51, 36]);
    expect(f.chronological).toEqual(Array.from({ length: 16 }, (_, i) => 36 + i));
    const big = ringFacts(divergingReport().draws[3].ring!); // P = 1056, W = 1024
    expect(big.oldestSlot).toBe(32);
    expect(describeRing(divergingReport().draws[3].ring!, big)).toMatch(
      /oldest in slot 32.*wraps at slot 32.*chronological order over the buffered cache/,
    );
  });
});

describe('share link codec', () => {
  it('round-trips a report through #report=base64url(deflate(JSON))', () => {
    const r = divergingReport();
    const frag = encodeShareFragment(r);
    expect(frag).toMatch(/^report=[A-Za-z0-9_-]+$/);
    expect(decodeShareFragment(`#${frag}`)).toEqual(r);
    expect(decodeShareFragment('#other=1')).toBeUndefined();
    expect(decodeShareFragment('')).toBeUndefined();
  });

  it('says what is wrong with a damaged link', () => {
    expect(() => decodeShareFragment('#report=ab$cd')).toThrow(/damaged.*base64url/);
    expect(() =>
      decodeShareFragment(`#report=${toBase64Url(new TextEncoder().encode('not deflate at all, just text'))}`),
    ).toThrow(/damaged/);
    expect(() =>
      decodeShareFragment(`#report=${toBase64Url(deflateSync(new TextEncoder().encode('{"a": ')))}`),
    ).toThrow(/not JSON/);
  });

  it('refuses a deflate bomb before it fills memory', () => {
    const bomb = deflateSync(new Uint8Array(MAX_REPORT_BYTES + 1024).fill(32), { level: 9 });
    expect(() => decodeShareFragment(`#report=${toBase64Url(bomb)}`)).toThrow(/more than 33\.6 MB/);
  });

  it('writes Markdown with markup escaped and a safe file stem', () => {
    const crafted = readReport(craftedReport());
    if (!crafted.ok) throw new Error(crafted.problems.join());
    const md = reportMarkdown(crafted.report, 'http://127.0.0.1/#report=abc');
    expect(md).toMatch(/^### Ringside block-versus-chain probe: \*\*DIVERGES\*\*/);
    expect(md).not.toMatch(/(?<!\\)</);
    expect(md).toContain('[Open the full report](http://127.0.0.1/#report=abc)');
    expect(mdEscape('a|b <c> [d](e)')).toBe('a\\|b \\<c\\> \\[d\\](e)');
    expect(reportFileStem(divergingReport())).toBe('ringside-diverges-mlx-metal-bf16-K4-3f2a9c1d7e5b');
    expect(reportFileStem(crafted.report)).toMatch(/^ringside-diverges-[a-z0-9-]+-bf16-K4-3f2a9c1d7e5b$/);
  });
});

describe('formatting', () => {
  it('prints numbers the same everywhere and dashes for non-numbers', () => {
    expect(fmtInt(524288)).toBe('524,288');
    expect(fmtInt(NaN)).toBe('—');
    expect(num('<b>1</b>')).toBeNaN();
    expect(fmtBytes(6_700_000_000)).toBe('6.70 GB');
    expect(fmtBytes(549139)).toBe('549 kB');
    expect(fmtMs(17_912)).toBe('17.9 s');
    expect(fmtSci(0)).toBe('0');
    expect(fmtSci(3.2e-6)).toBe('3.20e-6');
    expect(fmtSci(0.125)).toBe('0.125');
    expect(shortDigest('3F2A9C1D7E5B4A6F')).toBe('3f2a9c1d7e5b');
    expect(shortDigest('<script>')).toBe('c');
  });

  it('parses draw lengths', () => {
    expect(parseLengths('  ')).toBeUndefined();
    expect(parseLengths('8, 8 8,1056')).toEqual([8, 8, 8, 1056]);
    expect(() => parseLengths('8, x')).toThrow(/whole numbers/);
    expect(() => parseLengths('0')).toThrow(/whole numbers/);
  });
});
