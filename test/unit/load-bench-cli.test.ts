/**
 * `load-bench --model <synth --preset qwen-tiny output>` failed with Gemma's
 * 'model_type "qwen3_5" is not supported', and `--max-context abc` was reported as "planMemory: maxContext must be a
 * positive integer, found NaN" (an internal name) only after every file had been read. load-bench now opens the
 * folder with its family's opener and plans a Qwen3.5 target with planQwenMemory (uploading it with
 * uploadQwenWeights), and checks its options before it reads anything.
 *
 * The Qwen3.5 run uploads to the GPU (Dawn on lavapipe, as `npm test` provisions it); the option checks need none.
 */
import { cp, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadBench } from '../../src/cli/commands/load-bench.ts';
import { qwenSynthGeometry } from '../../src/format/qwen3_5/synthetic.ts';
import { writeSynthetic } from '../../src/node/synthetic.ts';
import { TINY_A } from '../support/fixtures.ts';

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'ringside-load-bench-'));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

function run(values: Record<string, string>): { done: Promise<number>; out: string[]; err: string[] } {
  const out: string[] = [];
  const err: string[] = [];
  // main.ts fills in the defaults before a command runs
  const done = loadBench.run(
    { values: { 'max-context': '4096', ...values }, positionals: [] },
    { out: (t) => out.push(t), err: (t) => err.push(t) },
  );
  return { done, out, err };
}

describe('load-bench options', () => {
  it.each([
    ['max-context', 'abc', '--max-context must be an integer between 1 and 1048576 (got "abc")'],
    ['max-context', '0', '--max-context must be an integer between 1 and 1048576 (got "0")'],
    ['max-context', '1e3', '--max-context must be an integer between 1 and 1048576 (got "1e3")'],
    ['max-context', '', '--max-context must be an integer between 1 and 1048576 (got "")'],
    ['max-context', '99999999999', '--max-context must be an integer between 1 and 1048576 (got "99999999999")'],
    ['memory-budget', 'abc', '--memory-budget must be a number above 0 and at most 100000 (got "abc")'],
    ['memory-budget', '-1', '--memory-budget must be a number above 0 and at most 100000 (got "-1")'],
    ['memory-budget', '0', '--memory-budget must be a number above 0 and at most 100000 (got "0")'],
    ['memory-budget', '1e9', '--memory-budget must be a number above 0 and at most 100000 (got "1e9")'],
  ])('--%s %j is refused by name before any file is read', async (option, value, message) => {
    // The folder does not exist: the option's message comes first, so nothing was opened.
    await expect(run({ model: path.join(tmp, 'nonexistent'), [option]: value }).done).rejects.toThrow(
      new Error(message),
    );
  });

  it('--model is required', async () => {
    await expect(run({}).done).rejects.toThrow('--model DIR is required');
  });
});

describe('load-bench on a Qwen3.5 checkpoint (synth --preset qwen-tiny)', () => {
  it('measures it: the Qwen3.5 memory plan and upload', async () => {
    const dir = path.join(tmp, 'qwen');
    await writeSynthetic(dir, qwenSynthGeometry('qwen-tiny'), { seed: 1 });
    const r = run({ model: dir, 'max-context': '256' });
    expect(await r.done).toBe(0);
    const j = JSON.parse(r.out.join('\n'));
    expect(j.model).toEqual([path.join(dir, 'target')]);
    expect(j.bytes).toBeGreaterThan(0);
    expect(j.fileBytes).toBeGreaterThanOrEqual(j.bytes * 0.9);
    // planned as Qwen3.5: the recurrent state of its Gated DeltaNet layers is in the cache
    expect(j.plan.cacheGB).toBeGreaterThan(0);
    expect(j.plan.buffers).toBeGreaterThan(100);
  });

  it('refuses a Qwen3.5 target with another checkpoint beside it, saying which', async () => {
    const dir = path.join(tmp, 'qwen-and-gemma');
    await writeSynthetic(dir, qwenSynthGeometry('qwen-tiny'), { seed: 1 });
    await cp(path.join(TINY_A, 'assistant'), path.join(dir, 'assistant'), { recursive: true });
    await expect(run({ model: dir }).done).rejects.toThrow(
      `${dir}: a Qwen3.5 target (${path.join(dir, 'target')}) with another checkpoint beside it (${path.join(dir, 'assistant')}); load-bench measures a Qwen3.5 target alone (its MTP head is inside it): give its folder as --model`,
    );
  });
});
