/**
 * `generate` and `trace` on the MoE folder (gemma4-moe-tiny) through the command line: the CLI builds the MoE target
 * (MoETargetModel) and its dense assistant, MTP (assistant and oracle drafts, f32 and bf16) emits classic's tokens
 * with the same SHA-256 past the window, and the teacher-forced trace runs on the MoE target: block rows byte-equal
 * to the chain under exact; moe-grouped (verify blocks grouped by expert) diverges.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { validateReport } from '../../src/parity/report.ts';
import { GEMMA4_MOE_TINY, loadGolden } from '../support/fixtures.ts';

const run = promisify(execFile);
const cli = (...args: string[]) => run('npm', ['run', '-s', 'cli', '--', ...args], { timeout: 240_000 });
const target = path.join(GEMMA4_MOE_TINY, 'target');
const assistant = path.join(GEMMA4_MOE_TINY, 'assistant');

describe('npm run cli on gemma4-moe-tiny: generate and trace', () => {
  it('generate: classic, MTP with the assistant and with oracle drafts give the same 60 tokens (SHA-256)', async () => {
    const golden = await loadGolden(GEMMA4_MOE_TINY);
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-moegen-'));
    const base = ['--target', target, '--tokens', golden.json.prompt.join(','), '--max-new', '60'];
    const runs: Record<string, string[]> = {
      classic: ['--mode', 'classic'],
      mtp: ['--mode', 'mtp', '--draft', assistant, '--block', '4'],
      oracle: ['--mode', 'mtp', '--draft-source', 'oracle', '--oracle-mismatch', '2,3,10,11,12,30,45', '--block', '4'],
      bf16: ['--mode', 'mtp', '--draft', assistant, '--block', '3', '--precision', 'bf16'],
      'bf16-classic': ['--mode', 'classic', '--precision', 'bf16'],
    };
    const r: Record<
      string,
      { tokens: number[]; sha256: string; policy: string; rounds?: { drafts: number[]; accepted: number }[] }
    > = {};
    const stdout: Record<string, string> = {};
    for (const [name, extra] of Object.entries(runs)) {
      const file = path.join(dir, `${name}.json`);
      stdout[name] = (await cli('generate', ...base, ...extra, '--json', file)).stdout;
      r[name] = JSON.parse(readFileSync(file, 'utf8'));
    }
    expect(r.classic.tokens).toHaveLength(60);
    expect(stdout.mtp).toMatch(/^mtp: 60 tokens, sha256 [0-9a-f]{16}…/m);
    expect(stdout.mtp).toMatch(/first rejection: round \d+/);
    for (const name of ['mtp', 'oracle']) {
      expect(r[name].sha256, name).toBe(r.classic.sha256);
      expect(r[name].tokens, name).toEqual(r.classic.tokens);
      expect(r[name].policy).toBe('exact');
    }
    expect(r.bf16.sha256, 'bf16 MTP vs bf16 classic').toBe(r['bf16-classic'].sha256);
    expect(r.oracle.rounds!.some((x) => x.accepted > 0)).toBe(true);
    expect(r.mtp.rounds!.some((x) => x.accepted < 3)).toBe(true);
  });

  it('generate refuses moe-grouped on a target without experts, and takes it on the MoE folder', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-moegen-'));
    const dense = path.resolve('test/fixtures/gemma4-e-tiny/target');
    const args = ['--tokens', '1,2,3,4,5', '--max-new', '8', '--policy', 'moe-grouped'];
    const bad = await cli('generate', '--target', dense, ...args, '--json', path.join(dir, 'x.json')).catch((e) => e);
    expect(bad.code).not.toBe(0);
    expect(String(bad.stderr)).toMatch(/policy moe-grouped applies to Gemma 4 mixture-of-experts targets only/);
    const file = path.join(dir, 'grouped.json');
    await cli('generate', '--target', target, ...args, '--json', file);
    expect(JSON.parse(readFileSync(file, 'utf8')).policy).toBe('moe-grouped');
  });

  it('trace: all block rows equal under exact; moe-grouped verify blocks diverge', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-moetrace-'));
    const args = ['trace', '--target', target, '--prefix', '20', '--traced', '24', '--block', '4'];
    const exact = path.join(dir, 'exact.json');
    const ok = await cli(...args, '--report', exact);
    expect(ok.stdout).toMatch(/all 24 block rows equal the chain byte for byte/);
    const e = JSON.parse(readFileSync(exact, 'utf8'));
    expect(validateReport(e)).toEqual([]);
    expect(e.kind).toBe('trace');
    expect(e.verdict).toBe('equal');
    expect(e.provenance.target).toMatchObject({ layers: 6, hidden: 128, window: 16, vocab: 512 });
    const grouped = path.join(dir, 'grouped.json');
    const bad = await cli(...args, '--policy', 'moe-grouped', '--report', grouped).catch((x) => x);
    const g = JSON.parse(readFileSync(grouped, 'utf8'));
    expect(validateReport(g)).toEqual([]);
    expect(g.provenance.policy).toBe('moe-grouped');
    expect(g.verdict, String(bad.stdout)).toBe('diverges');
    expect(g.metrics.rowsByteEqual).toBeLessThan(24);
  });
});
