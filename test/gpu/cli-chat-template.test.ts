/**
 * `generate --prompt TEXT --chat` renders the target folder's own chat template: on a `synth --preset tiny` folder
 * (tokenizer files as published) the prompt ids are transformers' apply_chat_template ids for that folder
 * (test/fixtures/chat-template/synth-gemma4-golden.json); another template in the folder gives other ids (its
 * golden too); a folder without a template gets Gemma 4's turn form, and the command says which form it used.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { synthGeometry } from '../../src/format/synthetic.ts';
import { nodeFolderSources } from '../../src/node/file-source.ts';
import { writeSynthetic } from '../../src/node/synthetic.ts';
import { checkpointTokenizer, GEMMA4_TURN_FORM } from '../../src/format/tokenizer.ts';
import { openCheckpoint } from '../../src/format/checkpoint.ts';

const run = promisify(execFile);
const cli = (...args: string[]) => run('npm', ['run', '-s', 'cli', '--', ...args], { timeout: 240_000 });

const golden = JSON.parse(
  readFileSync(path.resolve('test/fixtures/chat-template/synth-gemma4-golden.json'), 'utf8'),
) as {
  templates: { 'turns-thinking': string };
  cases: { prompt: string; folder: { ids: number[] }; 'turns-thinking': { ids: number[] } }[];
};
const dir = mkdtempSync(path.join(tmpdir(), 'ringside-chat-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('generate --chat renders the folder template', () => {
  it("the folder's own template, another template, and none", async () => {
    await writeSynthetic(dir, synthGeometry('tiny', { assistant: null }), { seed: 7 });
    const target = path.join(dir, 'target');
    // the golden's prompt with spaces around it: the synth template trims, Gemma 4's turn form does not
    const c = golden.cases.find((x) => x.prompt.startsWith('  '))!;
    const generate = async () => {
      const out = path.join(dir, 'g.json');
      const { stdout, stderr } = await cli(
        'generate',
        '--target',
        target,
        '--prompt',
        c.prompt,
        '--chat',
        '--max-new',
        '2',
        '--mode',
        'classic',
        '--json',
        out,
      );
      return { prompt: JSON.parse(readFileSync(out, 'utf8')).prompt as number[], out: stdout + stderr };
    };

    const own = await generate();
    expect(own.out).toContain("chat prompt: rendered with the folder's chat_template.jinja");
    expect(own.prompt).toEqual(c.folder.ids);

    writeFileSync(path.join(target, 'chat_template.jinja'), golden.templates['turns-thinking']);
    const other = await generate();
    expect(other.prompt).toEqual(c['turns-thinking'].ids);
    expect(other.prompt).not.toEqual(own.prompt);

    rmSync(path.join(target, 'chat_template.jinja'));
    const none = await generate();
    expect(none.out).toContain('chat prompt: the folder has no chat template');
    const tok = (await checkpointTokenizer(await openCheckpoint(await nodeFolderSources(target))))!;
    expect(tok.chatTemplate).toBeNull();
    expect(none.prompt).toEqual(tok.encode(GEMMA4_TURN_FORM(c.prompt), false));
    expect(none.prompt).not.toEqual(own.prompt);
  });
});
