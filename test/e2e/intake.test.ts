/**
 * Checkpoint intake through the page: folder upload on the webkitdirectory inputs, the model summary,
 * bad folders (each with its own error in place, the page staying usable), and the demo model.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { newPage, pageErrors, screenshot, useServerAndBrowser } from './harness.ts';
import { ASSISTANT_DIR, dropFolder, RUN_MS, TARGET_DIR, TEST_MS } from './flows.ts';

function copyDir(from: string, to: string): string {
  mkdirSync(to, { recursive: true });
  for (const f of ['config.json', 'model.safetensors']) copyFileSync(path.join(from, f), path.join(to, f));
  return to;
}

describe('checkpoint intake in the page', () => {
  const env = useServerAndBrowser();
  let tmp: string;
  beforeAll(async () => {
    tmp = mkdtempSync(path.join(tmpdir(), 'ringside-e2e-'));
  });
  afterAll(async () => {
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it('loads the fixture target and assistant folders and shows their summaries', async () => {
    const page = await newPage(env.browser, env.url);
    expect(await page.getByTestId('run-probe').isDisabled()).toBe(true);
    // Record every progress line the zone shows (the tiny model loads too fast to catch one by polling).
    await page.evaluate(() => {
      const seen: string[] = ((window as unknown as { __progress: string[] }).__progress = []);
      new MutationObserver(() => {
        const t = document.querySelector('[data-testid="target-progress"]')?.textContent;
        if (t && seen[seen.length - 1] !== t) seen.push(t);
      }).observe(document.body, { subtree: true, childList: true, characterData: true });
    });
    expect(await dropFolder(page, 'target', TARGET_DIR)).toBe('loaded');
    const progress = await page.evaluate(() => (window as unknown as { __progress: string[] }).__progress);
    expect(
      progress.some((t) =>
        /^Uploading to the GPU: [\d.]+ of [\d.]+ MB, [\d.]+ MB\/s, ETA \d+ s \(language_model\./.test(t),
      ),
      progress.join('\n'),
    ).toBe(true);
    const t = await page.getByTestId('target-summary').textContent();
    expect(t).toMatch(/Typegemma4/);
    expect(t).toMatch(/Layers12/);
    expect(t).toMatch(/Heads4/);
    expect(t).toMatch(/Window16/);
    expect(t).toMatch(/affine 4-bit g64.*affine 8-bit g64|affine 8-bit g64.*affine 4-bit g64/);
    expect(t).toMatch(/Digest[0-9a-f]{12}/);
    expect(t).toMatch(/Size6\.\d+ MB/);
    expect(await page.getByTestId('target-zone').textContent()).toContain('target'); // the folder's name is the label
    expect(await dropFolder(page, 'assistant', ASSISTANT_DIR)).toBe('loaded');
    expect(await page.getByTestId('assistant-summary').textContent()).toMatch(/Typegemma4_assistant.*Layers4/);
    expect(await page.getByTestId('run-probe').isEnabled()).toBe(true);
    await screenshot(page, '02-loaded');
    expect(pageErrors(page)).toEqual([]);
    await page.close();
  });

  it("shows each bad folder's own error in place and stays usable", async () => {
    const truncated = copyDir(TARGET_DIR, path.join(tmp, 'truncated'));
    truncateSync(
      path.join(truncated, 'model.safetensors'),
      Math.floor(statSync(path.join(truncated, 'model.safetensors')).size * 0.6),
    );
    const noConfig = copyDir(TARGET_DIR, path.join(tmp, 'no-config'));
    rmSync(path.join(noConfig, 'config.json'));
    const mismatched = copyDir(ASSISTANT_DIR, path.join(tmp, 'assistant-window-32'));
    const cfg = JSON.parse(readFileSync(path.join(mismatched, 'config.json'), 'utf8'));
    cfg.text_config.sliding_window = 32;
    writeFileSync(path.join(mismatched, 'config.json'), JSON.stringify(cfg));

    const page = await newPage(env.browser, env.url);
    const targetError = page.getByTestId('target-error');

    expect(await dropFolder(page, 'target', truncated)).toBe('error');
    expect(await targetError.textContent()).toMatch(
      /^truncated: model\.safetensors: tensor ".*" data_offsets \[\d+, \d+\] run past the end of the data section/,
    );
    expect(await targetError.getAttribute('role')).toBe('alert');
    await screenshot(page, '03-error-truncated');

    expect(await dropFolder(page, 'target', noConfig)).toBe('error');
    expect(await targetError.textContent()).toMatch(
      /^no-config: no config\.json among the 1 files given \(model\.safetensors\)/,
    );

    expect(await dropFolder(page, 'target', ASSISTANT_DIR)).toBe('error');
    expect(await targetError.textContent()).toMatch(
      /^assistant: this is an MTP assistant \(model_type "gemma4_assistant"\), not a target\. Drop it on the assistant zone\./,
    );
    expect(await page.getByTestId('run-probe').isDisabled()).toBe(true);

    // Still usable: the real target loads in the same zone and clears the error.
    expect(await dropFolder(page, 'target', TARGET_DIR)).toBe('loaded');
    expect(await targetError.count()).toBe(0);

    expect(await dropFolder(page, 'assistant', mismatched)).toBe('error');
    const assistantError = await page.getByTestId('assistant-error').textContent();
    expect(assistantError).toMatch(
      /^"assistant-window-32" does not fit the loaded target "target": assistant \(gemma4_assistant\) does not fit target \(gemma4\): .*assistant sliding_window 32 != target sliding_window 16/,
    );
    await screenshot(page, '04-error-mismatch');
    // The target is untouched by the assistant's refusal; the probe can still run.
    expect(await page.getByTestId('target-zone').getAttribute('data-state')).toBe('loaded');
    expect(await page.getByTestId('run-probe').isEnabled()).toBe(true);
    expect(await dropFolder(page, 'assistant', ASSISTANT_DIR)).toBe('loaded');
    expect(pageErrors(page)).toEqual([]);
    await page.close();
  });

  it('a new target of another shape unloads the assistant that does not fit it, so a pair can follow a pair', async () => {
    const page = await newPage(env.browser, env.url);
    expect(await dropFolder(page, 'target', TARGET_DIR)).toBe('loaded');
    expect(await dropFolder(page, 'assistant', ASSISTANT_DIR)).toBe('loaded');
    // the demo pair: vocabulary 4096 and window 32 where the fixture's has 1024 and 16
    expect(await dropFolder(page, 'target', path.resolve('public/demo/target'))).toBe('loaded');
    const assistantZone = page.getByTestId('assistant-zone');
    await expect.poll(() => assistantZone.getAttribute('data-state')).toBe('error');
    expect(await page.getByTestId('assistant-error').textContent()).toMatch(
      /^"assistant" was unloaded: it does not fit the new target "target" \(assistant \(gemma4_assistant\) does not fit target \(gemma4\): .*\)\. Drop the assistant made for "target"\.$/,
    );
    await screenshot(page, '05-assistant-unloaded-by-new-target');
    expect(await dropFolder(page, 'assistant', path.resolve('public/demo/assistant'))).toBe('loaded');
    expect(await page.getByTestId('assistant-error').count()).toBe(0);
    // a failed drop says the previous checkpoint is still the one the runs use
    const noConfig = copyDir(TARGET_DIR, path.join(tmp, 'no-config-2'));
    rmSync(path.join(noConfig, 'config.json'));
    expect(await dropFolder(page, 'target', noConfig)).toBe('error');
    expect(await page.getByTestId('target-still-loaded').textContent()).toBe(
      'target (loaded before) is still loaded, and the runs use it.',
    );
    await screenshot(page, '06-failed-drop-keeps-previous');
    expect(pageErrors(page)).toEqual([]);
    await page.close();
  });

  it(
    'no folder is taken while a run is in progress (a load would destroy the buffers the run reads)',
    async () => {
      const page = await newPage(env.browser, env.url);
      expect(await dropFolder(page, 'target', TARGET_DIR)).toBe('loaded');
      await page.getByTestId('tab-probe').click();
      await page.getByTestId('lengths').fill('600'); // long enough to still run while the folder is given
      await page.getByTestId('run-probe').click();
      await expect.poll(() => page.getByTestId('target-choose').isDisabled()).toBe(true);
      await page.getByTestId('target-files').setInputFiles(path.resolve('public/demo/target'));
      await expect
        .poll(() => page.getByTestId('target-error').textContent())
        .toBe('A run is in progress: wait for it to finish or cancel it, then load the checkpoint.');
      await page.getByTestId('probe-cancel').click();
      await expect
        .poll(() => page.getByTestId('probe-elapsed').textContent(), { timeout: RUN_MS })
        .toMatch(/^Cancelled after /);
      await expect.poll(() => page.getByTestId('target-choose').isEnabled()).toBe(true);
      expect(await dropFolder(page, 'target', path.resolve('public/demo/target'))).toBe('loaded');
      expect(pageErrors(page)).toEqual([]);
      await page.close();
    },
    TEST_MS,
  );

  it('loads files dropped on a zone (DataTransfer without directory entries)', async () => {
    const page = await newPage(env.browser, env.url);
    const zone = page.getByTestId('target-zone');
    await zone.evaluate(async (node) => {
      const dt = new DataTransfer();
      for (const name of ['config.json', 'model.safetensors']) {
        const blob = await (await fetch(`/demo/target/${name}`)).blob();
        dt.items.add(new File([blob], name));
      }
      node.dispatchEvent(new DragEvent('dragover', { dataTransfer: dt, bubbles: true, cancelable: true }));
      node.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
    });
    await expect.poll(() => zone.getAttribute('data-state'), { timeout: 90_000 }).toBe('loaded');
    expect(await page.getByTestId('target-summary').textContent()).toMatch(/Typegemma4.*Layers12/);
    expect(pageErrors(page)).toEqual([]);
    await page.close();
  });

  it('loads the demo model with one click', async () => {
    const page = await newPage(env.browser, env.url);
    await page.getByTestId('demo').click();
    await expect
      .poll(() => page.getByTestId('demo-status').textContent(), { timeout: 90_000 })
      .toMatch(/Demo model loaded/);
    expect(await page.getByTestId('target-summary').textContent()).toMatch(/Typegemma4.*Layers12/);
    expect(await page.getByTestId('assistant-summary').textContent()).toMatch(/Typegemma4_assistant/);
    // A manifest that suggests a text prompt (a demo model with its tokenizer) fills the generation tab with it.
    const manifest = JSON.parse(readFileSync('public/demo/manifest.json', 'utf8'));
    if (manifest.prompt) {
      expect(await page.getByTestId('generate-prompt').inputValue()).toBe(manifest.prompt.text);
      expect(await page.getByTestId('generate-prompt-text').isChecked()).toBe(true);
      expect(await page.getByTestId('generate-chat').isChecked()).toBe(manifest.prompt.chat === true);
    }
    // Recent checkpoints remember both (no directory handle for fetched files: "drop again").
    await expect.poll(() => page.getByTestId('recent').locator('li').count()).toBe(2);
    expect(await page.getByTestId('recent').textContent()).toContain('drop again');
    expect(pageErrors(page)).toEqual([]);
    await page.close();
  });
});
