import type { GenerateResult } from '../model/generate.ts';

/**
 * Free-generation comparison of one prompt: classic vs MTP greedy output, identical or the first
 * differing token index with both continuations around it.
 */
export interface GenerationDiff {
  prompt: number[];
  identical: boolean;
  /** Index into the emitted tokens of the first difference (or of the shorter end), null if identical. */
  firstDifference: number | null;
  /** Tokens [start, start + 16) of each continuation around the first difference. */
  window?: { start: number; classic: number[]; mtp: number[] };
  classicSha256: string;
  mtpSha256: string;
  counters: GenerateResult['counters'];
  tokensPerSecond: { classic: number; mtp: number };
}

export function diffGenerations(classic: GenerateResult, mtp: GenerateResult): GenerationDiff {
  const a = classic.tokens;
  const b = mtp.tokens;
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  const identical = i === a.length && i === b.length;
  const start = Math.max(0, i - 4);
  return {
    prompt: classic.prompt,
    identical,
    firstDifference: identical ? null : i,
    window: identical ? undefined : { start, classic: a.slice(start, start + 16), mtp: b.slice(start, start + 16) },
    classicSha256: classic.sha256,
    mtpSha256: mtp.sha256,
    counters: mtp.counters,
    tokensPerSecond: { classic: classic.timings.tokensPerSecond, mtp: mtp.timings.tokensPerSecond },
  };
}
