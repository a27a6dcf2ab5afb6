/**
 * The tokenizer files a published folder holds beside its weights (tokenizer.json, tokenizer_config.json,
 * chat_template.jinja), written by `synth` so that text prompts and `--chat` work on synthetic checkpoints. They are
 * not Gemma's or Qwen's tokenizers (no merges of theirs are shipped): each is a BPE without merges that encodes any
 * text exactly, laid out with the family's special-token ids, and a chat template in the family's turn format.
 *
 * - Gemma 4: SentencePiece-style BPE with byte fallback (spaces as U+2581, as docs/MODEL.md section 9 describes
 *   Gemma's): <pad> 0, <eos> 1, <bos> 2, <unk> 3, <mask> 4, <|think|> 98, <|channel>/<channel|> 100/101,
 *   <|turn>/<turn|> 105/106 (the ids of Gemma 4's own tokens), then the 256 byte tokens, U+2581, "\n" and printable
 *   ASCII: 459 ids. The template renders a user turn as Gemma 4's `<bos><|turn>user\n{text}<turn|>\n<|turn>model\n`
 *   with the text trimmed, as Gemma 4's templates do.
 * - Qwen3.5: byte-level BPE (GPT-2's byte alphabet, as Qwen's) with the 256 byte tokens at ids 0-255 and
 *   <|endoftext|>, <|im_start|>, <|im_end|> at 256-258; a ChatML template.
 * A vocabulary smaller than the tokenizer's ids gets no tokenizer files (tokenizerFilesFit says so).
 */
import { bytesSource, type ByteSource } from './bytesource.ts';

export type TokenizerFamily = 'gemma4' | 'qwen3_5';

const GEMMA_NAMED: Readonly<Record<number, string>> = {
  0: '<pad>',
  1: '<eos>',
  2: '<bos>',
  3: '<unk>',
  4: '<mask>',
  98: '<|think|>',
  100: '<|channel>',
  101: '<channel|>',
  105: '<|turn>',
  106: '<turn|>',
};
const GEMMA_SPECIALS = 107;
/** Printable ASCII (33-126): single-character pieces beside the byte fallback, so plain text reads as text. */
const ASCII = Array.from({ length: 126 - 33 + 1 }, (_, i) => String.fromCharCode(33 + i));

const GEMMA_TEMPLATE = `{{- bos_token -}}
{%- if messages[0]['role'] == 'system' -%}
    {{- '<|turn>system\\n' + messages[0]['content'] | trim + '<turn|>\\n' -}}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}
    {{- '<|turn>' + role + '\\n' + message['content'] | trim + '<turn|>\\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '<|turn>model\\n' -}}
{%- endif -%}
`;

const QWEN_TEMPLATE = `{%- for message in messages -%}
    {{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '<|im_start|>assistant\\n' -}}
{%- endif -%}
`;

const special = (id: number, content: string) => ({
  id,
  content,
  single_word: false,
  lstrip: false,
  rstrip: false,
  normalized: false,
  special: true,
});

function gemmaTokenizer(): { json: object; ids: number } {
  const vocab: Record<string, number> = {};
  const added = [];
  for (let id = 0; id < GEMMA_SPECIALS; id++) {
    const content = GEMMA_NAMED[id] ?? `<unused${id - 5}>`;
    vocab[content] = id;
    added.push(special(id, content));
  }
  let id = GEMMA_SPECIALS;
  for (let b = 0; b < 256; b++) vocab[`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`] = id++;
  for (const piece of ['▁', '\n', ...ASCII]) vocab[piece] = id++;
  const json = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: { type: 'Replace', pattern: { String: ' ' }, content: '▁' },
    pre_tokenizer: null,
    post_processor: null,
    decoder: {
      type: 'Sequence',
      decoders: [
        { type: 'Replace', pattern: { String: '▁' }, content: ' ' },
        { type: 'ByteFallback' },
        { type: 'Fuse' },
      ],
    },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: true,
      ignore_merges: false,
      vocab,
      merges: [],
    },
  };
  return { json, ids: id };
}

/** GPT-2's byte-to-unicode table: printable bytes stand for themselves, the others move to U+0100 and up. */
function byteAlphabet(): string[] {
  const out: string[] = [];
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    out.push(String.fromCharCode(printable ? b : 256 + extra++));
  }
  return out;
}

const QWEN_SPECIALS = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'];

function qwenTokenizer(): { json: object; ids: number } {
  const vocab: Record<string, number> = {};
  byteAlphabet().forEach((c, i) => {
    vocab[c] = i;
  });
  const added = QWEN_SPECIALS.map((c, i) => special(256 + i, c));
  for (const a of added) vocab[a.content] = a.id;
  const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: true };
  const json = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: null,
    decoder: byteLevel,
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: '',
      end_of_word_suffix: '',
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges: [],
    },
  };
  return { json, ids: 256 + QWEN_SPECIALS.length };
}

const TOKENIZERS = { gemma4: gemmaTokenizer, qwen3_5: qwenTokenizer } as const;

/** Ids the family's tokenizer uses (the vocabulary must be at least this large). */
export function tokenizerIds(family: TokenizerFamily): number {
  return TOKENIZERS[family]().ids;
}

/** True when a vocabulary of `vocab` rows holds every id of the family's tokenizer. */
export function tokenizerFilesFit(family: TokenizerFamily, vocab: number): boolean {
  return vocab >= tokenizerIds(family);
}

/** The three tokenizer files of a target folder (none when the vocabulary is too small for them). */
export function syntheticTokenizerFiles(family: TokenizerFamily, vocab: number): ByteSource[] {
  if (!tokenizerFilesFit(family, vocab)) return [];
  const { json } = TOKENIZERS[family]();
  const config =
    family === 'gemma4'
      ? {
          tokenizer_class: 'PreTrainedTokenizerFast',
          bos_token: '<bos>',
          eos_token: '<eos>',
          pad_token: '<pad>',
          unk_token: '<unk>',
          mask_token: '<mask>',
          add_bos_token: false,
          add_eos_token: false,
          clean_up_tokenization_spaces: false,
          model_max_length: 131072,
        }
      : {
          tokenizer_class: 'PreTrainedTokenizerFast',
          eos_token: '<|im_end|>',
          pad_token: '<|endoftext|>',
          add_bos_token: false,
          clean_up_tokenization_spaces: false,
          model_max_length: 262144,
        };
  const text = (name: string, s: string) => bytesSource(name, new TextEncoder().encode(s));
  return [
    text('tokenizer.json', JSON.stringify(json)),
    text('tokenizer_config.json', JSON.stringify(config, null, 2)),
    text('chat_template.jinja', family === 'gemma4' ? GEMMA_TEMPLATE : QWEN_TEMPLATE),
  ];
}
