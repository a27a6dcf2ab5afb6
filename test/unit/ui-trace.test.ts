/**
 * The page's pure trace and generation modules in Node: reading untrusted trace reports, the share link's
 * size rules (compaction, refusal), Markdown and file names, trace defaults, token-id prompts and the
 * generation verdict. DOM rendering is covered in test/e2e/trace.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { asJson, sampleTrace } from '../e2e/sample-trace.ts';
import { divergingReport } from '../e2e/sample-report.ts';
import { readAnyReport } from '../../src/ui/report/read-report.ts';
import { readReport } from '../../src/ui/report/report-model.ts';
import {
  bucketLabel,
  DECIDED_GAP,
  disagreements,
  traceConsequence,
  traceSetup,
  TRACE_LIMITS,
} from '../../src/ui/trace/trace-model.ts';
import { DECIDED_GAP as PARITY_DECIDED_GAP } from '../../src/parity/trace.ts';
import { buildShareLink, compactTrace, MAX_LINK_CHARS } from '../../src/ui/share/share-link.ts';
import { decodeShareFragment, traceFileStem, traceMarkdown } from '../../src/ui/share/share-codec.ts';
import { traceDefaults } from '../../src/ui/run/trace-form.ts';
import { parseTokenIds } from '../../src/ui/common/format.ts';
import {
  generationFileStem,
  generationJson,
  generationVerdict,
  histogramBars,
  perPositionBars,
  tokenMarks,
  type GenerationRun,
} from '../../src/ui/generation/generation-model.ts';
import { validateReport } from '../../src/parity/report.ts';
import { XSS } from '../e2e/sample-report.ts';

const BASE = 'http://127.0.0.1:5173/';

describe('reading trace reports', () => {
  it('the sample traces follow the schema', () => {
    expect(validateReport(sampleTrace())).toEqual([]);
    expect(validateReport(sampleTrace({ equal: true }))).toEqual([]);
  });

  it('keeps a valid trace as it is, and dispatches probes and traces by kind', () => {
    const t = asJson(sampleTrace({ prefix: 40, traced: 48, disagreeAt: [3, 10] }));
    const r = readAnyReport(t);
    expect(r.ok && r.kind).toBe('trace');
    if (r.ok && r.kind === 'trace') expect(r.report).toEqual(t);
    const p = readAnyReport(asJson(divergingReport()));
    expect(p.ok && p.kind).toBe('probe');
    // The probe-only reader says what it got instead of rendering a trace as an empty probe.
    const q = readReport(t);
    expect(q.ok).toBe(false);
    if (!q.ok) expect(q.problems[0]).toMatch(/"trace" report, not a probe report/);
  });

  it('coerces a crafted trace: strings verbatim, non-numbers NaN, sizes capped', () => {
    const t = asJson(sampleTrace({ traced: 8 })) as unknown as Record<string, any>;
    t.summary = `summary ${XSS}`;
    t.positions[0].deltaChosen = '1e9';
    t.positions[0].chainTop = Array.from({ length: 1000 }, (_, i) => ({ id: i, logit: 1 }));
    t.metrics.deltaLogit.max = { x: 1 };
    t.provenance.prefix = -3;
    const r = readAnyReport(t);
    if (!r.ok || r.kind !== 'trace') throw new Error('not read');
    expect(r.report.summary).toBe(`summary ${XSS}`);
    expect(r.report.positions[0].deltaChosen).toBeNaN();
    expect(r.report.positions[0].chainTop.length).toBe(TRACE_LIMITS.topK);
    expect(r.report.metrics.deltaLogit.max).toBeNaN();
    expect(r.report.provenance.prefix).toBeNaN();
  });

  it("refuses a trace whose positions are malformed, with the validator's words", () => {
    const t = asJson(sampleTrace({ traced: 4 })) as unknown as Record<string, any>;
    t.positions[2] = { position: 'x' };
    const r = readAnyReport(t);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.problems).toContain('positions[2] invalid');
  });

  it('says what the verdict means and how the trace was set up', () => {
    expect(DECIDED_GAP).toBe(PARITY_DECIDED_GAP);
    expect(traceConsequence(sampleTrace({ equal: true }))).toMatch(/byte for byte/);
    expect(traceConsequence(sampleTrace({ traced: 32 }))).toMatch(/agrees at every traced position/);
    const nearTie = sampleTrace({ traced: 64, disagreeAt: [4] });
    expect(nearTie.metrics.decidedDisagreements).toBe(0);
    expect(traceConsequence(nearTie)).toMatch(/near ties/);
    const decided = sampleTrace({ traced: 64, disagreeAt: [4, 7] });
    expect(decided.metrics.decidedDisagreements).toBeGreaterThan(0);
    expect(traceConsequence(decided)).toMatch(/decided position/);
    expect(disagreements(decided).map((p) => p.position)).toEqual([1536 + 4, 1536 + 7]);
    expect(traceSetup(sampleTrace({ prefix: 40, traced: 48, policy: 'exact' }))).toBe(
      '48 traced positions after a prefix of 40 tokens · K = 4 · policy exact · bf16',
    );
    expect(bucketLabel({ lo: 10, hi: null })).toBe('[10, ∞)');
    expect(bucketLabel({ lo: 0.5, hi: 1 })).toBe('[0.5, 1)');
  });
});

describe('trace share links, Markdown and file names', () => {
  it('a trace of the usual size travels whole in the link and decodes to the same JSON', () => {
    const t = asJson(sampleTrace({ traced: 96, disagreeAt: [5] }));
    const l = buildShareLink(t, BASE);
    if (!l.ok) throw new Error(l.message);
    expect(l.compacted).toBe(false);
    expect(l.link.length).toBeLessThanOrEqual(MAX_LINK_CHARS);
    expect(decodeShareFragment(l.link.slice(BASE.length))).toEqual(t);
  });

  it('a long trace is compacted to fit, keeps every position and what the view shows, and says so', () => {
    const t = asJson(sampleTrace({ traced: 700, disagreeAt: [5, 6, 300] }));
    const l = buildShareLink(t, BASE);
    if (!l.ok) throw new Error(l.message);
    expect(l.compacted).toBe(true);
    expect(l.link.length).toBeLessThanOrEqual(MAX_LINK_CHARS);
    const back = decodeShareFragment(l.link.slice(BASE.length)) as Record<string, any>;
    expect(back.linkCompacted).toBe(true);
    expect(validateReport(back)).toEqual([]);
    const r = readAnyReport(back);
    if (!r.ok || r.kind !== 'trace') throw new Error('not read');
    expect(r.report.linkCompacted).toBe(true);
    expect(r.report.positions.length).toBe(700);
    expect(r.report.metrics).toEqual(t.metrics);
    expect(r.report.positions[5].chainTop.length).toBe(2);
    expect(r.report.positions[5].blockTop.length).toBe(1);
    expect(r.report.positions[5].agree).toBe(false);
    expect(r.report.positions[9].gap).toBeCloseTo(t.positions[9].gap, 5);
  });

  it('a report too large even compacted gets no link and a message that says what to do', () => {
    const t = asJson(sampleTrace({ traced: 4096 }));
    const l = buildShareLink(t, BASE);
    expect(l.ok).toBe(false);
    if (!l.ok) {
      expect(l.chars).toBeGreaterThan(MAX_LINK_CHARS);
      expect(l.message).toMatch(
        /too large for a link \([\d,]+ characters even compressed; links stop at 65,536\).*Download JSON.*Open a report \(JSON\)/,
      );
    }
    // Compaction leaves non-trace reports alone.
    expect(
      compactTrace({ kind: 'trace', positions: [{ gap: 1.23456789012, chainTop: [1, 2, 3], blockTop: [4, 5] }] })
        .positions,
    ).toEqual([{ gap: 1.234568, chainTop: [1, 2], blockTop: [4] }]);
  });

  it('writes Markdown with the metrics and buckets, markup escaped, and a safe file stem', () => {
    const t = sampleTrace({ prefix: 40, traced: 48, disagreeAt: [3] });
    t.provenance.policy = `ring ${XSS}`;
    const md = traceMarkdown(t, 'http://127.0.0.1/#report=abc');
    expect(md).toMatch(/^### Ringside teacher-forced trace: \*\*DIVERGES\*\*/);
    expect(md).toContain('- top-1 disagreements: 1 of 48;');
    expect(md).toContain('| [0, 0.5) |');
    expect(md).toContain('[Open the full trace](http://127.0.0.1/#report=abc)');
    expect(md).not.toMatch(/(?<!\\)<img/);
    expect(traceFileStem(t)).toMatch(
      /^ringside-trace-diverges-ring-img-src-x-[a-z0-9-]*-bf16-K4-P40-T48-3f2a9c1d7e5b$/,
    );
  });
});

describe('run form helpers', () => {
  it('trace defaults follow the window: 80 + 96 for the demo, 40 + 48 for tiny-a, 1536 + 256 for real windows', () => {
    expect(traceDefaults(32)).toEqual({ prefix: 80, traced: 96 });
    expect(traceDefaults(16)).toEqual({ prefix: 40, traced: 48 });
    expect(traceDefaults(512)).toEqual({ prefix: 1280, traced: 256 });
    expect(traceDefaults(1024)).toEqual({ prefix: 1536, traced: 256 });
    expect(traceDefaults(NaN)).toEqual({ prefix: 1280, traced: 256 });
  });

  it('parses token-id prompts and says what is wrong', () => {
    expect(parseTokenIds('2, 105,2364  7', 262144)).toEqual([2, 105, 2364, 7]);
    expect(() => parseTokenIds('2, 105, 2364', 1024)).toThrow(/from 0 to 1023.*"2364"/);
    expect(() => parseTokenIds('2, -1, x', 1024)).toThrow(/"-1", "x"/);
    expect(() => parseTokenIds('  ', 1024)).toThrow(/token ids/);
  });
});

describe('generation verdict and counters', () => {
  const result = (classic: number[], mtp: number[]) => {
    let i = 0;
    while (i < classic.length && i < mtp.length && classic[i] === mtp[i]) i++;
    const identical = i === classic.length && i === mtp.length;
    const counters = {
      rounds: 5,
      drafted: 15,
      accepted: 9,
      acceptanceRate: 0.6,
      meanAcceptedLength: 1.8,
      acceptedHistogram: [1, 1, 1, 2],
      perPositionAccepted: [4, 3, 2],
    };
    const g = (mode: 'classic' | 'mtp', tokens: number[]) => ({
      mode,
      block: 4,
      prompt: [2, 105],
      tokens,
      sha256: mode === 'classic' ? 'aa'.repeat(32) : 'bb'.repeat(32),
      stoppedOnEos: false,
      timings: { prefillMs: 1, decodeMs: 2, tokensPerSecond: 3 },
    });
    return {
      classic: g('classic', classic),
      mtp: { ...g('mtp', mtp), counters },
      diff: {
        prompt: [2, 105],
        identical,
        firstDifference: identical ? null : i,
        classicSha256: 'aa',
        mtpSha256: 'bb',
        counters,
        tokensPerSecond: { classic: 3, mtp: 4 },
      },
    };
  };

  it('says identical, or where the first difference is and what each arm has there', () => {
    expect(generationVerdict(result([1, 2, 3], [1, 2, 3]))).toEqual({
      verdict: 'identical',
      text: 'MTP output is identical to classic greedy decode: 3 tokens, same SHA-256',
    });
    expect(generationVerdict(result([1, 2, 3, 4], [1, 2, 9, 4]))).toEqual({
      verdict: 'differs',
      text: 'first difference at token 2: classic has token id 3, MTP has token id 9',
    });
    expect(generationVerdict(result([1, 2], [1, 2, 5])).text).toBe(
      'first difference at token 2: classic has the end (2 tokens), MTP has token id 5',
    );
    expect(tokenMarks([1, 2, 3, 4, 5], [1, 2, 9, 4, 6], 2)).toEqual(['same', 'same', 'first', 'after', 'differs']);
    expect(tokenMarks([1, 2, 3], [1, 2, 3], null)).toEqual(['same', 'same', 'same']);
    expect(tokenMarks([1, 2], [1, 2, 5], 2)).toEqual(['same', 'same']);
  });

  it('turns counters into bars and names the download safely', () => {
    const r = result([1, 2, 3], [1, 2, 3]);
    expect(histogramBars(r.mtp.counters).map((b) => `${b.label} ${b.value}/${b.of}`)).toEqual([
      '0 accepted 1/5',
      '1 accepted 1/5',
      '2 accepted 1/5',
      '3 accepted 2/5',
    ]);
    expect(perPositionBars(r.mtp.counters).map((b) => `${b.label} ${b.value}/${b.of}`)).toEqual([
      'draft 1 4/5',
      'draft 2 3/5',
      'draft 3 2/5',
    ]);
    const run = {
      options: {
        prompt: [2, 105],
        chat: false,
        maxNew: 16,
        block: 4,
        policy: `exact ${XSS}`,
        precision: 'f32',
        draftPosition: 'hf',
      },
      result: r,
      createdAt: '',
      elapsedMs: 1,
    } as unknown as GenerationRun;
    expect(generationFileStem(run)).toMatch(
      /^ringside-generation-identical-exact-img-src-x-[a-z0-9-]*-f32-K4-hf-a{12}$/,
    );
    // with provenance, the target's digest names the file (as the probe's and the trace's files)
    const withProvenance = {
      ...run,
      result: { ...r, provenance: { target: { digest: 'b'.repeat(64) } } },
    } as unknown as GenerationRun;
    expect(generationFileStem(withProvenance)).toMatch(/-K4-hf-b{12}$/);
    expect(generationJson(withProvenance).provenance).toEqual({ target: { digest: 'b'.repeat(64) } });
  });
});
