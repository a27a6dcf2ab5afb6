/**
 * `generate` and `trace` on the MoE folder (gemma4-moe-tiny) through the command line: the CLI builds the MoE target
 * (MoETargetModel) and its dense assistant, MTP (assistant and oracle drafts, f32 and bf16) emits classic's tokens
 * with the same SHA-256 past the window, and the teacher-forced trace runs on the MoE target: block rows byte-equal
 * to the chain under exact; moe-grouped (verify blocks grouped by expert) diverges.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { validateReport } from '../../src/parity/report.ts';
import { GEMMA4_MOE_TINY, loadGolden } from '../support/fixtures.ts';
import { cli, expectTraceExact, familyFolders, generateFiveWaysAgree } from './helpers/family-cli.ts';

const { target, assistant } = familyFolders(GEMMA4_MOE_TINY);

describe('npm run cli on gemma4-moe-tiny: generate and trace', () => {
  it('generate: classic, MTP with the assistant and with oracle drafts give the same 60 tokens (SHA-256)', async () => {
    const golden = await loadGolden(GEMMA4_MOE_TINY);
    const { r, stdout } = await generateFiveWaysAgree(target, assistant, golden.json.prompt, 'ringside-moegen-');
    expect(stdout.mtp).toMatch(/^mtp: 60 tokens, sha256 [0-9a-f]{16}…/m);
    expect(stdout.mtp).toMatch(/first rejection: round \d+/);
    for (const name of ['mtp', 'oracle']) expect(r[name].policy).toBe('exact');
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
    const { dir, args } = await expectTraceExact(target, 'ringside-moetrace-', 6);
    const grouped = path.join(dir, 'grouped.json');
    const bad = await cli(...args, '--policy', 'moe-grouped', '--report', grouped).catch((x) => x);
    const g = JSON.parse(readFileSync(grouped, 'utf8'));
    expect(validateReport(g)).toEqual([]);
    expect(g.provenance.policy).toBe('moe-grouped');
    expect(g.verdict, String(bad.stdout)).toBe('diverges');
    expect(g.metrics.rowsByteEqual).toBeLessThan(24);
  });
});
