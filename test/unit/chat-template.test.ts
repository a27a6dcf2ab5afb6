/**
 * Chat prompts from the folder's own template, checked against transformers' apply_chat_template on the demo
 * model's tokenizer (test/fixtures/chat-template/demo-golden.json, made by tools/make_chat_golden.py).
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { bytesSource, type ByteSource } from '../../src/format/bytesource.ts';
import { GEMMA4_TURN_FORM, loadTokenizer } from '../../src/format/tokenizer.ts';
import { DEMO } from '../support/fixtures.ts';
import { refusal } from '../support/refusal.ts';

interface Rendered {
  text: string;
  ids: number[];
}
interface Golden {
  folder_files_sha256: Record<string, string>;
  templates: { 'turns-thinking': string };
  cases: { prompt: string; folder: Rendered; 'turns-thinking': Rendered }[];
}

const golden: Golden = JSON.parse(await readFile(path.resolve('test/fixtures/chat-template/demo-golden.json'), 'utf8'));
const demoFile = async (name: string) => new Uint8Array(await readFile(path.join(DEMO, 'target', name)));
const tokenizerJson = bytesSource('tokenizer.json', await demoFile('tokenizer.json'));
const demoConfigBytes = await demoFile('tokenizer_config.json');
const demoConfig = JSON.parse(new TextDecoder().decode(demoConfigBytes));
const text = (name: string, s: string): ByteSource => bytesSource(name, new TextEncoder().encode(s));
const json = (name: string, o: unknown) => text(name, JSON.stringify(o));

describe("chat prompts from the folder's template", () => {
  it('the golden was made from these very tokenizer files', async () => {
    for (const name of ['tokenizer.json', 'tokenizer_config.json'])
      expect(
        createHash('sha256')
          .update(await demoFile(name))
          .digest('hex'),
        name,
      ).toBe(golden.folder_files_sha256[name]);
  });

  it("the demo folder's tokenizer_config.json template gives transformers' apply_chat_template ids", async () => {
    const tok = await loadTokenizer(tokenizerJson, bytesSource('tokenizer_config.json', demoConfigBytes));
    expect(tok.chatTemplate).toBe('tokenizer_config.json "chat_template"');
    for (const c of golden.cases) expect(tok.encode(c.prompt, true), JSON.stringify(c.prompt)).toEqual(c.folder.ids);
  });

  it('chat_template.jinja (a template unlike Gemma 4 turn form) gives its own ids, equal to transformers', async () => {
    const jinja = text('chat_template.jinja', golden.templates['turns-thinking']);
    // chat_template.jinja wins over tokenizer_config.json's template, as in transformers
    const tok = await loadTokenizer(tokenizerJson, bytesSource('tokenizer_config.json', demoConfigBytes), jinja);
    expect(tok.chatTemplate).toBe('chat_template.jinja');
    const plain = await loadTokenizer(tokenizerJson);
    for (const c of golden.cases) {
      const ids = tok.encode(c.prompt, true);
      expect(ids, JSON.stringify(c.prompt)).toEqual(c['turns-thinking'].ids);
      // the difference is real: Gemma 4's turn form (the demo folder's own template) gives other ids
      expect(ids).not.toEqual(plain.encode(GEMMA4_TURN_FORM(c.prompt), false));
      expect(ids).not.toEqual(c.folder.ids);
    }
    // this template trims the text and closes an empty thought channel after the generation prompt
    const c = golden.cases[1];
    expect(tok.decode(tok.encode(c.prompt, true))).toBe(c['turns-thinking'].text);
    expect(c['turns-thinking'].text).toBe(
      '<bos><|turn>user\nleading and trailing spaces<turn|>\n<|turn>model\n<|channel>thought\n<channel|>',
    );
  });

  it("without a template in the folder, Gemma 4's turn form is used and the codec says so", async () => {
    const { chat_template: _, ...noTemplate } = demoConfig;
    for (const tok of [
      await loadTokenizer(tokenizerJson),
      await loadTokenizer(tokenizerJson, json('tokenizer_config.json', noTemplate)),
    ]) {
      expect(tok.chatTemplate).toBeNull();
      // the demo's own template writes the same form, so transformers' ids are this form's ids
      for (const c of golden.cases) expect(tok.encode(c.prompt, true)).toEqual(c.folder.ids);
    }
  });

  it('a list of named templates in tokenizer_config.json: the "default" one', async () => {
    const config = {
      ...demoConfig,
      chat_template: [
        { name: 'tool_use', template: '{{ raise_exception("not this one") }}' },
        { name: 'default', template: golden.templates['turns-thinking'] },
      ],
    };
    const tok = await loadTokenizer(tokenizerJson, json('tokenizer_config.json', config));
    expect(tok.chatTemplate).toBe('tokenizer_config.json "chat_template.default"');
    for (const c of golden.cases) expect(tok.encode(c.prompt, true)).toEqual(c['turns-thinking'].ids);
  });

  it('a broken template is refused naming its file (at load), a failing one when rendered', async () => {
    expect(
      await refusal(loadTokenizer(tokenizerJson, undefined, text('chat_template.jinja', '{% for m in messages %}'))),
    ).toMatch(/^chat_template\.jinja: the chat template does not parse \(/);
    const raising = await loadTokenizer(
      tokenizerJson,
      undefined,
      text('chat_template.jinja', "{{ raise_exception('only system prompts') }}"),
    );
    expect(raising.encode('plain text still encodes', false).length).toBeGreaterThan(0);
    expect(await refusal(() => raising.encode('hello', true))).toBe(
      'chat_template.jinja: the chat template fails on this prompt (only system prompts)',
    );
    expect(
      await refusal(
        loadTokenizer(tokenizerJson, json('tokenizer_config.json', { chat_template: [{ name: 'tool_use' }] })),
      ),
    ).toBe(
      'tokenizer_config.json: "chat_template" lists named templates ("tool_use") but none named "default" with a "template" string',
    );
  });
});
