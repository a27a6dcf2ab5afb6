/**
 * Options that name a JSON file (compare --prompts, trace --stream): a file that is missing or holds no valid JSON
 * is refused with the option, the path and the reason, before any model is opened (JSON.parse alone printed
 * "Unexpected end of JSON input" and named neither).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { jsonFileOption } from '../../src/cli/args.ts';
import { compare } from '../../src/cli/commands/compare.ts';
import { trace } from '../../src/cli/commands/trace.ts';
import type { Command } from '../../src/cli/command.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'ringside-json-'));
const file = (name: string, text: string) => {
  const p = path.join(dir, name);
  writeFileSync(p, text);
  return p;
};

/** A command's option defaults, as main.ts fills them in before run(). */
const defaults = (cmd: Command) =>
  Object.fromEntries(
    Object.entries(cmd.options).flatMap(([k, o]) => (o.default === undefined ? [] : [[k, o.default]])),
  );

describe('JSON file options', () => {
  it('read the JSON, or nothing without the option', async () => {
    expect(await jsonFileOption({ prompts: file('ok.json', '[[1, 2], "hi"]') }, 'prompts')).toEqual([[1, 2], 'hi']);
    expect(await jsonFileOption({}, 'prompts')).toBeUndefined();
  });

  it('name the option, the file and the reason when the file is missing or not JSON', async () => {
    const cut = file('cut.json', '[[1, 2], [3');
    await expect(jsonFileOption({ stream: cut }, 'stream')).rejects.toThrow(
      new RegExp(`^--stream ${cut}: not valid JSON \\(.+\\)$`),
    );
    const missing = path.join(dir, 'none.json');
    await expect(jsonFileOption({ prompts: missing }, 'prompts')).rejects.toThrow(
      new RegExp(`^--prompts ${missing}: cannot read the file \\(ENOENT`),
    );
  });

  it('compare refuses a prompts file that is not JSON before opening the models', async () => {
    const cut = file('prompts.json', '[[2, 3');
    const values = {
      ...defaults(compare),
      prompts: cut,
      json: path.join(dir, 'out.json'),
      target: '/nonexistent/t',
      draft: '/nonexistent/a',
    };
    const io = { out: () => {}, err: () => {} };
    await expect(compare.run({ values, positionals: [] } as never, io as never)).rejects.toThrow(
      `--prompts ${cut}: not valid JSON`,
    );
  });

  it('trace refuses a stream file that is not JSON before opening the target', async () => {
    const cut = file('stream.json', '[1, 2,');
    const values = { ...defaults(trace), stream: cut, report: path.join(dir, 'trace.json'), target: '/nonexistent/t' };
    const io = { out: () => {}, err: () => {} };
    await expect(trace.run({ values, positionals: [] } as never, io as never)).rejects.toThrow(
      `--stream ${cut}: not valid JSON`,
    );
  });
});
