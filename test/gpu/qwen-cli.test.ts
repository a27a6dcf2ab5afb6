import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadGolden } from '../support/fixtures.ts';

const run = promisify(execFile);
const cli = (...args: string[]) => run('npm', ['run', '-s', 'cli', '--', ...args], { timeout: 240_000 });
const FIXTURE = path.resolve(process.cwd(), 'test/fixtures/qwen-tiny');

/** The command line on a Qwen3.5 folder: probe (arms) and generate (classic, MTP head, oracle). */
describe('npm run cli on qwen-tiny', () => {
  it('probe passes with exact and exits 3 with matmul-m-split', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-qprobe-'));
    const target = path.join(FIXTURE, 'target');
    const ok = await cli('probe', '--target', target, '--report', path.join(dir, 'r.json'));
    expect(ok.stdout).toMatch(/probe passed: 4 draws/);
    const r = JSON.parse(readFileSync(path.join(dir, 'r.json'), 'utf8'));
    expect(r.provenance.target.modelType).toBe('qwen3_5');
    const bad = await cli(
      'probe',
      '--target',
      target,
      '--policy',
      'matmul-m-split',
      '--report',
      path.join(dir, 'b.json'),
    ).catch((e) => e);
    expect(bad.code).toBe(3);
  });

  it('generate: classic, MTP with the target head and oracle drafts emit the golden tokens, same SHA-256', async () => {
    const golden = await loadGolden(FIXTURE);
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-qgen-'));
    const n = golden.json.greedy.length;
    const base = [
      '--target',
      path.join(FIXTURE, 'target'),
      '--tokens',
      golden.json.prompt.join(','),
      '--max-new',
      `${n}`,
    ];
    const runs: Record<string, string[]> = {
      classic: ['--mode', 'classic'],
      head: ['--mode', 'mtp', '--block', '4'],
      oracle: ['--mode', 'mtp', '--draft-source', 'oracle', '--oracle-mismatch', '2,3,10', '--block', '8'],
    };
    const sha: string[] = [];
    for (const [name, extra] of Object.entries(runs)) {
      await cli('generate', ...base, ...extra, '--json', path.join(dir, `${name}.json`));
      const r = JSON.parse(readFileSync(path.join(dir, `${name}.json`), 'utf8'));
      expect(r.tokens, name).toEqual(golden.json.greedy);
      sha.push(r.sha256);
    }
    expect(new Set(sha).size).toBe(1);
  });
});
