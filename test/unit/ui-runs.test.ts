/**
 * The page's runs without a DOM: the list of the visit's runs and their one-line summaries, the generation document
 * read back from its JSON, the progress list settled from a run's own timings (one measurement for the list and the
 * report), the draws' one numbering, and what the generation view says about pipelines and software adapters.
 */
import { describe, expect, it } from 'vitest';
import { drawPhaseLabel } from '../../src/parity/draws.ts';
import { generationJson, pipelinesNote, softwareAdapterNote } from '../../src/ui/generation/generation-model.ts';
import { generationMarkdown } from '../../src/ui/generation/generation-share.ts';
import { readGeneration } from '../../src/ui/generation/read-generation.ts';
import { normalizeReport } from '../../src/ui/report/report-model.ts';
import { generationPhases, probePhases, tracePhases } from '../../src/ui/run/phase-times.ts';
import { readDocument } from '../../src/ui/runs/read-document.ts';
import { createRunStore, summarizeRun, type RunDocument } from '../../src/ui/runs/run-store.ts';
import { markdownWithoutLink } from '../../src/ui/share/share.ts';
import { fmtInt, fmtIntList, fmtTokenId } from '../../src/util/number-format.ts';
import { sampleGeneration } from '../e2e/sample-generation.ts';
import { divergingReport, equalReport } from '../e2e/sample-report.ts';
import { sampleTrace } from '../e2e/sample-trace.ts';

const doc = (x: unknown): RunDocument => {
  const r = readDocument(x);
  if (!r.ok) throw new Error(r.problems.join('; '));
  return r.doc;
};

describe('the list of the visit runs', () => {
  it('keeps every run in arrival order, one entry per document, and tells listeners', () => {
    const store = createRunStore();
    let told = 0;
    store.subscribe(() => told++);
    const probe = equalReport();
    const trace = sampleTrace();
    const gen = generationJson(sampleGeneration());
    const a = store.add({ origin: 'live', source: 'live run, 03:53:31', raw: probe, doc: doc(probe) });
    const b = store.add({ origin: 'file', source: 'file trace.json', raw: trace, doc: doc(trace) });
    const c = store.add({ origin: 'live', source: 'live run, 03:55:12', raw: gen, doc: doc(gen) });
    expect([a.id, b.id, c.id]).toEqual([1, 2, 3]);
    expect(store.list().map((e) => e.doc.kind)).toEqual(['probe', 'trace', 'generation']);
    // the same document again (a link reloaded) is the same run
    expect(store.add({ origin: 'link', source: 'shared link', raw: trace, doc: doc(trace) })).toBe(b);
    expect(store.list().length).toBe(3);
    expect(told).toBe(3);
    expect(store.get(2)?.source).toBe('file trace.json');
  });

  it('summarizes each kind: verdict, settings, target', () => {
    expect(summarizeRun(doc(divergingReport()))).toEqual({
      kind: 'Block-versus-chain probe',
      verdict: 'diverges',
      bad: true,
      setup: 'mlx-metal · bf16 · K = 4 · draws 8; 8; 8; 1,056',
      model: 'gemma-4-12b-it-4bit',
      createdAt: divergingReport().provenance.createdAt,
    });
    const t = summarizeRun(doc(sampleTrace({ prefix: 1536, traced: 256 })));
    expect([t.kind, t.verdict, t.bad]).toEqual(['Teacher-forced trace', 'diverges', true]);
    expect(t.setup).toMatch(/ · prefix 1,536, traced 256$/);
    const g = summarizeRun(doc(generationJson(sampleGeneration({ differ: true }))));
    expect([g.kind, g.verdict, g.bad, g.setup]).toEqual([
      'Classic vs MTP generation',
      'differs',
      true,
      'exact · f32 · K = 4 · 16 tokens',
    ]);
  });
});

describe('a generation run as a document', () => {
  it('reads back what its JSON export writes, the comparison of the arms computed again', () => {
    for (const differ of [false, true]) {
      const run = sampleGeneration({ differ, software: true });
      const r = readGeneration(JSON.parse(JSON.stringify(generationJson(run))));
      if (!r.ok) throw new Error(r.problems.join('; '));
      expect(r.run).toEqual(run);
    }
  });

  it('takes the arms comparison from the tokens, never from the file', () => {
    const x = generationJson(sampleGeneration({ differ: true })) as Record<string, unknown>;
    const r = readGeneration({ ...x, diff: { identical: true, firstDifference: null } });
    expect(r.ok && r.run.result.diff.identical).toBe(false);
    expect(r.ok && r.run.result.diff.firstDifference).toBe(8);
  });

  it('refuses what is not a generation run, naming the field', () => {
    const x = generationJson(sampleGeneration()) as Record<string, unknown>;
    const problems = (y: unknown) => {
      const r = readGeneration(y);
      return r.ok ? [] : r.problems;
    };
    expect(problems({ ...x, schema: 'ringside-generation/9' })).toEqual([
      'schema must be "ringside-generation/1" (got "ringside-generation/9")',
    ]);
    expect(problems({ ...x, classic: { ...(x.classic as object), tokens: [1, -2] } })).toContain(
      'classic.tokens must be a list of token ids',
    );
    expect(problems({ ...x, mtp: { ...(x.mtp as object), sha256: 'zz' } })).toContain(
      'mtp.sha256 must be 64 hex digits',
    );
    expect(problems({ ...x, mtp: { ...(x.mtp as object), prompt: [2, 105] } })).toContain(
      'classic.prompt and mtp.prompt differ: the two arms are not of one run',
    );
    expect(problems({ ...x, options: { ...(x.options as object), block: 99 } })).toContain(
      'options.block must be a whole number from 1 to 16',
    );
    // readDocument routes by schema: a generation document's problems are its own
    const d = readDocument({ ...x, options: 'fast' });
    expect(d.ok ? [] : d.problems).toContain('options must be an object (the run settings)');
  });

  it('Markdown: verdict, setup, acceptance, speed and the software adapter note', () => {
    const md = generationMarkdown(sampleGeneration({ differ: true, software: true }), 'http://x/#report=abc');
    expect(md).toMatch(/^### Ringside classic versus MTP generation: \*\*DIFFERS\*\*\n/);
    expect(md).toContain('first difference at token 8: classic has token id 91, MTP has token id 92');
    expect(md).toContain('- acceptance: 6 rounds · 9 of 18 drafts accepted (50.0%) · mean accepted length 1.50 of 3');
    expect(md).toContain('- speed: classic 6.28 tokens/s · MTP 3.90 tokens/s (0.62× classic)');
    expect(md).toContain('This adapter is a software one');
    expect(md).toContain('[Open the full run](http://x/#report=abc)');
  });
});

describe('what the generation view says', () => {
  it('pipelines: in a browser every run creates them and their compile time is not visible; in Node it is', () => {
    const run = sampleGeneration();
    const browser = pipelinesNote(run.result.classic.timings, run.result.provenance);
    expect(browser).toBe(
      "its decode created 12 GPU pipelines, as every run does; the browser compiles them in its GPU process, whose shader cache can make a later run's compiles cheaper, and how long they took is not visible to the page",
    );
    expect(browser).not.toMatch(/run again/);
    const p = run.result.provenance!;
    const node = pipelinesNote(run.result.classic.timings, {
      ...p,
      compiler: { ...p.compiler!, browser: 'Node v20.19.0' },
    });
    expect(node).toBe(
      "its decode created 12 GPU pipelines in 4 ms of compiles, which a machine's first run pays (6.34 tokens/s without them)",
    );
    expect(pipelinesNote({ prefillMs: 1, decodeMs: 1, tokensPerSecond: 1 }, p)).toBe('');
  });

  it('a software adapter gets the word that blocks are slow there; a GPU and a run without provenance do not', () => {
    expect(softwareAdapterNote(sampleGeneration({ software: true }).result.provenance, 4)).toMatch(
      /^This adapter is a software one \(a CPU behind WebGPU\): there a verify block of 4 rows costs almost as much as 4 single-token steps/,
    );
    expect(softwareAdapterNote(sampleGeneration().result.provenance, 4)).toBe('');
    expect(softwareAdapterNote(undefined, 4)).toBe('');
  });
});

describe('the progress list of a finished run: the run own timings', () => {
  it('probe: each draw prefill, chain, block and localize, named as the live lines, and the report total', () => {
    const r = normalizeReport(divergingReport() as unknown as Record<string, unknown>);
    const s = probePhases(r);
    expect(s.totalMs).toBe(r.timings.totalMs);
    const d3 = r.draws[3];
    expect(s.phases.filter((p) => p.name.startsWith('draw 3 '))).toEqual([
      { name: 'draw 3 of draws 0–3 (prompt 1,056 tokens): prefill', ms: d3.timings.prefillMs },
      { name: 'draw 3 of draws 0–3 (prompt 1,056 tokens): chain', ms: d3.timings.chainMs },
      { name: 'draw 3 of draws 0–3 (prompt 1,056 tokens): block', ms: d3.timings.blockMs },
      ...(d3.timings.localizeMs !== undefined
        ? [{ name: 'draw 3 of draws 0–3 (prompt 1,056 tokens): localize', ms: d3.timings.localizeMs }]
        : []),
    ]);
    // the engine's progress lines use the same label, in the report's numbering (DrawResult.index, from 0)
    expect(r.draws.map((d) => drawPhaseLabel(d.index, 4, d.promptLength, 'chain'))).toEqual([
      'draw 0 of draws 0–3 (prompt 8 tokens): chain',
      'draw 1 of draws 0–3 (prompt 8 tokens): chain',
      'draw 2 of draws 0–3 (prompt 8 tokens): chain',
      'draw 3 of draws 0–3 (prompt 1,056 tokens): chain',
    ]);
    expect(drawPhaseLabel(0, 1, 40, 'prefill')).toBe('draw 0 (prompt 40 tokens): prefill');
  });

  it('the exactness self-test that ran before the probe is its first line (the total stays the report total); a cached one is not', () => {
    const r = normalizeReport(divergingReport() as unknown as Record<string, unknown>);
    const selfTest = {
      ok: true,
      checks: 6,
      failed: 0,
      cached: false,
      ms: 1234,
      kernelClasses: ['software'],
      shaderBuild: '0123456789abcdef',
    };
    const fresh = probePhases({ ...r, provenance: { ...r.provenance, exactnessSelfTest: selfTest } });
    expect(fresh.phases[0]).toEqual({ name: 'exactness self-test of this adapter', ms: 1234 });
    expect(fresh.phases.slice(1)).toEqual(probePhases(r).phases);
    expect(fresh.totalMs).toBe(r.timings.totalMs);
    const cached = probePhases({
      ...r,
      provenance: { ...r.provenance, exactnessSelfTest: { ...selfTest, cached: true } },
    });
    expect(cached).toEqual(probePhases(r));
  });

  it('trace: prefill, chain and block as the report times them', () => {
    const r = sampleTrace();
    expect(tracePhases(r)).toEqual({
      phases: [
        { name: 'prefill', ms: r.timings.prefillMs },
        { name: 'chain', ms: r.timings.chainMs },
        { name: 'block', ms: r.timings.blockMs },
      ],
      totalMs: r.timings.totalMs,
    });
  });

  it("generation: each arm's prefill and decode, as the speed table shows them", () => {
    const r = sampleGeneration().result;
    expect(generationPhases(r)).toEqual({
      phases: [
        { name: 'classic prefill', ms: 1490 },
        { name: 'classic decode', ms: 2390 },
        { name: 'MTP prefill', ms: 1210 },
        { name: 'MTP decode', ms: 3850 },
      ],
    });
  });
});

describe('one number format', () => {
  it('amounts with thousands separators, lists of them with semicolons, token ids as typed', () => {
    expect(fmtInt(16384)).toBe('16,384');
    expect(fmtIntList([8, 8, 8, 1056])).toBe('8; 8; 8; 1,056');
    expect(fmtTokenId(2364)).toBe('2364');
    expect(fmtTokenId(-1)).toBe('—');
  });

  it('a Markdown summary without its link says so and points to the JSON file', () => {
    expect(markdownWithoutLink('23,456 characters')).toBe(
      '\n_The full report is too large for a link here (23,456 characters): ask for its JSON file, which opens in Ringside with "Open a report (JSON)"._\n',
    );
  });
});
