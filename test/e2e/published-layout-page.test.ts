/**
 * A folder in the published layout, for every family, in the page (Chromium, WebGPU on SwiftShader): `synth`
 * writes what mlx-vlm and mlx-lm publish (config.json with text_config, vision and audio configs and the
 * quantization blocks, tower tensors beside the language model's, tokenizer files and chat_template.jinja); the
 * target, and the assistant where the family has one, are dropped on their zones and load, and each family's
 * intake is kept as a picture (`intake-<preset>.png`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { newPage, pageErrors, SCREENSHOTS, useServerAndBrowser } from './harness.ts';
import { dropFolder, TEST_MS } from './flows.ts';
import { writeSynthetic } from '../../src/node/synthetic.ts';
import { synthGeometry } from '../../src/format/synthetic.ts';
import { qwenSynthGeometry } from '../../src/format/qwen3_5/synthetic.ts';

/** One preset per family: dense Gemma 4, the E-series, the MoE, Qwen3.5 (which drafts with its own MTP head). */
const PRESETS = [
  { preset: 'tiny', family: 'dense Gemma 4', assistant: true },
  { preset: 'e2b-tiny', family: 'Gemma 4 E-series', assistant: true },
  { preset: '26b-a4b-tiny', family: 'Gemma 4 MoE', assistant: true },
  { preset: 'qwen-tiny', family: 'Qwen3.5', assistant: false },
] as const;

describe('published-layout folders of every family in the page', () => {
  const env = useServerAndBrowser();
  let tmp = '';
  beforeAll(() => {
    tmp = mkdtempSync(path.join(tmpdir(), 'ringside-published-'));
  });
  afterAll(() => {
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  for (const p of PRESETS) {
    it(`${p.family} (synth --preset ${p.preset}): the folder${p.assistant ? 's load' : ' loads'}`, {
      timeout: TEST_MS,
    }, async () => {
      const dir = path.join(tmp, p.preset);
      await writeSynthetic(dir, p.preset === 'qwen-tiny' ? qwenSynthGeometry(p.preset) : synthGeometry(p.preset));
      const target = path.join(dir, 'target');
      // the published layout: what the page must read past, not just what it needs
      const config = JSON.parse(readFileSync(path.join(target, 'config.json'), 'utf8'));
      if (p.preset !== 'qwen-tiny') {
        expect(config.text_config, 'config.json text_config').toBeDefined();
        expect(config.vision_config, 'config.json vision_config').toBeDefined();
      }
      for (const f of ['tokenizer.json', 'tokenizer_config.json', 'chat_template.jinja'])
        expect(existsSync(path.join(target, f)), f).toBe(true);

      const page = await newPage(env.browser, env.url);
      expect(
        await dropFolder(page, 'target', target),
        (await page.getByTestId('target-error').allTextContents()).join(),
      ).toBe('loaded');
      if (p.assistant) {
        const state = await dropFolder(page, 'assistant', path.join(dir, 'assistant'));
        expect(state, (await page.getByTestId('assistant-error').allTextContents()).join()).toBe('loaded');
      }
      expect(await page.getByTestId('target-summary').textContent()).toBeTruthy();
      mkdirSync(SCREENSHOTS, { recursive: true });
      await page.locator('.zones').screenshot({ path: path.join(SCREENSHOTS, `intake-${p.preset}.png`) });
      expect(pageErrors(page)).toEqual([]);
      await page.close();
    });
  }
});
