/**
 * A checkpoint folder's own chat template, rendered as transformers' `apply_chat_template` renders it (which is what
 * mlx-lm and mlx-vlm feed their models): Jinja by @huggingface/jinja (transformers.js's implementation, with
 * transformers' trim_blocks / lstrip_blocks), the variables `messages`, `add_generation_prompt`, `tools`,
 * `documents` and the tokenizer's named special tokens (`bos_token`, `eos_token`, ...) as strings.
 *
 * Where the template comes from, in transformers' order: `chat_template.jinja` (a file of its own wins), else
 * tokenizer_config.json's `chat_template` (a string, or a list of named templates whose "default" is used).
 */
import { Template } from '@huggingface/jinja';
import { FormatError } from './errors.ts';

export interface ChatTemplate {
  /** Where the text was read: "chat_template.jinja" or "tokenizer_config.json \"chat_template\"". */
  source: string;
  /** The file, and the key when the template is a value inside it (for FormatError). */
  file: string;
  key?: string;
  text: string;
}

/** transformers' SPECIAL_TOKENS_ATTRIBUTES: the named special tokens a template sees as variables. */
const SPECIAL_TOKEN_NAMES = [
  'bos_token',
  'eos_token',
  'unk_token',
  'sep_token',
  'pad_token',
  'cls_token',
  'mask_token',
] as const;

type Obj = Record<string, unknown>;
const isObj = (x: unknown): x is Obj => typeof x === 'object' && x !== null && !Array.isArray(x);

/**
 * The folder's chat template, or null when it has none. `jinja` is chat_template.jinja's text; `config` the parsed
 * tokenizer_config.json (its file name in `configFile`).
 */
export function findChatTemplate(
  jinja: { file: string; text: string } | undefined,
  config: unknown,
  configFile = 'tokenizer_config.json',
): ChatTemplate | null {
  if (jinja) return { source: baseName(jinja.file), file: jinja.file, text: jinja.text };
  if (!isObj(config) || config.chat_template === undefined || config.chat_template === null) return null;
  const ct = config.chat_template;
  const from = (text: string, key: string): ChatTemplate => ({
    source: `${baseName(configFile)} "${key}"`,
    file: configFile,
    key,
    text,
  });
  if (typeof ct === 'string') return from(ct, 'chat_template');
  // transformers' older layout: [{name, template}, ...]; without tools the "default" one is used.
  if (Array.isArray(ct)) {
    const named = ct.find((t) => isObj(t) && t.name === 'default');
    if (isObj(named) && typeof named.template === 'string') return from(named.template, 'chat_template.default');
    const names = ct.map((t) => (isObj(t) ? JSON.stringify(t.name) : '?')).join(', ');
    throw new FormatError(
      `${configFile}: "chat_template" lists named templates (${names}) but none named "default" with a "template" string`,
      configFile,
      'chat_template',
    );
  }
  throw new FormatError(
    `${configFile}: "chat_template" must be a string or a list of named templates, found ${JSON.stringify(ct).slice(0, 80)}`,
    configFile,
    'chat_template',
  );
}

/** The named special tokens of tokenizer_config.json as strings (a token may be written as {"content": ...}). */
export function specialTokenStrings(config: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (!isObj(config)) return out;
  for (const name of SPECIAL_TOKEN_NAMES) {
    const v = config[name];
    if (typeof v === 'string') out[name] = v;
    else if (isObj(v) && typeof v.content === 'string') out[name] = v.content;
  }
  return out;
}

/** A parsed template, ready to render prompts. */
export interface ChatRenderer {
  readonly source: string;
  /** The text of a conversation of one user message, followed by the generation prompt. */
  userPrompt(text: string): string;
}

export function chatRenderer(t: ChatTemplate, specialTokens: Record<string, string>): ChatRenderer {
  const where = t.key ? `${t.file} "${t.key}"` : t.file;
  let template: Template;
  try {
    template = new Template(t.text);
  } catch (e) {
    throw new FormatError(`${where}: the chat template does not parse (${(e as Error).message})`, t.file, t.key);
  }
  return {
    source: t.source,
    userPrompt(text) {
      try {
        return template.render({
          ...specialTokens,
          messages: [{ role: 'user', content: text }],
          add_generation_prompt: true,
          tools: null,
          documents: null,
        });
      } catch (e) {
        throw new FormatError(
          `${where}: the chat template fails on this prompt (${(e as Error).message})`,
          t.file,
          t.key,
        );
      }
    },
  };
}

const baseName = (n: string) => n.slice(n.lastIndexOf('/') + 1);
