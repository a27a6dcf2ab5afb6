import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { TINY_A, TINY_A_F64, loadGolden, loadTransformersF32, maxAbsDiff, tinyTarget } from '../support/fixtures.ts';
import { tinyTokenizerJson } from '../support/tokenizer.ts';
import { loadReferenceWeights, referenceGreedy, type TargetWeights } from '../../src/reference/index.ts';

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
        expect(r.counters.rounds).toBeGreaterThan(0);
        expect(r.counters.drafted).toBe(r.counters.rounds * (r.block - 1));
        // one compact line per round: {at, pos, drafts, accepted, verify}, numbers only
        expect(r.rounds.length, name).toBe(r.counters.rounds);
        const text = readFileSync(path.join(dir, `${name}.json`), 'utf8');
        expect(text).toContain(`\n  ${JSON.stringify(r.rounds[0])},\n`);
        const stream = [r.tokens[0]];
        for (const x of r.rounds as {
          at: number;
          pos: number;
          drafts: number[];
          accepted: number;
          verify: number[];
        }[]) {
          expect(Object.keys(x)).toEqual(['at', 'pos', 'drafts', 'accepted', 'verify']);
          expect(x.at).toBe(stream.length);
          expect(x.pos).toBe(golden.json.prompt.length + x.at);
          expect(x.drafts.length).toBe(r.block - 1);
          expect(x.verify.length).toBe(r.block);
          stream.push(...x.drafts.slice(0, x.accepted), x.verify[x.accepted]);
        }
        expect(stream.slice(0, r.tokens.length)).toEqual(r.tokens);
        if (name === 'mtp') expect(r.rounds[0].drafts).toEqual(golden.json.draft.tokens.slice(0, 2));
      } else expect(r.rounds).toBeUndefined();
    }
    const oracle = JSON.parse(readFileSync(path.join(dir, 'oracle.json'), 'utf8'));
    expect(oracle.counters.accepted).toBeGreaterThan(0);
  });

  it('takes a text prompt through tokenizer.json with the chat template and writes the decoded text', async () => {
    const tokenizer = tinyTokenizerJson() as { model: { vocab: Record<string, number> } };
    const vocab = tokenizer.model.vocab;
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-tok-'));
    const target = path.join(dir, 'target');
    mkdirSync(target);
    for (const f of ['config.json', 'model.safetensors'])
      copyFileSync(path.join(TINY_A, 'target', f), path.join(target, f));
    writeFileSync(path.join(target, 'tokenizer.json'), JSON.stringify(tinyTokenizerJson()));
    const out = path.join(dir, 'g.json');
    const { stdout } = await cli(
      'generate',
      '--target',
      target,
      '--prompt',
      'hello world',
      '--chat',
      '--max-new',
      '6',
      '--mode',
      'classic',
      '--json',
      out,
    );
    const r = JSON.parse(readFileSync(out, 'utf8'));
    // The chat form <bos><|turn>user\nhello world<turn|>\n<|turn>model\n, split by the tiny tokenizer's BPE
    // merges (test/support/tokenizer.ts: h+e, l+l, then ▁+w, o+r, l+d, ▁w+or, ▁wor+ld; "user" and "model"
    // have no merges).
    const pieces = [
      '<bos>',
      '<|turn>',
      'u',
      's',
      'e',
      'r',
      '\n',
      'he',
      'll',
      'o',
      '▁world',
      '<turn|>',
      '\n',
      '<|turn>',
      'm',
      'o',
      'd',
      'e',
      'l',
      '\n',
    ];
    expect(r.prompt).toEqual(pieces.map((p) => vocab[p]));
    // The tokens: classic greedy of the CPU float64 reference on the same prompt. Each step's top-1/top-2
    // gap must exceed twice the f32 yardstick (transformers' own f32 logits vs float64 on this model, from
    // the fixtures) for the GPU's f32 argmax to be bound to agree.
    const ref = referenceGreedy(
      (await loadReferenceWeights((await tinyTarget()).description)) as TargetWeights,
      r.prompt,
      6,
    );
    const yard = maxAbsDiff(
      (await (await loadTransformersF32()).tensor('logits')).data,
      (await (await loadGolden(TINY_A_F64)).tensor('logits')).data,
    );
    const V = ref.logits.length / 6;
    for (let i = 0; i < 6; i++) {
      const row = [...ref.logits.subarray(i * V, (i + 1) * V)].sort((a, b) => b - a);
      expect(row[0] - row[1], `reference gap at step ${i}`).toBeGreaterThan(2 * yard);
    }
    expect(r.tokens).toEqual(ref.tokens);
    // The text: the tokens decoded by hand from the tiny vocabulary, as the tokenizer's decoder chain does
    // (▁ -> space, <0xNN> byte fallback, bytes fused and read as UTF-8, invalid bytes as U+FFFD) and as
    // src/format/tokenizer.ts shows ids the tokenizer does not know (⟨id⟩; the model's vocabulary is 1024).
    const byId = new Map(Object.entries(vocab).map(([piece, id]) => [id, piece]));
    let text = '';
    let bytes: number[] = [];
    const flush = () => {
      text += new TextDecoder().decode(Uint8Array.from(bytes));
      bytes = [];
    };
    for (const id of r.tokens as number[]) {
      const piece = byId.get(id);
      const byte = piece?.match(/^<0x([0-9A-F]{2})>$/);
      if (byte) {
        bytes.push(parseInt(byte[1], 16));
        continue;
      }
      flush();
      text += piece === undefined ? `⟨${id}⟩` : piece.replaceAll('▁', ' ');
    }
    flush();
    expect(r.text).toBe(text);
    expect(stdout).toContain(`text: ${text}\n`);
  });
});
