import { Tokenizer } from '@huggingface/tokenizers';
import type { ByteSource } from './bytesource.ts';
import { readJson } from './bytesource.ts';
import { FormatError } from './errors.ts';

/**
 * Text <-> ids with the checkpoint's own tokenizer.json (Hugging Face's maintained JS tokenizer
 * library; Gemma's is BPE with byte fallback). The chat form is Gemma's
 * `<bos><|turn>user\n{text}<turn|>\n<|turn>model\n` (GEMMA4.md section 9).
 */
export interface TextCodec {
  encode(text: string, chat: boolean): number[];
  decode(ids: readonly number[]): string;
  /**
   * The id a text starts with (mlxcel's traces put it before a text's tokens): the first token the tokenizer adds
   * when asked for special tokens (its post-processor: Gemma 4's adds `<bos>`), else its `<bos>` token (Gemma's
   * id 2, which the chat form spells out), else null (Qwen3.5's tokenizer has none).
   */
  bos: number | null;
}

export async function loadTokenizer(tokenizerJson: ByteSource, tokenizerConfig?: ByteSource): Promise<TextCodec> {
  const json = await readJson(tokenizerJson);
  const config = tokenizerConfig ? await readJson(tokenizerConfig) : {};
  let tok: Tokenizer;
  try {
    // Gemma's tokenizer_config.json sets clean_up_tokenization_spaces false; the library's default (true) would
    // drop the space of " !" or " ," on decode, so the decoded text would not be the text the ids stand for.
    tok = new Tokenizer(json as object, { clean_up_tokenization_spaces: false, ...(config as object) });
  } catch (e) {
    throw new FormatError(
      `${tokenizerJson.name}: not a tokenizer this app can read (${(e as Error).message})`,
      tokenizerJson.name,
    );
  }
  const added = tok.encode('', { add_special_tokens: true }).ids;
  return {
    bos: added.length ? added[0] : (tok.token_to_id('<bos>') ?? null),
    encode: (text, chat) =>
      tok.encode(chat ? `<bos><|turn>user\n${text}<turn|>\n<|turn>model\n` : text, { add_special_tokens: false }).ids,
    decode: (ids) => decodeLenient(tok, ids),
  };
}

/**
 * Decodes ids, showing ids the tokenizer does not know as `⟨id⟩` instead of failing: a report must
 * still render when a checkpoint's tokenizer is smaller than its embedding (or a test model's).
 */
function decodeLenient(tok: Tokenizer, ids: readonly number[]): string {
  try {
    return tok.decode([...ids], { skip_special_tokens: false });
  } catch {
    let out = '';
    let run: number[] = [];
    const flush = () => {
      if (run.length) out += tok.decode(run, { skip_special_tokens: false });
      run = [];
    };
    for (const id of ids) {
      try {
        tok.decode([id]);
        run.push(id);
      } catch {
        flush();
        out += `⟨${id}⟩`;
      }
    }
    flush();
    return out;
  }
}
