/**
 * The generation view's rounds model (no DOM): each MTP round as a row with its drafts marked against the
 * verify, and the one-line summary above the rounds table.
 */
import { describe, expect, it } from 'vitest';
import { roundEmitted, type MtpRound } from '../../src/model/generate.ts';
import { MAX_SHOWN_ROUNDS, roundRows, roundsSummary } from '../../src/ui/generation/generation-model.ts';

// K = 4 after a 2-token prompt; tokens = [50, 10, 11, 99, 12, 13, 14, 15, 77, ...]
const rounds: MtpRound[] = [
  { at: 1, pos: 3, drafts: [10, 11, 12], accepted: 2, verify: [10, 11, 99, 5] },
  { at: 4, pos: 6, drafts: [12, 13, 14], accepted: 3, verify: [12, 13, 14, 15] },
  { at: 8, pos: 10, drafts: [70, 71, 72], accepted: 0, verify: [77, 1, 2, 3] },
];

describe('generation rounds', () => {
  it('marks accepted drafts, the first rejected one and the unverified rest, with the verify token', () => {
    const rows = roundRows(rounds);
    expect(rows.map((r) => r.drafts.map((d) => `${d.token}:${d.mark}`).join(' '))).toEqual([
      '10:accepted 11:accepted 12:rejected',
      '12:accepted 13:accepted 14:accepted',
      '70:rejected 71:unverified 72:unverified',
    ]);
    expect(rows.map((r) => [r.index, r.at, r.pos, r.accepted, r.verifyToken, r.rejectedDraft])).toEqual([
      [0, 1, 3, 2, 99, 12],
      [1, 4, 6, 3, 15, null],
      [2, 8, 10, 0, 77, 70],
    ]);
    // the emitted tokens: accepted drafts, then the verify's token
    expect(rounds.flatMap(roundEmitted)).toEqual([10, 11, 99, 12, 13, 14, 15, 77]);
  });

  it('summarises the rounds and where the first rejection is', () => {
    expect(roundsSummary(rounds)).toBe(
      '3 rounds, 2 with a rejected draft; the first at round 0, token 3: drafted 12, the verify emitted 99.',
    );
    expect(roundsSummary([rounds[1]])).toBe('1 round, 0 with a rejected draft: every draft was accepted.');
    expect(roundsSummary([])).toBe('No MTP rounds.');
  });

  it('caps the rows at MAX_SHOWN_ROUNDS', () => {
    const many = Array.from({ length: MAX_SHOWN_ROUNDS + 5 }, (_, i) => ({ ...rounds[2], at: 1 + i, pos: 3 + i }));
    const rows = roundRows(many);
    expect(rows.length).toBe(MAX_SHOWN_ROUNDS);
    expect(rows[rows.length - 1].index).toBe(MAX_SHOWN_ROUNDS - 1);
  });
});
