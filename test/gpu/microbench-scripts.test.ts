/**
 * The integer-sum microbenchmarks (scripts/int8-matrix-microbench.mjs, scripts/dp4a-microbench.mjs) back claims of
 * the README and docs/PERFORMANCE.md: their kernels give a verify block's rows the bits of single rows (the int8
 * script compares a block's first rows with the smaller M run before it; the dp4a script every row with that row of
 * x run alone), and every row lies close to float64. On this adapter (no matrix units) the int8 script runs its plain-WGSL twin and the dp4a script
 * its kernel, at small shapes; each checked run must write every output (its output buffer starts as NaN, which a
 * refused buffer write once left unset without a word) and report equal rows, and any WebGPU error outside an error
 * scope must fail the script.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const node = (script: string, args: string[]) =>
  run(process.execPath, [script, ...args], { timeout: 300_000, maxBuffer: 1 << 20 });

/** The lines a script prints for its runs, with the bound on their error against float64. */
function expectChecked(stdout: string, runs: number) {
  const lines = stdout.split('\n').filter((l) => / us, /.test(l));
  expect(lines).toHaveLength(runs);
  for (const line of lines) {
    // the fixed point keeps 30 bits of each group's largest x: its error is a few f32 roundings of the closing,
    // about 1e-7 of the largest output; 1e-6 is an f32 chain's error ten times over
    const err = Number(/\|y - f64 of x\| ([\d.e+-]+)/.exec(line)?.[1]);
    expect(err).toBeLessThan(1e-6);
    expect(line).not.toMatch(/DIFFER|OTHER BYTES|NaN/);
  }
  return lines;
}

describe('integer-sum microbenchmarks', () => {
  it("int8-matrix-microbench: the twin's block is close to float64 in every row, its first row the single row's bits", async () => {
    const { stdout, stderr } = await node('scripts/int8-matrix-microbench.mjs', [
      ...['--n', '64', '--k', '512', '--rows', '1,4', '--slices', '2', '--cold', '1', '--iters', '2'],
    ]);
    expect(stderr).not.toMatch(/WebGPU error|validation/i);
    const lines = expectChecked(stdout, 2);
    expect(lines[1]).toMatch(/rows of M 1 equal/);
  });

  it('dp4a-microbench: every row of blocks of 4 and 8 has the bits of its row run alone, in every module', async () => {
    // m: a module per M; 4: one module, rows counted at run time; dual: one module, a row's loop and a block's
    for (const rp of ['m', '4', 'dual']) {
      const { stdout, stderr } = await node('scripts/dp4a-microbench.mjs', [
        ...['--n', '128', '--k', '1024', '--rows', '1,4,8', '--cfg', '128:16:2:4', '--rp', rp, '--cold', '1'],
        ...['--iters', '2'],
      ]);
      expect(stderr).not.toMatch(/WebGPU error|validation/i);
      // each line: the error of all M rows against float64, and each row against that x row run with M = 1
      for (const line of expectChecked(stdout, 3)) expect(line).toMatch(/every row equals its single-row run$/);
    }
  });
});
