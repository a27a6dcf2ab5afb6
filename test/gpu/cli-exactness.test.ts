/**
 * The exactness self-test on the command line: `selftest --exactness` lists its checks and exits 0; with a fault
 * injected it names the kernel and exits 4 (EXACTNESS_FAILED_EXIT, a code no other outcome uses); a probe whose
 * self-test failed writes the warning into its report and exits 4 whatever its verdict; one that passed reads the
 * kept result and records it.
 */
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { TINY_A } from '../support/fixtures.ts';
import { validateReport, type ProbeReport } from '../../src/parity/report.ts';
import { EXACTNESS_FAILED_EXIT } from '../../src/cli/exactness.ts';

const exec = promisify(execFile);
/** The cache folder of this file's commands: the kept result is theirs alone. */
const cacheDir = mkdtempSync(path.join(tmpdir(), 'ringside-exactness-cache-'));
const cli = (args: string[], env: Record<string, string> = {}) =>
  exec('npm', ['run', '-s', 'cli', '--', ...args], {
    timeout: 600_000,
    env: { ...process.env, RINGSIDE_CACHE_DIR: cacheDir, ...env },
  }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e) => ({ code: e.code as number, stdout: e.stdout as string, stderr: e.stderr as string }),
  );
const target = path.join(TINY_A, 'target');

describe('selftest --exactness', () => {
  it('exits 0 and lists each check: kernel class, precision, K, ring slots across the wrap, result, ms', async () => {
    expect(EXACTNESS_FAILED_EXIT).toBe(4);
    const r = await cli(['selftest', '--exactness']);
    expect(r.code, r.stderr).toBe(0);
    const checks = r.stdout.split('\n').filter((l) => /^ {2}\w+ +(f32|bf16) +K = \d/.test(l));
    expect(checks.length).toBeGreaterThanOrEqual(6); // 6 per kernel class
    for (const K of [8, 4, 2]) expect(checks.some((l) => l.includes(`K = ${K} `))).toBe(true);
    for (const l of checks)
      expect(l).toMatch(/ring slots (\d+,)*15,0(,\d+)* {2}equal \(\d rows x \d+ logit bytes\) {2}\d+ ms$/);
    expect(r.stdout).toMatch(/^exactness self-test passed: \d+ checks, every verify block equals its chain/m);
    expect(r.stdout).toContain(`kept for later commands in ${path.join(cacheDir, 'exactness-selftest.json')}`);
  });

  it(`with --inject-fault matmul: exits ${EXACTNESS_FAILED_EXIT}, naming the matmul and the row`, async () => {
    const r = await cli(['selftest', '--exactness', '--inject-fault', 'matmul']);
    expect(r.code, r.stderr).toBe(EXACTNESS_FAILED_EXIT);
    expect(r.stdout).toContain('with the fault "matmul" injected');
    expect(r.stdout).toMatch(
      /f32 +K = 8 .*DIFFERS: \d of 8 rows, first row 1 .* first kernel: matmul \(matmul_\S+\.wgsl\): layer 0 \(sliding\) q projection, block row 1/,
    );
    expect(r.stdout).toMatch(/^exactness self-test FAILED: \d+ of \d+ checks differ, first in matmul/m);
    expect(r.stdout).toMatch(
      /does not keep verify rows exact on this machine, so "exact" verdicts here are not a reference/,
    );
    expect(r.stdout).not.toContain('kept for later commands');
  });

  it('refuses a fault it does not know, and a fault without --exactness (exit 1, naming the option)', async () => {
    const bad = await cli(['selftest', '--exactness', '--inject-fault', 'softmax']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('--inject-fault: unknown kernel fault "softmax" (expected matmul or attention)');
    const alone = await cli(['selftest', '--inject-fault', 'matmul']);
    expect(alone.code).toBe(1);
    expect(alone.stderr).toContain('--inject-fault applies to --exactness only');
    const help = await cli(['selftest', '--help']);
    expect(help.stdout).toMatch(/exit 0 when every block equals its chain, 4 when one differs/);
  });
});

describe('a probe after the self-test', () => {
  it(`records a failed self-test's warning in its report and exits ${EXACTNESS_FAILED_EXIT} though equal`, async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-exactness-'));
    const file = path.join(dir, 'r.json');
    const r = await cli(['probe', '--target', target, '--lengths', '8', '--report', file], {
      RINGSIDE_SELFTEST_FAULT: 'attention',
    });
    expect(r.code, r.stderr).toBe(EXACTNESS_FAILED_EXIT);
    expect(r.stdout).toMatch(/^block-versus-chain probe passed/m);
    expect(r.stdout).toMatch(/^warning: Dawn's shader compiler .* does not keep verify rows exact/m);
    const report = JSON.parse(readFileSync(file, 'utf8')) as ProbeReport;
    expect(validateReport(report)).toEqual([]);
    expect(report.verdict).toBe('equal');
    expect(report.provenance.exactnessSelfTest).toMatchObject({ ok: false, kernel: 'attention', fault: 'attention' });
    expect(report.provenance.exactnessSelfTest?.warning).toMatch(/the exactness self-test failed: attention/);
  });

  it('reads the kept result (cached) and exits 0 when equal', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-exactness-'));
    const file = path.join(dir, 'r.json');
    const r = await cli(['probe', '--target', target, '--lengths', '8', '--report', file]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/exactness self-test passed: \d+ checks.* cached result of an earlier run/);
    const report = JSON.parse(readFileSync(file, 'utf8')) as ProbeReport;
    expect(report.provenance.exactnessSelfTest).toMatchObject({ ok: true, cached: true, failed: 0 });
    expect(validateReport(report)).toEqual([]);
  });
});
