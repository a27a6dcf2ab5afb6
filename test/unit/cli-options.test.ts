/**
 * How the command line takes its options before any model is read (a review of the CLI as a first-time user found
 * each of these): integers written as decimals only, no stray words, output files whose folder exists, paths
 * relative to where `npm run cli` was typed, another family's policy named as such, prompts that hold tokens, and
 * option combinations that would otherwise be ignored without a word. Every case here fails before a GPU is asked for.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { intList, intOption, outputFileOption } from '../../src/cli/args.ts';
import { checkPolicyName, familyPolicy } from '../../src/model/family-policies.ts';
import { generateClassic, generateMtp, type GenerateTarget } from '../../src/model/generate.ts';
import { cliRun } from '../support/cli-run.ts';
import { GEMMA4_MOE_TINY, TINY_A } from '../support/fixtures.ts';

/** `npm run cli` from `cwd`, quick to fail: every case here is refused before a GPU is asked for. */
const cli = (args: string[], cwd?: string) => cliRun(args, cwd, 120_000);

describe('CLI options', () => {
  it('integers are decimals: "0x4", "1e1", "" and " 4 " are refused, not read as 4, 10 or 0', () => {
    expect(intOption({ block: '4' }, 'block', 1, 16)).toBe(4);
    for (const bad of ['0x4', '1e1', '', ' 4 ', '4.0', '+4'])
      expect(() => intOption({ block: bad }, 'block', 1, 16), bad).toThrow(
        `--block must be an integer between 1 and 16 (got "${bad}")`,
      );
    expect(() => intOption({ block: '-2' }, 'block', 1, 16)).toThrow('between 1 and 16 (got "-2")');
    expect(intList({ lengths: '8, 20' }, 'lengths')).toEqual([8, 20]);
    expect(() => intList({ lengths: '8,1e1' }, 'lengths')).toThrow(
      '--lengths must be a comma-separated list of non-negative integers (got "8,1e1")',
    );
  });

  it('an output file is checked before the run: its folder must exist and it must not be a folder', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-out-'));
    expect(outputFileOption({ report: path.join(dir, 'r.json') }, 'report')).toBe(path.join(dir, 'r.json'));
    expect(() => outputFileOption({ report: path.join(dir, 'nodir', 'r.json') }, 'report')).toThrow(
      `--report ${path.join(dir, 'nodir', 'r.json')}: the folder ${path.join(dir, 'nodir')} does not exist`,
    );
    expect(() => outputFileOption({ out: dir }, 'out')).toThrow(
      `--out ${dir}: is a folder; give the path of the file to write`,
    );
  });

  it("another family's policy is named as such, before any model is read", () => {
    expect(() => familyPolicy('gemma4', 'gdn-chunked')).toThrow(
      /^policy gdn-chunked applies to Qwen3.5 targets only; Gemma 4 targets take exact, ring-chronological, /,
    );
    expect(() => familyPolicy('gemma4', 'no-such')).toThrow(/^Unknown policy "no-such" \(known: exact, /);
    expect(() => checkPolicyName('gemma4', 'moe-grouped')).not.toThrow(); // decided once the target is open
    expect(() => checkPolicyName('qwen3_5', 'ring-chronological')).toThrow(/ring-chronological/);
  });

  it('generation refuses an empty prompt by name (not a failure reading index 0 of nothing)', async () => {
    // the refusal comes before the target is touched: a target whose every method throws shows that
    const untouched = new Proxy({} as GenerateTarget, {
      get: () => {
        throw new Error('the target was used');
      },
    });
    const msg = 'the prompt is empty: generation needs at least one token to continue';
    await expect(generateClassic(untouched, [], { maxNew: 4 })).rejects.toThrow(msg);
    const source = { name: 'none', draft: async () => [] };
    await expect(generateMtp(untouched, source, [], 4, { maxNew: 4 })).rejects.toThrow(msg);
  });

  it('refuses stray words and a second "--", instead of dropping the options after it', async () => {
    const r = await cli(['bench', '--no-kernels', '--', '--json', 'x.json']);
    expect(r.code).toBe(2);
    expect(r.out).toContain('unexpected arguments "--json" "x.json": bench takes only --options');
    const s = await cli(['probe', '--target', 'x', '--report', 'r.json', 'extra']);
    expect(s.code).toBe(2);
    expect(s.out).toContain('unexpected argument "extra"');
  }, 60_000);

  it('generate refuses option combinations it would ignore, before reading a model', async () => {
    const base = ['generate', '--target', path.join(TINY_A, 'target'), '--json', path.join(tmpdir(), 'g.json')];
    const cases: [string[], string][] = [
      [['--tokens', '1,2', '--prompt', 'hi'], 'give --tokens or --prompt, not both'],
      [['--tokens', '1,2', '--chat'], '--chat wraps --prompt TEXT: give --prompt'],
      [
        ['--tokens', '1,2', '--oracle-mismatch', '3'],
        '--oracle-mismatch applies to --mode mtp --draft-source oracle only',
      ],
      [
        ['--tokens', '1,2', '--mode', 'mtp', '--draft-source', 'oracle', '--oracle-mismatch', 'zz'],
        '--oracle-mismatch must be a comma-separated list of non-negative integers (got "zz")',
      ],
    ];
    const qwen = ['generate', '--target', 'test/fixtures/qwen-tiny/target', '--tokens', '1', '--json', 'g.json'];
    const q = await cli([...qwen, '--mode', 'mtp', '--draft-position', 'mlxcel']);
    expect(q.out).toContain('error: --draft-position applies to Gemma 4 assistants, not to Qwen3.5 MTP heads');
    for (const [extra, msg] of cases) {
      const r = await cli([...base, ...extra]);
      expect(r.code, extra.join(' ')).toBe(1);
      expect(r.out).toContain(`error: ${msg}`);
    }
  }, 120_000);

  it('paths are relative to where `npm run cli` was typed, and a missing folder is named', async () => {
    // from test/fixtures, "gemma4-e-tiny/target" is the E-series fixture: forward opens it and refuses --router,
    // which only a mixture-of-experts target takes
    const r = await cli(
      ['forward', '--model', 'gemma4-e-tiny/target', '--router', 'mlx', '--tokens', '1', '--out', 'f.safetensors'],
      path.dirname(GEMMA4_MOE_TINY),
    );
    expect(r.code).toBe(1);
    expect(r.out).toContain(
      'error: gemma4-e-tiny/target: --router applies to Gemma 4 mixture-of-experts targets only; this target has no router',
    );
    const m = await cli(['probe', '--target', '/nonexistent/t', '--report', path.join(tmpdir(), 'p.json')]);
    expect(m.out).toContain('error: /nonexistent/t: no such folder (a checkpoint folder holds config.json');
  }, 60_000);
});
