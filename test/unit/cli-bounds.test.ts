/**
 * Every numeric option of the CLI has a range, checked when it is read, and the positions a run reaches are checked
 * against the model's max_position_embeddings once its config.json is read: each refusal is one line naming the
 * option, before any GPU is asked for. The CLI cases run with --verbose, which lets Dawn print its own messages when
 * it is asked for an adapter (it prints two limit warnings on lavapipe and SwiftShader, and its loader's errors
 * without a driver): one line of output therefore also shows that no adapter was requested.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { intList, intOption, positiveNumberOption } from '../../src/cli/args.ts';
import { checkPositions, MAX_POSITIONS, MAX_SEED, MAX_VOCAB } from '../../src/cli/bounds.ts';
import { cliRun } from '../support/cli-run.ts';
import { GEMMA4_E_TINY } from '../support/fixtures.ts';

const QWEN_TINY = path.resolve('test/fixtures/qwen-tiny/target');
const GEMMA_E = path.join(GEMMA4_E_TINY, 'target');

describe('numeric options: ranges checked when read', () => {
  it('integers above the range, past 2^53 or past 2^64 are refused with the range, never read as Infinity', () => {
    const msg = (v: string) => `--prefix must be an integer between 1 and ${MAX_POSITIONS} (got "${v}")`;
    for (const v of ['999999999999', '99999999999999999999999', '9007199254740993', '0'])
      expect(() => intOption({ prefix: v }, 'prefix', 1, MAX_POSITIONS), v).toThrow(msg(v));
    expect(intOption({ prefix: String(MAX_POSITIONS) }, 'prefix', 1, MAX_POSITIONS)).toBe(MAX_POSITIONS);
    expect(() => intOption({ seed: String(MAX_SEED + 1) }, 'seed', 0, MAX_SEED)).toThrow(
      `--seed must be an integer between 0 and ${MAX_SEED}`,
    );
  });

  it('lists: each value in its range, and at most so many values; a long value is cut in the message', () => {
    const b = { min: 1, max: MAX_POSITIONS, count: 4 };
    expect(intList({ lengths: '8, 20' }, 'lengths', b)).toEqual([8, 20]);
    expect(() => intList({ lengths: '8,2000000000' }, 'lengths', b)).toThrow(
      `--lengths must be a comma-separated list of integers between 1 and ${MAX_POSITIONS} (got "8,2000000000")`,
    );
    expect(() => intList({ lengths: '8,0' }, 'lengths', b)).toThrow('between 1 and');
    expect(() => intList({ lengths: '8,1e1' }, 'lengths', b)).toThrow('(got "8,1e1")');
    expect(() => intList({ lengths: '1,2,3,4,5' }, 'lengths', b)).toThrow('--lengths lists 5 values, more than 4');
    const ids = Array.from({ length: 40 }, () => String(MAX_VOCAB)).join(',');
    const e = (() => {
      try {
        intList({ tokens: ids }, 'tokens', { min: 0, max: MAX_VOCAB - 1, count: 100 });
      } catch (x) {
        return (x as Error).message;
      }
    })();
    // 45 characters of the value and an ellipsis: the message stays one short line however long the list
    expect(e).toBe(
      `--tokens must be a comma-separated list of integers between 0 and ${MAX_VOCAB - 1} (got "${ids.slice(0, 45)}...")`,
    );
  });

  it('decimal numbers (GB, seconds): above 0, at most the bound, digits only', () => {
    expect(positiveNumberOption({ 'shard-gb': '0.5' }, 'shard-gb', 1000)).toBe(0.5);
    for (const v of ['0', '-1', '1e3', '0x10', '', 'abc', '1001'])
      expect(() => positiveNumberOption({ 'shard-gb': v }, 'shard-gb', 1000), v).toThrow(
        `--shard-gb must be a number above 0 and at most 1000 (got "${v}")`,
      );
  });

  it("positions past the model's max_position_embeddings are refused with the sum that reaches them", () => {
    expect(() => checkPositions(4096, '--tokens 4096 tokens', 4096, 'target')).not.toThrow();
    expect(() => checkPositions(1e6, 'x', null, 'target')).not.toThrow(); // a config without the key
    expect(() => checkPositions(5004, '--lengths 5000 + --block 4', 4096, 'target')).toThrow(
      '--lengths 5000 + --block 4 = 5004 positions, past the 4096 that target/config.json declares (max_position_embeddings); Ringside refuses positions the model was not built for',
    );
  });
});

describe('the CLI refuses each unbounded input in one line, before asking for a GPU', () => {
  const out = mkdtempSync(path.join(tmpdir(), 'ringside-bounds-'));
  const report = ['--report', path.join(out, 'r.json')];
  const cases: [string[], string][] = [
    [
      ['probe', '--target', GEMMA_E, '--lengths', '99999999999999999999999', ...report],
      `error: --lengths must be a comma-separated list of integers between 1 and ${MAX_POSITIONS} (got "99999999999999999999999")`,
    ],
    [
      ['probe', '--target', GEMMA_E, '--lengths', '2000000000', ...report],
      `error: --lengths must be a comma-separated list of integers between 1 and ${MAX_POSITIONS} (got "2000000000")`,
    ],
    [
      ['trace', '--target', GEMMA_E, '--prefix', '999999999999', ...report],
      `error: --prefix must be an integer between 1 and ${MAX_POSITIONS} (got "999999999999")`,
    ],
    // the fixtures declare max_position_embeddings 4096
    [
      ['probe', '--target', GEMMA_E, '--lengths', '8,5000', ...report],
      'error: --lengths 5000 + --block 4 = 5004 positions, past the 4096 that target/config.json declares (max_position_embeddings); Ringside refuses positions the model was not built for',
    ],
    [
      ['trace', '--target', QWEN_TINY, '--prefix', '4000', '--traced', '200', ...report],
      'error: --prefix 4000 + --traced 200 = 4200 positions, past the 4096 that target/config.json declares',
    ],
    [
      ['generate', '--target', GEMMA_E, '--tokens', '1,2,3', '--max-new', '5000', '--json', path.join(out, 'g.json')],
      'error: --tokens 3 tokens + --max-new 5000 = 5003 positions, past the 4096 that target/config.json declares',
    ],
    [
      ['probe', '--target', GEMMA_E, '--prefill-chunk', '4000000000', ...report],
      `error: --prefill-chunk must be an integer between 1 and ${MAX_POSITIONS} (got "4000000000")`,
    ],
    [
      ['synth', '--preset', 'tiny', '--seed', '4294967296', '--out', out],
      `error: --seed must be an integer between 0 and ${MAX_SEED} (got "4294967296")`,
    ],
    [
      ['synth', '--preset', 'tiny', '--vocab', '99999999999', '--out', out],
      `error: --vocab must be an integer between 1 and ${MAX_VOCAB} (got "99999999999")`,
    ],
    [
      ['load-bench', '--model', GEMMA_E, '--max-context', '99999999999'],
      `error: --max-context must be an integer between 1 and ${MAX_POSITIONS} (got "99999999999")`,
    ],
    [['bench', '--rows', '1,99999999'], 'error: --rows must be a comma-separated list of integers between 1 and 8192'],
  ];
  for (const [args, message] of cases)
    it(args.slice(0, 5).join(' '), async () => {
      const r = await cliRun([...args, '--verbose'], undefined, 120_000);
      expect(r.code).toBe(1);
      expect(r.out.trim().split('\n')).toHaveLength(1);
      expect(r.out).toContain(message);
    }, 120_000);
});
