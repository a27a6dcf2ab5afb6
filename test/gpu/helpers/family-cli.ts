/**
 * The command-line checks that every Gemma 4 family folder shares (gemma4-e-cli / gemma4-moe-cli for `probe`,
 * gemma4-e-cli-generate / gemma4-moe-cli-generate for `generate` and `trace`): `npm run cli` runs on the folder's
 * target (and assistant), passes under `exact` and writes valid reports. The tests keep each family's own checks
 * (layer counts, stage orders, the policy that must diverge).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'vitest';
import { validateReport } from '../../../src/parity/report.ts';

const run = promisify(execFile);

/** `npm run cli -- ...args` (240 s at most); rejects with the child's code, stdout and stderr on a nonzero exit. */
export const cli = (...args: string[]) => run('npm', ['run', '-s', 'cli', '--', ...args], { timeout: 240_000 });

/** The target and assistant checkpoint folders of a fixture folder. */
export const familyFolders = (fixture: string) => ({
  target: path.join(fixture, 'target'),
  assistant: path.join(fixture, 'assistant'),
});

/**
 * `probe` with the assistant passes under exact (exit 0) past the window: 4 draws, the 48-token prompt's verify
 * block positions all equal, MTP enabled; the report validates, says `equal`, records the target's shape
 * (`layers`, hidden 128, window 16, vocab 512) and the assistant.
 */
export async function expectProbePassesExact(
  target: string,
  assistant: string,
  tmpPrefix: string,
  layers: number,
): Promise<void> {
  const dir = mkdtempSync(path.join(tmpdir(), tmpPrefix));
  const file = path.join(dir, 'exact.json');
  const ok = await cli('probe', '--target', target, '--draft', assistant, '--report', file);
  expect(ok.stdout).toMatch(/probe passed: 4 draws/);
  expect(ok.stdout).toMatch(/draw 3 \(prompt 48\): all 4 verify block positions equal/);
  expect(ok.stdout).toMatch(/MTP would be enabled/);
  const r = JSON.parse(readFileSync(file, 'utf8'));
  expect(validateReport(r)).toEqual([]);
  expect(r.verdict).toBe('equal');
  expect(r.provenance.target).toMatchObject({ layers, hidden: 128, window: 16, vocab: 512 });
  expect(r.provenance.assistant.label).toBe('assistant');
}

/** What `generate --json` writes (the fields the tests read). */
export interface GenerateJson {
  tokens: number[];
  sha256: string;
  policy: string;
  rounds?: { drafts: number[]; accepted: number }[];
}

/**
 * `generate` 60 tokens after `prompt` five ways: classic, MTP with the assistant (K = 4), MTP with oracle drafts
 * (K = 4, wrong at a few stream indices), bf16 MTP (K = 3) and bf16 classic. Then the checks all families share:
 * classic emits 60 tokens; assistant and oracle MTP give classic's tokens and SHA-256; bf16 MTP gives bf16 classic's
 * SHA-256; the oracle has accepted drafts and the assistant rejected ones. Returns the JSONs and stdouts by name.
 */
export async function generateFiveWaysAgree(
  target: string,
  assistant: string,
  prompt: number[],
  tmpPrefix: string,
): Promise<{ r: Record<string, GenerateJson>; stdout: Record<string, string> }> {
  const dir = mkdtempSync(path.join(tmpdir(), tmpPrefix));
  const base = ['--target', target, '--tokens', prompt.join(','), '--max-new', '60'];
  const runs: Record<string, string[]> = {
    classic: ['--mode', 'classic'],
    mtp: ['--mode', 'mtp', '--draft', assistant, '--block', '4'],
    oracle: ['--mode', 'mtp', '--draft-source', 'oracle', '--oracle-mismatch', '2,3,10,11,12,30,45', '--block', '4'],
    bf16: ['--mode', 'mtp', '--draft', assistant, '--block', '3', '--precision', 'bf16'],
    'bf16-classic': ['--mode', 'classic', '--precision', 'bf16'],
  };
  const r: Record<string, GenerateJson> = {};
  const stdout: Record<string, string> = {};
  for (const [name, extra] of Object.entries(runs)) {
    const file = path.join(dir, `${name}.json`);
    stdout[name] = (await cli('generate', ...base, ...extra, '--json', file)).stdout;
    r[name] = JSON.parse(readFileSync(file, 'utf8'));
  }
  expect(r.classic.tokens).toHaveLength(60);
  for (const name of ['mtp', 'oracle']) {
    expect(r[name].sha256, name).toBe(r.classic.sha256);
    expect(r[name].tokens, name).toEqual(r.classic.tokens);
  }
  expect(r.bf16.sha256, 'bf16 MTP vs bf16 classic').toBe(r['bf16-classic'].sha256);
  expect(r.oracle.rounds!.some((x) => x.accepted > 0)).toBe(true);
  expect(r.mtp.rounds!.some((x) => x.accepted < 3)).toBe(true);
  return { r, stdout };
}

/**
 * `trace` (prefix 20, 24 traced tokens, blocks of 4) under exact: all 24 block rows equal the chain byte for byte,
 * and the report validates as an `equal` trace of the target's shape (`layers`, hidden 128, window 16, vocab 512).
 * Returns the temporary folder and the trace arguments, for the test's diverging-policy run.
 */
export async function expectTraceExact(
  target: string,
  tmpPrefix: string,
  layers: number,
): Promise<{ dir: string; args: string[] }> {
  const dir = mkdtempSync(path.join(tmpdir(), tmpPrefix));
  const args = ['trace', '--target', target, '--prefix', '20', '--traced', '24', '--block', '4'];
  const exact = path.join(dir, 'exact.json');
  const ok = await cli(...args, '--report', exact);
  expect(ok.stdout).toMatch(/all 24 block rows equal the chain byte for byte/);
  const e = JSON.parse(readFileSync(exact, 'utf8'));
  expect(validateReport(e)).toEqual([]);
  expect(e.kind).toBe('trace');
  expect(e.verdict).toBe('equal');
  expect(e.provenance.target).toMatchObject({ layers, hidden: 128, window: 16, vocab: 512 });
  return { dir, args };
}
