import { Tokenizer } from '@huggingface/tokenizers';
import type { ByteSource } from './bytesource.ts';
import { readAll, readJson } from './bytesource.ts';
import { type ChatRenderer, chatRenderer, findChatTemplate, specialTokenStrings } from './chat-template.ts';
import { FormatError } from './errors.ts';

/**
 * Text <-> ids with the checkpoint's own tokenizer.json (Hugging Face's maintained JS tokenizer library; Gemma's is
 * BPE with byte fallback). A chat prompt is the folder's own chat template rendered around the text
 * (chat-template.ts), as transformers' apply_chat_template renders it, then encoded without added special tokens
 * (the template writes them). A folder without a template gets Gemma 4's turn form
 * `<bos><|turn>user\n{text}<turn|>\n<|turn>model\n` (docs/MODEL.md section 9), and `chatTemplate` says so (null).
 */
export interface TextCodec {
  encode(text: string, chat: boolean): number[];
  decode(ids: readonly number[]): string;
  /**
   * Where a chat prompt's form comes from: "chat_template.jinja" or 'tokenizer_config.json "chat_template"'; null
   * when the folder has no template and Gemma 4's turn form is used.
   */
  readonly chatTemplate: string | null;
  /**
   * The id a text starts with (mlxcel's traces put it before a text's tokens): the first token the tokenizer adds
   * when asked for special tokens (its post-processor: Gemma 4's adds `<bos>`), else its `<bos>` token (Gemma's
   * id 2, which the chat form spells out), else null (Qwen3.5's tokenizer has none).
   */
  bos: number | null;
}

/** The tokenizer files of a checkpoint folder (checkpoint-files.ts finds them). */
export interface TokenizerSources {
  tokenizer?: ByteSource;
  tokenizerConfig?: ByteSource;
  chatTemplate?: ByteSource;
}

/** Gemma 4's chat form, for folders that carry no template of their own. */
export const GEMMA4_TURN_FORM = (text: string) => `<bos><|turn>user\n${text}<turn|>\n<|turn>model\n`;

/** The folder's codec, or undefined when it has no tokenizer.json. */
export async function checkpointTokenizer(files: TokenizerSources): Promise<TextCodec | undefined> {
  return files.tokenizer ? loadTokenizer(files.tokenizer, files.tokenizerConfig, files.chatTemplate) : undefined;
}

export async function loadTokenizer(
  tokenizerJson: ByteSource,
  tokenizerConfig?: ByteSource,
  chatTemplateFile?: ByteSource,
): Promise<TextCodec> {
  const json = await readJson(tokenizerJson);
  const config = tokenizerConfig ? await readJson(tokenizerConfig) : {};
  if (typeof config !== 'object' || config === null || Array.isArray(config))
    throw new FormatError(`${tokenizerConfig!.name}: must be a JSON object`, tokenizerConfig!.name);
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
  const jinja = chatTemplateFile
    ? { file: chatTemplateFile.name, text: new TextDecoder().decode(await readAll(chatTemplateFile)) }
    : undefined;
  const template = findChatTemplate(jinja, config, tokenizerConfig?.name);
  // Parsed at load, so a broken template is refused when the folder is opened rather than on the first --chat.
  const renderer: ChatRenderer | null = template ? chatRenderer(template, specialTokenStrings(config)) : null;
  const chatText = (text: string) => (renderer ? renderer.userPrompt(text) : GEMMA4_TURN_FORM(text));
  const added = tok.encode('', { add_special_tokens: true }).ids;
  return {
    bos: added.length ? added[0] : (tok.token_to_id('<bos>') ?? null),
    encode: (text, chat) => tok.encode(chat ? chatText(text) : text, { add_special_tokens: false }).ids,
    decode: (ids) => decodeLenient(tok, ids),
    chatTemplate: renderer?.source ?? null,
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
