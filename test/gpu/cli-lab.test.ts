import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { TINY_A } from '../support/fixtures.ts';
import { validateReport } from '../../src/parity/report.ts';

const run = promisify(execFile);
const cli = (...args: string[]) => run('npm', ['run', '-s', 'cli', '--', ...args], { timeout: 240_000 });
const target = path.join(TINY_A, 'target');
const assistant = path.join(TINY_A, 'assistant');

describe('parity-lab commands', () => {
  it('probe writes a valid report; exit 0 when equal, 3 when it diverges', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-lab-'));
    const ok = await cli(
      'probe',
      '--target',
      target,
      '--draft',
      assistant,
      '--lengths',
      '8,48',
      '--report',
      path.join(dir, 'exact.json'),
    );
    expect(ok.stdout).toMatch(/MTP would be enabled/);
    const bad = await cli(
      'probe',
      '--target',
      target,
      '--lengths',
      '48',
      '--policy',
      'ring-chronological',
      '--report',
      path.join(dir, 'ring.json'),
    ).catch((e) => e);
    expect(bad.code).toBe(3);
    expect(bad.stdout).toMatch(/first divergence: layer \d+ \(sliding\) attention output at position \d+/);
    for (const f of ['exact.json', 'ring.json'])
      expect(validateReport(JSON.parse(readFileSync(path.join(dir, f), 'utf8')))).toEqual([]);
  });

  it('trace under exact: all rows equal; compare: classic == MTP for every prompt', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-lab-'));
    const t = await cli(
      'trace',
      '--target',
      target,
      '--prefix',
      '40',
      '--traced',
      '12',
      '--report',
      path.join(dir, 'trace.json'),
    );
    expect(t.stdout).toMatch(/all 12 block rows equal the chain byte for byte/);
    writeFileSync(
      path.join(dir, 'prompts.json'),
      JSON.stringify([
        [1, 2, 3, 4, 5],
        [900, 17],
      ]),
    );
    const c = await cli(
      'compare',
      '--target',
      target,
      '--draft',
      assistant,
      '--prompts',
      path.join(dir, 'prompts.json'),
      '--max-new',
      '12',
      '--json',
      path.join(dir, 'cmp.json'),
    );
    expect(c.stdout).toMatch(/2 of 2 prompts identical/);
    const cmp = JSON.parse(readFileSync(path.join(dir, 'cmp.json'), 'utf8'));
    expect(
      cmp.results.every(
        (r: { identical: boolean; classicSha256: string; mtpSha256: string }) =>
          r.identical && r.classicSha256 === r.mtpSha256,
      ),
    ).toBe(true);
  });

  it('bad input: a missing folder and an unknown policy give clear errors', async () => {
    const e1 = await cli('probe', '--target', '/nonexistent/x', '--report', '/tmp/x.json').catch((e) => e);
    expect(e1.code).toBe(1);
    expect(e1.stderr).toMatch(/error: .*\/nonexistent\/x/);
    const e2 = await cli('probe', '--target', target, '--policy', 'nope', '--report', '/tmp/x.json').catch((e) => e);
    expect(e2.stderr).toMatch(/Unknown policy "nope" \(known: exact, ring-chronological/);
  });
});
