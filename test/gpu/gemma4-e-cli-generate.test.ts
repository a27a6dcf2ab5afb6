/**
 * `generate` and `trace` on an E-series folder (gemma4-e-tiny) through the command line: the CLI builds the
 * E-series target (ETargetModel) and its centroid-head assistant, MTP (assistant and oracle drafts) emits classic's
 * tokens with the same SHA-256 past the window, and the teacher-forced trace runs on the E-series target (block rows
 * byte-equal to the chain under exact; ring-chronological diverges once the rings have wrapped).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { validateReport } from '../../src/parity/report.ts';
import { GEMMA4_E_TINY, loadGolden } from '../support/fixtures.ts';
import { cli, expectTraceExact, familyFolders, generateFiveWaysAgree } from './helpers/family-cli.ts';

const { target, assistant } = familyFolders(GEMMA4_E_TINY);

describe('npm run cli on gemma4-e-tiny: generate and trace', () => {
  it('generate: classic, MTP with the assistant and with oracle drafts give the same 60 tokens (SHA-256)', async () => {
    const golden = await loadGolden(GEMMA4_E_TINY);
    const { r } = await generateFiveWaysAgree(target, assistant, golden.json.prompt, 'ringside-egen-');
    expect(r.classic.tokens.slice(0, 16)).toEqual(golden.json.greedy);
    // the assistant's first round drafts the goldens' draft tokens (centroid head on the donors' K/V)
    expect(r.mtp.rounds![0].drafts).toEqual(golden.json.draft.tokens);
  });

  it('trace: all block rows equal under exact; ring-chronological diverges after the wrap', async () => {
    const { dir, args } = await expectTraceExact(target, 'ringside-etrace-', 10);
    const ring = path.join(dir, 'ring.json');
    const bad = await cli(...args, '--policy', 'ring-chronological', '--report', ring).catch((x) => x);
    const rr = JSON.parse(readFileSync(ring, 'utf8'));
    expect(validateReport(rr)).toEqual([]);
    expect(rr.verdict, String(bad.stdout)).toBe('diverges');
    expect(rr.metrics.rowsByteEqual).toBeLessThan(24);
  });
});
