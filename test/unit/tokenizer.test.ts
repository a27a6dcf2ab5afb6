import { describe, expect, it } from 'vitest';
import { loadTokenizer } from '../../src/format/tokenizer.ts';
import { bytesSource } from '../../src/format/bytesource.ts';
import { tinyTokenizerJson } from '../support/tokenizer.ts';

const source = (o: unknown) => bytesSource('tokenizer.json', new TextEncoder().encode(JSON.stringify(o)));

describe('tokenizer.json through @huggingface/tokenizers', () => {
  it('encodes with merges and byte fallback, decodes back, and applies the Gemma chat template', async () => {
    const json = tinyTokenizerJson() as { model: { vocab: Record<string, number> } };
    const tok = await loadTokenizer(source(json));
    const ids = tok.encode(' hello world ✓', false);
    expect(tok.decode(ids)).toBe(' hello world ✓');
    expect(ids).toContain(json.model.vocab['▁world']); // merged into one token
    const chat = tok.encode('hello', true);
    expect(chat[0]).toBe(2); // <bos>
    expect(tok.decode(chat)).toBe('<bos><|turn>user\nhello<turn|>\n<|turn>model\n');
  });

  it('decodes exactly: no clean-up of the spaces before punctuation (Gemma keeps them)', async () => {
    const tok = await loadTokenizer(source(tinyTokenizerJson()));
    for (const text of ['hello !', 'hello , world ?', " hello 's"])
      expect(tok.decode(tok.encode(text, false))).toBe(text);
  });

  it('refuses a file that is not a tokenizer with a message naming it', async () => {
    await expect(loadTokenizer(source({ model: { type: 'Nope' } }))).rejects.toThrow(
      /tokenizer\.json: not a tokenizer this app can read/,
    );
  });
});
