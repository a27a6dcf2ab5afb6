/**
 * How the command line takes its options before any model is read (a review of the CLI as a first-time user found
 * each of these): integers written as decimals only, no stray words, output files whose folder exists, paths
 * relative to where `npm run cli` was typed, another family's policy named as such, prompts that hold tokens, and
 * option combinations that would otherwise be ignored without a word. Every case here fails before a GPU is asked for.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { intList, intOption, outputFileOption } from '../../src/cli/args.ts';
import { checkPolicyName, policyFor } from '../../src/model/policy-registry.ts';
import { generateClassic, generateMtp, type GenerateTarget } from '../../src/model/generate.ts';
import { cliRun } from '../support/cli-run.ts';
import { DEMO, GEMMA4_MOE_TINY, TINY_A } from '../support/fixtures.ts';
import { parseCommandOptions, UsageError } from '../../src/cli/parse-options.ts';
import { resolveCheckpointOption } from '../../src/cli/checkpoint-dir.ts';
import { defaultReportPath } from '../../src/cli/report-path.ts';
import type { Command } from '../../src/cli/command.ts';

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
    const b = { min: 1, max: 100, count: 8 };
    expect(intList({ lengths: '8, 20' }, 'lengths', b)).toEqual([8, 20]);
    expect(() => intList({ lengths: '8,1e1' }, 'lengths', b)).toThrow(
      '--lengths must be a comma-separated list of integers between 1 and 100 (got "8,1e1")',
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
    expect(() => policyFor('gemma4', 'gdn-chunked')).toThrow(
      /^policy gdn-chunked applies to Qwen3.5 targets only; Gemma 4 targets take exact, ring-chronological, /,
    );
    expect(() => policyFor('gemma4', 'no-such')).toThrow(/^Unknown policy "no-such" \(known: exact, /);
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

  it("mistyped options get one line in the CLI's words, naming the option and the command's --help", () => {
    const probeCmd = {
      name: 'probe',
      summary: '',
      usage: '',
      options: { block: { type: 'string', help: 'block width K' }, 'no-localize': { type: 'boolean', help: '' } },
      run: async () => 0,
    } as Command;
    const refusal = (argv: string[]) => {
      try {
        parseCommandOptions(probeCmd, argv);
      } catch (e) {
        expect(e).toBeInstanceOf(UsageError);
        return (e as Error).message;
      }
      throw new Error(`${argv.join(' ')} was taken`);
    };
    const help = 'see npm run cli -- probe --help';
    expect(refusal(['--foo', '1'])).toBe(`unknown option --foo for probe; ${help}`);
    expect(refusal(['--blok', '3'])).toBe(`unknown option --blok for probe (did you mean --block?); ${help}`);
    expect(refusal(['-x'])).toBe(`unknown option -x for probe; ${help}`);
    const needs = `--block needs a value (block width K); write --block=VALUE for one that starts with "--"; ${help}`;
    expect(refusal(['--block'])).toBe(needs);
    expect(refusal(['--block', '--no-localize'])).toBe(needs);
    expect(refusal(['--no-localize=yes'])).toBe(`--no-localize is a switch and takes no value; ${help}`);
    expect(parseCommandOptions(probeCmd, ['--block=5', '--no-localize'])).toEqual({ block: '5', 'no-localize': true });
  });

  it('the CLI prints those refusals alone: no parseArgs text, no help page after them', async () => {
    for (const [args, line] of [
      [['probe', '--foo'], 'unknown option --foo for probe; see npm run cli -- probe --help'],
      [['prob'], 'unknown command "prob"; the commands are info, selftest, '],
    ] as const) {
      const r = await cli([...args]);
      expect(r.code).toBe(2);
      expect(r.out.trim().split('\n')).toHaveLength(1);
      expect(r.out).toContain(line);
      expect(r.out).not.toMatch(/To specify a positional argument|usage:/);
    }
  }, 60_000);

  it('a folder holding target/ and assistant/ is answered with the options to pass (public/demo)', async () => {
    const demo = path.relative(process.cwd(), DEMO);
    const r = await cli(['probe', '--target', demo]);
    expect(r.code).toBe(1);
    expect(r.out.trim()).toBe(
      `error: ${demo} holds two checkpoints (target/, assistant/): pass --target ${demo}/target --draft ${demo}/assistant`,
    );
    expect(() => resolveCheckpointOption('draft', demo, 'draft', 'draft')).toThrow(
      `${demo} holds two checkpoints (target/, assistant/): pass --draft ${demo}/assistant (with --target ${demo}/target)`,
    );
    expect(() => resolveCheckpointOption('model', demo, 'target')).toThrow(`: pass --model ${demo}/target`);
    // load-bench measures such a folder whole
    expect(resolveCheckpointOption('model', demo, 'folder')).toBe(demo);
    expect(resolveCheckpointOption('target', `${demo}/target`, 'target', 'draft')).toBe(`${demo}/target`);
  }, 60_000);

  it('probe and trace without --report write to reports/<command>-YYYYMMDD-HHMMSS.json, never over an earlier one', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-reports-'));
    const at = new Date(2026, 0, 2, 3, 4, 5);
    expect(defaultReportPath('probe', at, dir)).toBe(path.join('reports', 'probe-20260102-030405.json'));
    mkdirSync(path.join(dir, 'reports'));
    writeFileSync(path.join(dir, 'reports', 'probe-20260102-030405.json'), '{}');
    expect(defaultReportPath('probe', at, dir)).toBe(path.join('reports', 'probe-20260102-030405-2.json'));
    expect(defaultReportPath('trace', at, dir)).toBe(path.join('reports', 'trace-20260102-030405.json'));
  });

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
        '--oracle-mismatch must be a comma-separated list of integers between 0 and 63 (got "zz")',
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
