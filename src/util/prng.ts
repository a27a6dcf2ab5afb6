/** Deterministic pseudo-random token ids (a 32-bit LCG): test streams and benchmark prompts. */
export function pseudoRandomTokens(n: number, seed: number, vocab: number): number[] {
  const out: number[] = [];
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out.push(s % vocab);
  }
  return out;
}
