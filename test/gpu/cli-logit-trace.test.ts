/**
 * `trace --tsv` and `compare-traces` through the command line on the demo model and a fixture of each family (dense
 * tiny-a, E-series, MoE, Qwen3.5): the two files follow mlxcel's logit-trace format row for row against the trace's
 * own JSON report; compare-traces of chain.tsv against block.tsv is "identical" under exact (the rows byte-equal),
 * and under an inexact policy gives the disagreements the report's full-precision rows give. On the demo the stream
 * is a text (`--text`), tokenized BOS first.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { fixed6, parseLogitTraceTsv } from '../../src/format/logit-trace-tsv.ts';
import { loadTokenizer } from '../../src/format/tokenizer.ts';
import { nodeFileSource } from '../../src/node/file-source.ts';
import { validateReport } from '../../src/parity/report.ts';
import type { TraceJudgement } from '../../src/parity/trace-judgement.ts';
import type { TraceReport } from '../../src/parity/trace.ts';
import { cliRun } from '../support/cli-run.ts';
import { DEMO, GEMMA4_E_TINY, GEMMA4_MOE_TINY, TINY_A } from '../support/fixtures.ts';

const QWEN_TINY = path.resolve(process.cwd(), 'test/fixtures/qwen-tiny');
const BLOCK = 4;

/** Manual-page prose (the demo's kind of text): 188 tokens with the demo's tokenizer. */
const TEXT = `The program reads its configuration from the file named on the command line, or from the default file in the
user's home directory when no file is given. Each line of the file holds one option and its value, separated by
white space; lines that begin with a hash mark are comments and are ignored. When an option appears more than once,
the last value is used. The program exits with status zero when every file was processed, and with a non-zero
status when a file could not be opened or when an option had a value that is not valid. If the output file already
exists, it is replaced unless the option to keep old files is set.
`;

/** `trace` with `args`, writing the JSON report and the two TSVs in a fresh folder. */
async function traceFiles(target: string, args: string[]) {
  const dir = mkdtempSync(path.join(tmpdir(), 'ringside-logit-trace-'));
  const report = path.join(dir, 'trace.json');
  const r = await cliRun([
    'trace',
    '--target',
    target,
    '--block',
    String(BLOCK),
    ...args,
    '--report',
    report,
    '--tsv',
    dir,
  ]);
  expect([0, 3], r.out).toContain(r.code);
  expect(r.out).toContain(`logit traces written to ${path.join(dir, 'chain.tsv')} and ${path.join(dir, 'block.tsv')}`);
  const rep = JSON.parse(readFileSync(report, 'utf8')) as TraceReport;
  expect(validateReport(rep)).toEqual([]);
  return { dir, rep, out: r.out };
}

/**
 * One arm's TSV against the report it came from: the metadata lines, then per traced position i: chunk i / K, pos
 * i mod K, the stream's next token, nll and the 8 logits as Rust prints them with 6 decimals, the 8 ids as listed.
 */
function expectTsvOfArm(file: string, rep: TraceReport, arm: 'chain' | 'block') {
  const text = readFileSync(file, 'utf8');
  const t = parseLogitTraceTsv(text, file);
  const p = rep.provenance;
  const meta = Object.fromEntries(t.meta.map((m) => [m.key, m.values]));
  expect(meta.model).toEqual([p.target.label]);
  expect(meta.checkpoint).toEqual([p.target.label, 'type', p.target.modelType, 'digest', p.target.digest]);
  expect(meta.arm).toEqual([arm]);
  expect(meta.policy).toEqual([p.policy]);
  expect(meta.precision).toEqual([p.precision]);
  expect(meta.adapter[0]).toContain(p.adapter.description);
  expect(meta.columns).toEqual(['chunk', 'pos', 'target', 'nll', 'top_ids', 'top_logits']);
  expect(meta.chunks.slice(0, 5)).toEqual([
    String(Math.ceil(p.traced / BLOCK)),
    'chunk_tokens',
    String(BLOCK),
    'topk',
    '8',
  ]);
  const lines = text.split('\n').filter((l) => l && !l.startsWith('#'));
  expect(lines).toHaveLength(p.traced);
  rep.positions.forEach((q, i) => {
    const top = arm === 'chain' ? q.chainTop : q.blockTop;
    const f = lines[i].split('\t');
    expect(f.slice(0, 3), `${arm} row ${i}`).toEqual([
      String(Math.floor(i / BLOCK)),
      String(i % BLOCK),
      String(q.next),
    ]);
    expect(f[3], `${arm} row ${i} nll`).toBe(fixed6(arm === 'chain' ? q.nllChain : q.nllBlock));
    expect(f[3]).toMatch(/^\d+\.\d{6}$/);
    expect(top).toHaveLength(8);
    expect(f[4]).toBe(top.map((x) => x.id).join(','));
    expect(f[5]).toBe(top.map((x) => fixed6(x.logit)).join(','));
    for (const v of f[5].split(',')) expect(v).toMatch(/^-?\d+\.\d{6}$/);
  });
  return { t, lines, meta };
}

/** `compare-traces chain.tsv block.tsv --json`: exit code, printed text and the judgement. */
async function compareArms(dir: string) {
  const json = path.join(dir, 'judgement.json');
  const r = await cliRun(['compare-traces', path.join(dir, 'chain.tsv'), path.join(dir, 'block.tsv'), '--json', json]);
  return { code: r.code, out: r.out, j: JSON.parse(readFileSync(json, 'utf8')) as TraceJudgement };
}

/** Exact: both files row for row as the report, the block rows the chain's byte for byte, judged identical. */
async function expectExact(target: string, args: string[]) {
  const { dir, rep } = await traceFiles(target, ['--policy', 'exact', ...args]);
  expect(rep.verdict).toBe('equal');
  const chain = expectTsvOfArm(path.join(dir, 'chain.tsv'), rep, 'chain');
  const block = expectTsvOfArm(path.join(dir, 'block.tsv'), rep, 'block');
  expect(block.lines).toEqual(chain.lines);
  const c = await compareArms(dir);
  expect(c.code, c.out).toBe(0);
  expect(c.j).toMatchObject({ positions: rep.provenance.traced, disagreements: 0, verdict: 'identical' });
  expect(c.j.delta.max).toBe(0);
  expect(c.j.perplexity.candidate).toBe(c.j.perplexity.reference);
  expectReportsJudgement(c.j, rep);
  return { dir, rep, chain };
}

/**
 * The TSVs' judgement is the report's own (from its rows in full precision): the same counts, buckets, ranks and
 * verdict (ids are written whole; a gap rounded to 6 decimals could change bucket only within 1e-6 of an edge,
 * which these runs do not have), |delta logit| and perplexity within the 6-decimal rounding.
 */
function expectReportsJudgement(j: TraceJudgement, rep: TraceReport) {
  const m = rep.metrics;
  const own = rep.judgement!;
  expect([j.positions, j.disagreements, j.decided, j.decidedDisagreements]).toEqual([
    m.positions,
    m.top1Disagreements,
    m.decidedPositions,
    m.decidedDisagreements,
  ]);
  expect([j.buckets, j.ranks, j.verdict]).toEqual([own.buckets, own.ranks, own.verdict]);
  // each side of a delta is rounded to 6 decimals: at most 5e-7 each
  for (const k of ['p50', 'p90', 'p99', 'max'] as const)
    expect(Math.abs(j.delta[k]! - own.delta[k]!), k).toBeLessThanOrEqual(1e-6);
  // an nll rounded to 6 decimals moves the mean by at most 5e-7: exp of it by a factor within 1e-6
  expect(Math.abs(j.perplexity.reference / own.perplexity.reference - 1)).toBeLessThan(1e-6);
  expect(Math.abs(j.perplexity.candidate / own.perplexity.candidate - 1)).toBeLessThan(1e-6);
}

/** An inexact policy chosen to flip some top-1 on this model: judged "differs", as the report's rows say. */
async function expectInexact(target: string, args: string[]): Promise<void> {
  const { dir, rep } = await traceFiles(target, ['--prefix', '20', ...args]);
  expect(rep.verdict).toBe('diverges');
  expectTsvOfArm(path.join(dir, 'chain.tsv'), rep, 'chain');
  expectTsvOfArm(path.join(dir, 'block.tsv'), rep, 'block');
  const c = await compareArms(dir);
  expect(rep.metrics.top1Disagreements, 'an inexact run chosen to flip some top-1').toBeGreaterThan(0);
  expect(c.code, c.out).toBe(3);
  expectReportsJudgement(c.j, rep);
  const ranks = Object.fromEntries(Object.entries(c.j.ranks).filter(([, v]) => v > 0));
  console.log(
    `${path.basename(path.dirname(target))} ${args.join(' ')}: ${c.j.disagreements} of ${c.j.positions} disagree, ${c.j.decidedDisagreements} of ${c.j.decided} decided, ranks ${JSON.stringify(ranks)}, verdict ${c.j.verdict}`,
  );
}

describe('trace --tsv and compare-traces on each family', () => {
  it('the demo, on a text: BOS first, the text after it, exact identical; matmul-m-split in bf16 flips a top-1', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-text-'));
    const file = path.join(dir, 'page.txt');
    writeFileSync(file, TEXT);
    const target = path.join(DEMO, 'target');
    const { rep, chain } = await expectExact(target, ['--text', file, '--prefix', '40', '--traced', '16']);
    // the stream is BOS + the text's tokens: the BOS and 40 text tokens untraced; row i predicts text token 41 + i
    const tok = await loadTokenizer(await nodeFileSource(path.join(target, 'tokenizer.json')));
    const ids = tok.encode(TEXT, false);
    expect(tok.bos).toBe(2);
    expect(rep.provenance.prefix).toBe(41);
    expect(rep.positions.map((p) => p.next)).toEqual(ids.slice(41, 57));
    expect(chain.meta.bos).toEqual(['2']);
    expect(chain.meta.corpus).toEqual(['page.txt', 'tokens', String(ids.length + 1)]);
    expect(chain.meta.chunks.slice(5)).toEqual(['prefill', '40']);
    await expectInexact(target, ['--traced', '64', '--policy', 'matmul-m-split', '--precision', 'bf16']);
  }, 300_000);

  it('the dense fixture (tiny-a): exact identical; mlx-m3plus in bf16 disagrees, decided positions too', async () => {
    const target = path.join(TINY_A, 'target');
    await expectExact(target, ['--prefix', '20', '--traced', '16']);
    await expectInexact(target, ['--traced', '16', '--policy', 'mlx-m3plus', '--precision', 'bf16']);
  }, 300_000);

  it('the E-series fixture: exact identical; mlx-m3plus in bf16 (qmv bfloat adds vs qmv_wide) disagrees', async () => {
    const target = path.join(GEMMA4_E_TINY, 'target');
    await expectExact(target, ['--prefix', '20', '--traced', '16']);
    await expectInexact(target, ['--traced', '16', '--policy', 'mlx-m3plus', '--precision', 'bf16']);
  }, 300_000);

  it('the MoE fixture: exact identical; mlx-m3plus in bf16 disagrees', async () => {
    const target = path.join(GEMMA4_MOE_TINY, 'target');
    await expectExact(target, ['--prefix', '20', '--traced', '16']);
    await expectInexact(target, ['--traced', '16', '--policy', 'mlx-m3plus', '--precision', 'bf16']);
  }, 300_000);

  it('the Qwen3.5 fixture: exact identical; gdn-state-bf16 disagrees', async () => {
    const target = path.join(QWEN_TINY, 'target');
    await expectExact(target, ['--prefix', '20', '--traced', '16']);
    await expectInexact(target, ['--traced', '32', '--policy', 'gdn-state-bf16']);
  }, 300_000);

  it('refuses --text without a tokenizer, a text too short, and --text with --stream', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-text-bad-'));
    const file = path.join(dir, 'short.txt');
    writeFileSync(file, 'The file is set.');
    const noTok = await cliRun(['trace', '--target', path.join(TINY_A, 'target'), '--text', file, '--tsv', dir]);
    expect(noTok.code).toBe(1);
    expect(noTok.out).toContain(`--text needs a tokenizer.json in the target folder ${path.join(TINY_A, 'target')}`);
    const short = await cliRun([
      'trace',
      '--target',
      path.join(DEMO, 'target'),
      '--text',
      file,
      '--prefix',
      '40',
      '--tsv',
      dir,
    ]);
    expect(short.code).toBe(1);
    expect(short.out).toMatch(
      /--text .*short\.txt: encodes to \d+ tokens; the trace needs prefix 40 \+ traced 256 \+ 1 = 297/,
    );
    const both = await cliRun(['trace', '--target', 'x', '--text', file, '--stream', file, '--tsv', dir]);
    expect(both.code).toBe(1);
    expect(both.out).toContain('give --stream or --text, not both');
    const none = await cliRun(['trace', '--target', 'x']);
    expect(none.out).toContain('give --report FILE, --tsv DIR or both');
  }, 120_000);
});
