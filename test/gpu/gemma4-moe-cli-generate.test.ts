/**
 * `generate` and `trace` on the MoE folder (gemma4-moe-tiny) through the command line: the CLI builds the MoE target
 * (MoETargetModel) and its dense assistant, MTP (assistant and oracle drafts, f32 and bf16) emits classic's tokens
 * with the same SHA-256 past the window, and the teacher-forced trace runs on the MoE target: block rows byte-equal
 * to the chain under exact; moe-grouped (verify blocks grouped by expert) diverges. `--router transformers` (generate,
 * compare) runs the goldens' router convention and gives their greedy tokens; MLX's, the default, does not.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { validateReport } from '../../src/parity/report.ts';
import { FIXTURES, GEMMA4_E_TINY, GEMMA4_MOE_TINY, loadGolden } from '../support/fixtures.ts';
import { cli, expectTraceExact, familyFolders, generateFiveWaysAgree } from './helpers/family-cli.ts';

const { target, assistant } = familyFolders(GEMMA4_MOE_TINY);

describe('npm run cli on gemma4-moe-tiny: generate and trace', () => {
  it('generate: classic, MTP with the assistant and with oracle drafts give the same 60 tokens (SHA-256)', async () => {
    const golden = await loadGolden(GEMMA4_MOE_TINY);
    const { r, stdout } = await generateFiveWaysAgree(target, assistant, golden.json.prompt, 'ringside-moegen-');
    expect(stdout.mtp).toMatch(/^mtp: 60 tokens, sha256 [0-9a-f]{16}…/m);
    expect(stdout.mtp).toMatch(/first rejection: round \d+/);
    for (const name of ['mtp', 'oracle']) expect(r[name].policy).toBe('exact');
  });

  it('generate refuses moe-grouped on a target without experts, and takes it on the MoE folder', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-moegen-'));
    const dense = path.resolve('test/fixtures/gemma4-e-tiny/target');
    const args = ['--tokens', '1,2,3,4,5', '--max-new', '8', '--policy', 'moe-grouped'];
    const bad = await cli('generate', '--target', dense, ...args, '--json', path.join(dir, 'x.json')).catch((e) => e);
    expect(bad.code).not.toBe(0);
    expect(String(bad.stderr)).toMatch(/policy moe-grouped applies to Gemma 4 mixture-of-experts targets only/);
    const file = path.join(dir, 'grouped.json');
    await cli('generate', '--target', target, ...args, '--json', file);
    expect(JSON.parse(readFileSync(file, 'utf8')).policy).toBe('moe-grouped');
  });

  it('trace: all block rows equal under exact; moe-grouped verify blocks diverge', async () => {
    const { dir, args } = await expectTraceExact(target, 'ringside-moetrace-', 6);
    const grouped = path.join(dir, 'grouped.json');
    const bad = await cli(...args, '--policy', 'moe-grouped', '--report', grouped).catch((x) => x);
    const g = JSON.parse(readFileSync(grouped, 'utf8'));
    expect(validateReport(g)).toEqual([]);
    expect(g.provenance.policy).toBe('moe-grouped');
    expect(g.verdict, String(bad.stdout)).toBe('diverges');
    expect(g.metrics.rowsByteEqual).toBeLessThan(24);
  });

  it("--router transformers gives the goldens' greedy tokens, classic and MTP; the default (MLX's router) leaves them at step 7", async () => {
    const golden = await loadGolden(GEMMA4_MOE_TINY);
    const greedy = golden.json.greedy;
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-moerouter-'));
    const base = ['--target', target, '--tokens', golden.json.prompt.join(','), '--max-new', String(greedy.length)];
    const gen = async (name: string, ...extra: string[]) => {
      const file = path.join(dir, `${name}.json`);
      await cli('generate', ...base, ...extra, '--json', file);
      return JSON.parse(readFileSync(file, 'utf8')) as { tokens: number[]; router?: string; sha256: string };
    };
    const classic = await gen('classic', '--router', 'transformers');
    const mtp = await gen('mtp', '--router', 'transformers', '--mode', 'mtp', '--draft', assistant, '--block', '4');
    const mlx = await gen('default');
    expect(classic.tokens).toEqual(greedy);
    expect(mtp.tokens).toEqual(greedy);
    expect(mtp.sha256).toBe(classic.sha256);
    expect([classic.router, mtp.router, mlx.router]).toEqual(['transformers', 'transformers', 'mlx']);
    // MLX's router scalar, bf16(scale x H^-0.5), moves the router scores by ~1e-2 (gemma4-moe-golden.test.ts) and
    // flips experts where a top-k cut is close: the tokens part where the goldens' own top-two gap is small
    const first = mlx.tokens.findIndex((t, i) => t !== greedy[i]);
    const V = 512;
    const row = Array.from((await golden.tensor('greedy_logits')).data.subarray(first * V, (first + 1) * V));
    const [top1, top2] = [...row].sort((a, b) => b - a);
    console.log(
      `gemma4-moe-tiny generate: --router transformers = golden ${greedy.length} tokens (classic and MTP); default mlx parts at step ${first} (golden top-two gap ${(top1 - top2).toExponential(2)}): ${mlx.tokens[first]} for ${greedy[first]}`,
    );
    expect(first).toBe(7);
    expect(top1 - top2).toBeLessThan(1e-2);
  });

  it('compare --router transformers records the router; --router is refused in one line on targets without experts', async () => {
    const golden = await loadGolden(GEMMA4_MOE_TINY);
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-moerouter-'));
    const prompts = path.join(dir, 'prompts.json');
    writeFileSync(prompts, JSON.stringify([golden.json.prompt]));
    const file = path.join(dir, 'compare.json');
    const args = ['--prompts', prompts, '--max-new', '16', '--router', 'transformers'];
    await cli('compare', '--target', target, '--draft', assistant, ...args, '--json', file);
    const c = JSON.parse(readFileSync(file, 'utf8'));
    expect(c.router).toBe('transformers');
    expect(c.identical).toBe(1);
    const e = familyFolders(GEMMA4_E_TINY);
    const qwen = path.join(FIXTURES, 'qwen-tiny', 'target');
    const refusals = [
      ['compare', '--target', e.target, '--draft', e.assistant, ...args, '--json', file],
      ['generate', '--target', e.target, '--tokens', '1,2', '--router', 'mlx', '--json', file],
      ['generate', '--target', qwen, '--tokens', '1,2', '--router', 'transformers', '--json', file],
    ];
    for (const argv of refusals) {
      const bad = await cli(...argv).catch((x) => x);
      expect(bad.code, argv.join(' ')).toBe(1);
      expect(String(bad.stderr).trim()).toBe(
        `error: ${argv[2]}: --router applies to Gemma 4 mixture-of-experts targets only; this target has no router`,
      );
    }
  });
});
