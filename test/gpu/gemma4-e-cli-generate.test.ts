/**
 * `generate` and `trace` on an E-series folder (gemma4-e-tiny) through the command line: the CLI builds the
 * E-series target (ETargetModel) and its centroid-head assistant, MTP (assistant and oracle drafts) emits classic's
 * tokens with the same SHA-256 past the window, and the teacher-forced trace runs on the E-series target (block rows
 * byte-equal to the chain under exact; ring-chronological diverges once the rings have wrapped).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { validateReport } from '../../src/parity/report.ts';
import { GEMMA4_E_TINY, loadGolden } from '../support/fixtures.ts';

const run = promisify(execFile);
const cli = (...args: string[]) => run('npm', ['run', '-s', 'cli', '--', ...args], { timeout: 240_000 });
const target = path.join(GEMMA4_E_TINY, 'target');
const assistant = path.join(GEMMA4_E_TINY, 'assistant');

describe('npm run cli on gemma4-e-tiny: generate and trace', () => {
  it('generate: classic, MTP with the assistant and with oracle drafts give the same 60 tokens (SHA-256)', async () => {
    const golden = await loadGolden(GEMMA4_E_TINY);
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-egen-'));
    const base = ['--target', target, '--tokens', golden.json.prompt.join(','), '--max-new', '60'];
    const runs: Record<string, string[]> = {
      classic: ['--mode', 'classic'],
      mtp: ['--mode', 'mtp', '--draft', assistant, '--block', '4'],
      oracle: ['--mode', 'mtp', '--draft-source', 'oracle', '--oracle-mismatch', '2,3,10,11,12,30,45', '--block', '4'],
      bf16: ['--mode', 'mtp', '--draft', assistant, '--block', '3', '--precision', 'bf16'],
      'bf16-classic': ['--mode', 'classic', '--precision', 'bf16'],
    };
    const r: Record<string, { tokens: number[]; sha256: string; rounds?: { drafts: number[]; accepted: number }[] }> =
      {};
    for (const [name, extra] of Object.entries(runs)) {
      const file = path.join(dir, `${name}.json`);
      await cli('generate', ...base, ...extra, '--json', file);
      r[name] = JSON.parse(readFileSync(file, 'utf8'));
    }
    expect(r.classic.tokens.slice(0, 16)).toEqual(golden.json.greedy);
    expect(r.classic.tokens).toHaveLength(60);
    for (const name of ['mtp', 'oracle']) {
      expect(r[name].sha256, name).toBe(r.classic.sha256);
      expect(r[name].tokens, name).toEqual(r.classic.tokens);
    }
    expect(r.bf16.sha256, 'bf16 MTP vs bf16 classic').toBe(r['bf16-classic'].sha256);
    // the assistant's first round drafts the goldens' draft tokens (centroid head on the donors' K/V)
    expect(r.mtp.rounds![0].drafts).toEqual(golden.json.draft.tokens);
    expect(r.oracle.rounds!.some((x) => x.accepted > 0)).toBe(true);
    expect(r.mtp.rounds!.some((x) => x.accepted < 3)).toBe(true);
  });

  it('trace: all block rows equal under exact; ring-chronological diverges after the wrap', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-etrace-'));
    const args = ['trace', '--target', target, '--prefix', '20', '--traced', '24', '--block', '4'];
    const exact = path.join(dir, 'exact.json');
    const ok = await cli(...args, '--report', exact);
    expect(ok.stdout).toMatch(/all 24 block rows equal the chain byte for byte/);
    const e = JSON.parse(readFileSync(exact, 'utf8'));
    expect(validateReport(e)).toEqual([]);
    expect(e.kind).toBe('trace');
    expect(e.verdict).toBe('equal');
    expect(e.provenance.target).toMatchObject({ layers: 10, hidden: 128, window: 16, vocab: 512 });
    const ring = path.join(dir, 'ring.json');
    const bad = await cli(...args, '--policy', 'ring-chronological', '--report', ring).catch((x) => x);
    const rr = JSON.parse(readFileSync(ring, 'utf8'));
    expect(validateReport(rr)).toEqual([]);
    expect(rr.verdict, String(bad.stdout)).toBe('diverges');
    expect(rr.metrics.rowsByteEqual).toBeLessThan(24);
  });
});
