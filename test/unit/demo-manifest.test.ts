/**
 * public/demo/manifest.json, read by the page's "Try the demo model" (src/ui/intake/demo.ts): the shipped one is
 * valid and every file it lists is there, and the parser refuses what the page could not load.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseDemoManifest } from '../../src/ui/intake/demo.ts';
import { openCheckpointDir } from '../../src/node/file-source.ts';

const DEMO = path.resolve('public/demo');

describe('demo manifest', () => {
  it('the shipped manifest is valid, its files exist, and both folders open as checkpoints', async () => {
    const m = parseDemoManifest(JSON.parse(readFileSync(path.join(DEMO, 'manifest.json'), 'utf8')));
    for (const role of ['target', 'assistant'] as const) {
      for (const f of m[role]) expect(existsSync(path.join(DEMO, role, f)), `${role}/${f}`).toBe(true);
    }
    const target = await openCheckpointDir(path.join(DEMO, 'target'));
    const assistant = await openCheckpointDir(path.join(DEMO, 'assistant'));
    expect(target.modelType).toMatch(/^gemma4/);
    expect(assistant.modelType).toBe('gemma4_assistant');
    // A suggested text prompt needs the tokenizer the page would encode it with.
    expect(target.tokenizer !== undefined).toBe(m.target.includes('tokenizer.json'));
    if (m.prompt) expect(target.tokenizer).toBeDefined();
  });

  it('accepts tokenizer files and a suggested prompt', () => {
    const m = parseDemoManifest({
      name: 'demo',
      about: 'trained for the demo, not Gemma',
      target: ['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json'],
      assistant: ['config.json', 'model.safetensors'],
      prompt: { text: 'The best way to' },
    });
    expect(m.prompt).toEqual({ text: 'The best way to', chat: false });
    expect(m.about).toBe('trained for the demo, not Gemma');
  });

  it('refuses what the page could not load, saying why', () => {
    const ok = { name: 'x', target: ['config.json'], assistant: ['config.json'] };
    expect(() => parseDemoManifest([])).toThrow(/not a JSON object/);
    expect(() => parseDemoManifest({ ...ok, name: undefined })).toThrow(/"name" is missing/);
    expect(() => parseDemoManifest({ ...ok, target: ['../secret'] })).toThrow(/plain file names/);
    expect(() => parseDemoManifest({ ...ok, assistant: ['model.safetensors'] })).toThrow(/lacks config.json/);
    expect(() => parseDemoManifest({ ...ok, prompt: { text: 'hi' } })).toThrow(/needs tokenizer.json/);
    expect(() =>
      parseDemoManifest({ ...ok, target: ['config.json', 'tokenizer.json'], prompt: { text: 'hi', chat: 'yes' } }),
    ).toThrow(/prompt.chat/);
  });
});
