import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { TINY_A, loadGolden } from '../support/fixtures.ts';
import { tinyTokenizerJson } from '../support/tokenizer.ts';

const run = promisify(execFile);
const cli = (...args: string[]) => run('npm', ['run', '-s', 'cli', '--', ...args], { timeout: 240_000 });

describe('npm run cli -- generate', () => {
  it('classic and MTP (assistant and oracle sources) emit the 24 golden tokens; JSON carries the counters', async () => {
    const golden = await loadGolden();
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-gen-'));
    const base = ['--target', path.join(TINY_A, 'target'), '--tokens', golden.json.prompt.join(','), '--max-new', '24'];
    const runs: Record<string, string[]> = {
      classic: ['--mode', 'classic'],
      mtp: ['--mode', 'mtp', '--draft', path.join(TINY_A, 'assistant'), '--block', '3'],
      oracle: ['--mode', 'mtp', '--draft-source', 'oracle', '--oracle-mismatch', '2,3,10', '--block', '4'],
    };
    for (const [name, extra] of Object.entries(runs)) {
      await cli('generate', ...base, ...extra, '--json', path.join(dir, `${name}.json`));
      const r = JSON.parse(readFileSync(path.join(dir, `${name}.json`), 'utf8'));
      expect(r.tokens, name).toEqual(golden.json.greedy);
      if (name !== 'classic') {
        expect(r.mode).toBe('mtp');
        expect(r.rounds ?? r.counters.rounds).toBeGreaterThan(0);
        expect(r.counters.drafted).toBe(r.counters.rounds * (r.block - 1));
      }
    }
    const oracle = JSON.parse(readFileSync(path.join(dir, 'oracle.json'), 'utf8'));
    expect(oracle.counters.accepted).toBeGreaterThan(0);
  });

  it('takes a text prompt through tokenizer.json with the chat template and writes the decoded text', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-tok-'));
    const target = path.join(dir, 'target');
    mkdirSync(target);
    for (const f of ['config.json', 'model.safetensors']) copyFileSync(path.join(TINY_A, 'target', f), path.join(target, f));
    writeFileSync(path.join(target, 'tokenizer.json'), JSON.stringify(tinyTokenizerJson()));
    const out = path.join(dir, 'g.json');
    const { stdout } = await cli('generate', '--target', target, '--prompt', 'hello world', '--chat', '--max-new', '6', '--mode', 'classic', '--json', out);
    const r = JSON.parse(readFileSync(out, 'utf8'));
    expect(r.prompt[0]).toBe(2);
    expect(r.tokens.length).toBe(6);
    expect(typeof r.text).toBe('string');
    expect(stdout).toMatch(/text: /);
  });
});
