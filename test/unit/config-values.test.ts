/**
 * Config values that are malformed were taken silently. eos_token_id "x" fell back
 * to the default ids [1, 106] (generation then stops on tokens the config never named), an id at or past vocab_size
 * was kept (it can never be produced), max_position_embeddings 0 passed, and rms_norm_eps -1 gave NaN logits
 * everywhere. Each is now refused naming config.json, the key and what was expected; absent keys keep their defaults.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/format/config.ts';
import { parseQwen35Config } from '../../src/format/qwen3_5/config.ts';
import { refusal } from '../support/refusal.ts';
import { TINY_A } from './fixtures.ts';

type Json = Record<string, any>;
const read = (file: string): Json => JSON.parse(readFileSync(file, 'utf8'));
const gemma = () => read(path.join(TINY_A, 'target/config.json'));
const gemmaAssistant = () => read(path.join(TINY_A, 'assistant/config.json'));
const qwen = () => read(path.resolve('test/fixtures/qwen-tiny/target/config.json'));
const edited = (base: Json, f: (c: Json) => void): Json => {
  f(base);
  return base;
};

describe('Gemma 4 config.json values', () => {
  it('eos_token_id that is not a token id is refused wherever it is', async () => {
    const ids = 'must be a token id or a non-empty list of token ids (non-negative integers)';
    expect(await refusal(() => parseConfig(edited(gemma(), (c) => (c.eos_token_id = 'x'))))).toBe(
      `config.json: eos_token_id ${ids}, found "x"`,
    );
    expect(await refusal(() => parseConfig(edited(gemma(), (c) => (c.eos_token_id = [1, -1]))))).toBe(
      `config.json: eos_token_id ${ids}, found [1,-1]`,
    );
    expect(await refusal(() => parseConfig(edited(gemma(), (c) => (c.eos_token_id = []))))).toBe(
      `config.json: eos_token_id ${ids}, found []`,
    );
    expect(await refusal(() => parseConfig(edited(gemma(), (c) => (c.text_config.eos_token_id = '1'))))).toBe(
      `config.json: text_config.eos_token_id ${ids}, found "1"`,
    );
    expect(await refusal(() => parseConfig(gemma(), 'config.json', { eos_token_id: [1.5] }))).toBe(
      `generation_config.json: eos_token_id ${ids}, found [1.5]`,
    );
    // a malformed source is refused even where another source would win
    expect(
      await refusal(() =>
        parseConfig(
          edited(gemma(), (c) => (c.eos_token_id = [1])),
          'config.json',
          { eos_token_id: 'x' },
        ),
      ),
    ).toMatch(/^generation_config\.json: eos_token_id must be/);
    // the assistant reads the same keys
    expect(await refusal(() => parseConfig(edited(gemmaAssistant(), (c) => (c.eos_token_id = [0.5]))))).toBe(
      `config.json: eos_token_id ${ids}, found [0.5]`,
    );
  });

  it('eos ids are read (one past the vocabulary too, as mlx-lm and transformers keep it); absent or null keys keep the default [1, 106]', () => {
    expect(parseConfig(edited(gemma(), (c) => (c.eos_token_id = [1023, 0, 1023]))).eosIds).toEqual([1023, 0]);
    expect(parseConfig(edited(gemma(), (c) => (c.eos_token_id = [5000]))).eosIds).toEqual([5000]);
    expect(parseConfig(edited(gemma(), (c) => (c.eos_token_id = null))).eosIds).toEqual([1, 106]);
    expect(parseConfig(edited(gemma(), (c) => delete c.eos_token_id)).eosIds).toEqual([1, 106]);
  });

  it('max_position_embeddings and rms_norm_eps must be positive; absent, eps is 1e-6', async () => {
    expect(await refusal(() => parseConfig(edited(gemma(), (c) => (c.text_config.max_position_embeddings = 0))))).toBe(
      'config.json: text_config.max_position_embeddings must be a positive integer, found 0',
    );
    expect(await refusal(() => parseConfig(edited(gemma(), (c) => (c.text_config.rms_norm_eps = -1))))).toBe(
      'config.json: text_config.rms_norm_eps must be a positive number, found -1',
    );
    expect(await refusal(() => parseConfig(edited(gemma(), (c) => (c.text_config.rms_norm_eps = 0))))).toBe(
      'config.json: text_config.rms_norm_eps must be a positive number, found 0',
    );
    expect(await refusal(() => parseConfig(edited(gemma(), (c) => (c.text_config.rms_norm_eps = '1e-6'))))).toBe(
      'config.json: text_config.rms_norm_eps must be a positive number, found "1e-6"',
    );
    const absent = parseConfig(
      edited(gemma(), (c) => {
        delete c.text_config.rms_norm_eps;
        delete c.text_config.max_position_embeddings;
      }),
    );
    expect(absent.eps).toBe(1e-6);
    expect(parseConfig(edited(gemma(), (c) => (c.text_config.rms_norm_eps = 1e-5))).eps).toBe(1e-5);
  });
});

describe('Qwen3.5 config.json values', () => {
  it('eos_token_id, max_position_embeddings and rms_norm_eps are refused the same way', async () => {
    const ids = 'must be a token id or a non-empty list of token ids (non-negative integers)';
    expect(await refusal(() => parseQwen35Config(edited(qwen(), (c) => (c.text_config.eos_token_id = 'x'))))).toBe(
      `config.json: text_config.eos_token_id ${ids}, found "x"`,
    );
    expect(await refusal(() => parseQwen35Config(edited(qwen(), (c) => (c.eos_token_id = [-3]))))).toBe(
      `config.json: eos_token_id ${ids}, found [-3]`,
    );
    expect(
      await refusal(() => parseQwen35Config(edited(qwen(), (c) => (c.text_config.max_position_embeddings = 0)))),
    ).toBe('config.json: text_config.max_position_embeddings must be a positive integer, found 0');
    expect(await refusal(() => parseQwen35Config(edited(qwen(), (c) => (c.text_config.rms_norm_eps = -1))))).toBe(
      'config.json: text_config.rms_norm_eps must be a positive number, found -1',
    );
  });

  it('absent keys keep their defaults: no eos ids, eps 1e-6', () => {
    const c = parseQwen35Config(
      edited(qwen(), (c) => {
        delete c.text_config.eos_token_id;
        delete c.text_config.rms_norm_eps;
        delete c.text_config.max_position_embeddings;
      }),
    );
    expect(c.eosIds).toEqual([]);
    expect(c.eps).toBe(1e-6);
    expect(parseQwen35Config(qwen()).eosIds).toEqual([1023]);
  });
});
