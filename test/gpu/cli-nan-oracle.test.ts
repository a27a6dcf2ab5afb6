/**
 * Command-line runs a review found wrong, each now held to what it should say:
 * - a checkpoint whose forward is NaN (one norm weight NaN) passed the probe, because NaN bytes compare equal, and
 *   generated token 0 forever: now probe and generate stop with the logits named (src/model/nan-row.ts);
 * - `generate --draft-source oracle` without --oracle-mismatch failed after a whole classic run, and the oracle's
 *   last round drafted padding past the classic stream, counted as rejections: now no mismatches means every draft
 *   is accepted;
 * - `compare` ran dense targets only: an E-series target with its assistant now compares in its own engine.
 */
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { cliRun } from '../support/cli-run.ts';
import { GEMMA4_E_TINY, TINY_A } from '../support/fixtures.ts';

const cli = (...args: string[]) => cliRun(args);

/** A copy of tiny-a's target whose layer-0 input norm weight is bf16 NaN: every logit of every row is NaN. */
function nanTarget(dir: string): string {
  const out = path.join(dir, 'nan-target');
  cpSync(path.join(TINY_A, 'target'), out, { recursive: true });
  const file = path.join(out, 'model.safetensors');
  const b = readFileSync(file);
  const n = Number(b.readBigUInt64LE(0));
  const header = JSON.parse(b.subarray(8, 8 + n).toString('utf8'));
  const e = header['language_model.model.layers.0.input_layernorm.weight'];
  expect(e.dtype).toBe('BF16');
  for (let at = 8 + n + e.data_offsets[0]; at < 8 + n + e.data_offsets[1]; at += 2) b.writeUInt16LE(0x7fc0, at);
  writeFileSync(file, b);
  return out;
}

describe('CLI: non-finite logits, oracle drafts, compare across families', () => {
  it('a NaN forward stops probe and generate with the logits named (never a passing probe)', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-nan-'));
    const target = nanTarget(dir);
    const p = await cli('probe', '--target', target, '--lengths', '8', '--report', path.join(dir, 'p.json'));
    expect(p.code, p.out).toBe(1);
    expect(p.out).toContain("error: the target's logits hold NaN (row 0 of ");
    expect(p.out).not.toContain('probe passed');
    const g = await cli(
      'generate',
      '--target',
      target,
      '--tokens',
      '1,2,3',
      '--max-new',
      '3',
      '--json',
      path.join(dir, 'g.json'),
    );
    expect(g.code, g.out).toBe(1);
    expect(g.out).toContain("error: the target's logits hold NaN");
  }, 600_000);

  it('oracle drafts without --oracle-mismatch: every draft accepted, output equal to classic', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-oracle-'));
    const args = ['--target', path.join(TINY_A, 'target'), '--tokens', '2,3,4', '--max-new', '7'];
    const c = await cli('generate', ...args, '--json', path.join(dir, 'c.json'));
    expect(c.code, c.out).toBe(0);
    // max-new 7 after the first token: two rounds of K = 4, the second drafting past the 7th token
    const m = await cli(
      'generate',
      ...args,
      '--mode',
      'mtp',
      '--draft-source',
      'oracle',
      '--json',
      path.join(dir, 'm.json'),
    );
    expect(m.code, m.out).toBe(0);
    const classic = JSON.parse(readFileSync(path.join(dir, 'c.json'), 'utf8'));
    const mtp = JSON.parse(readFileSync(path.join(dir, 'm.json'), 'utf8'));
    expect(mtp.sha256).toBe(classic.sha256);
    expect(mtp.counters.rounds).toBe(2);
    expect(mtp.counters.accepted).toBe(mtp.counters.drafted);
    expect(m.out).not.toContain('first rejection');
  }, 600_000);

  it('compare runs an E-series target with its assistant (identical under exact)', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-compare-e-'));
    const prompts = path.join(dir, 'prompts.json');
    writeFileSync(prompts, JSON.stringify([[2, 10, 20, 30]]));
    const out = path.join(dir, 'cmp.json');
    const r = await cli(
      'compare',
      '--target',
      path.join(GEMMA4_E_TINY, 'target'),
      '--draft',
      path.join(GEMMA4_E_TINY, 'assistant'),
      '--prompts',
      prompts,
      '--max-new',
      '8',
      '--json',
      out,
    );
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain('1 of 1 prompts identical');
    const j = JSON.parse(readFileSync(out, 'utf8'));
    expect(j.results[0].identical).toBe(true);
  }, 600_000);
});
