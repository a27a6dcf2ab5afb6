/**
 * `npm run cli -- compare-traces REF CAND`: on logit-trace TSVs and on trace reports (told apart by content), its
 * --json is the judgement of the rows as the files hold them, exit 0 when identical and 3 when not; and what it
 * refuses, each with the file and the reason. No GPU: the command reads files only.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { compareTraces } from '../../src/cli/commands/compare-traces.ts';
import { formatLogitTraceTsv, parseLogitTraceTsv } from '../../src/format/logit-trace-tsv.ts';
import { armRows } from '../../src/parity/trace-files.ts';
import { judgeTraces } from '../../src/parity/trace-judgement.ts';
import { cliRun } from '../support/cli-run.ts';
import { asJson, sampleTrace } from '../e2e/sample-trace.ts';
import { divergingReport } from '../e2e/sample-report.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'ringside-compare-traces-'));
const file = (name: string, text: string) => {
  const f = path.join(dir, name);
  writeFileSync(f, text);
  return f;
};

/** A trace report's arm as a TSV (what `trace --tsv` writes, without the metadata). */
const armTsv = (r: ReturnType<typeof sampleTrace>, arm: 'chain' | 'block') =>
  formatLogitTraceTsv({
    meta: [{ key: 'model', values: ['sample'] }],
    rows: armRows(r.positions, arm).map((x, i) => ({
      chunk: Math.floor(i / 4),
      pos: i % 4,
      target: x.target,
      nll: x.nll,
      ids: [...x.ids],
      logits: [...x.logits],
    })),
  });

/** compareTraces.run in this process: its exit code, printed lines, or the error it throws. */
async function runHere(positionals: string[], values: Record<string, string> = {}) {
  const out: string[] = [];
  const io = { out: (t: string) => out.push(t), err: (t: string) => out.push(t) };
  const code = await compareTraces.run({ values: { decided: '2', ...values }, positionals }, io);
  return { code, out: out.join('\n') };
}

/**
 * The sample trace with each block list in descending order, as an engine's is: where the sample swaps the chain's
 * top two, the ids swap and the logits stay in place.
 */
function sample() {
  const t = asJson(sampleTrace({ prefix: 40, traced: 48, topK: 8, disagreeAt: [3, 10, 21] }));
  for (const p of t.positions)
    if (!p.agree) p.blockTop = p.blockTop.map((x, k) => ({ id: x.id, logit: p.chainTop[k].logit }));
  return t;
}

describe('compare-traces', () => {
  const trace = sample();
  const chain = file('chain.tsv', armTsv(trace, 'chain'));
  const block = file('block.tsv', armTsv(trace, 'block'));
  const report = file('trace.json', JSON.stringify(trace));

  it('two TSVs: the judgement of their rows as written (6 decimals), exit 3 when they differ, 0 when identical', async () => {
    const json = path.join(dir, 'j.json');
    const r = await cliRun(['compare-traces', chain, block, '--json', json]);
    expect(r.code, r.out).toBe(3);
    const want = judgeTraces(
      parseLogitTraceTsv(readFileSync(chain, 'utf8'), 'c').rows,
      parseLogitTraceTsv(readFileSync(block, 'utf8'), 'b').rows,
    );
    expect(JSON.parse(readFileSync(json, 'utf8'))).toEqual(want);
    expect(want.disagreements).toBe(3);
    expect(r.out).toMatch(/^top-1 disagreement +3 of 48 +6\.250%$/m);
    expect(r.out).toMatch(/^ {2}\[0, 0\.5\) +\d+ +\d+ +\S+$/m);
    expect(r.out).toMatch(/^verdict: decided \(/m);
    const same = await cliRun(['compare-traces', chain, chain]);
    expect(same.code, same.out).toBe(0);
    expect(same.out).toMatch(/^verdict: identical \(the top-1 agrees at every position\)$/m);
  }, 60_000);

  it("a report: its chain against its block by default, an arm against a TSV's rows", async () => {
    const a = await runHere([report, report], { json: path.join(dir, 'r.json') });
    expect(a.code).toBe(3);
    const want = judgeTraces(armRows(trace.positions, 'chain'), armRows(trace.positions, 'block'));
    expect(JSON.parse(readFileSync(path.join(dir, 'r.json'), 'utf8'))).toEqual(want);
    expect(a.out).toContain(`reference  ${report} (chain arm): `);
    // the report's chain arm against the chain TSV: the same tokens, logits within the 6-decimal rounding
    const b = await runHere([report, chain], { 'ref-arm': 'chain', json: path.join(dir, 'rt.json') });
    expect(b.code).toBe(0);
    const j = JSON.parse(readFileSync(path.join(dir, 'rt.json'), 'utf8'));
    expect(j.verdict).toBe('identical');
    // rounding to 6 decimals moves a logit by at most 5e-7
    expect(j.delta.max).toBeLessThanOrEqual(5e-7);
  });

  it('refuses traces of other streams, naming the first index, and inputs it cannot read', async () => {
    const short = file('short.tsv', armTsv({ ...trace, positions: trace.positions.slice(0, 40) }, 'block'));
    await expect(runHere([chain, short])).rejects.toThrow(
      `${chain} has 48 positions and ${short} 40: traces of different streams or chunkings cannot be judged together (the first index one lacks is 40)`,
    );
    const moved = trace.positions.map((p, i) => (i >= 7 ? { ...p, next: p.next + 1 } : p));
    const other = file('other.tsv', armTsv({ ...trace, positions: moved }, 'block'));
    await expect(runHere([chain, other])).rejects.toThrow(
      /disagree about the corpus token at 41 of 48 positions, first at index 7 \(\d+ vs \d+\): they are not traces of the same stream/,
    );
    await expect(runHere([chain, block], { 'ref-arm': 'block' })).rejects.toThrow(
      `--ref-arm: ${chain} is a logit-trace TSV, which holds one arm; the option picks a report's`,
    );
    await expect(runHere([chain, block], { decided: 'two' })).rejects.toThrow(
      '--decided must be a number >= 0, like 2 or 1.5 (got "two")',
    );
    await expect(runHere([chain, path.join(dir, 'missing.tsv')])).rejects.toThrow(/missing\.tsv: cannot read the file/);
    const probe = file('probe.json', JSON.stringify(asJson(divergingReport())));
    await expect(runHere([probe, chain])).rejects.toThrow(
      `${probe}: a probe report; compare-traces reads trace reports and logit-trace TSVs`,
    );
    const compacted = file('compacted.json', JSON.stringify({ ...trace, linkCompacted: true }));
    await expect(runHere([compacted, chain])).rejects.toThrow(/compacted for a share link/);
    await expect(runHere([file('bad.json', '{"x": ')])).rejects.toThrow(
      /bad\.json: starts like JSON but is not valid JSON/,
    );
    const missing = await cliRun(['compare-traces', chain]);
    expect(missing.code).toBe(2);
    expect(missing.out).toContain('compare-traces needs REF CAND (missing CAND)');
  }, 60_000);
});
