/**
 * A Gemma 4 MoE checkpoint in the page, on the real engine in Chromium (WebGPU on SwiftShader): gemma4-moe-tiny's
 * target (8 experts, top 4, beside a dense MLP) and its dense assistant dropped on their zones, the experts in the
 * summary and moe-grouped in the policy menu, the probe (exact equal; moe-grouped diverges, blamed on an experts
 * stage, with the router and experts rows in the heatmap), and MTP generation with the assistant identical to
 * classic.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import path from 'node:path';
import { readFileSync } from 'node:fs';
import { newPage, pageErrors, screenshot, SCREENSHOTS, useServerAndBrowser } from './harness.ts';
import { dropFolder, expectGenerationIdentical, expectProbeExactPasses, runProbe, TEST_MS } from './flows.ts';

const MOE = path.resolve('test/fixtures/gemma4-moe-tiny');
const GOLDEN = JSON.parse(readFileSync(path.join(MOE, 'golden.json'), 'utf8')) as { prompt: number[] };

describe('a Gemma 4 MoE checkpoint in the page (gemma4-moe-tiny)', () => {
  const env = useServerAndBrowser();
  let page: Page;
  beforeAll(async () => {
    page = await newPage(env.browser, env.url);
  });

  it('loads target and assistant: the experts in the summary, moe-grouped in the policy menus', async () => {
    expect(await dropFolder(page, 'target', path.join(MOE, 'target'))).toBe('loaded');
    expect(await dropFolder(page, 'assistant', path.join(MOE, 'assistant'))).toBe('loaded');
    const t = await page.getByTestId('target-summary').textContent();
    expect(t).toMatch(/Typegemma4/);
    expect(t).toMatch(/Experts8 experts, top 4 \(width 64\) beside a dense MLP \(192\)/);
    expect(await page.getByTestId('assistant-summary').textContent()).not.toMatch(/Experts/);
    const policies = page.getByTestId('policy').locator('option');
    await expect.poll(() => policies.allTextContents()).toContain('moe-grouped');
    expect(await policies.allTextContents()).toEqual(expect.arrayContaining(['exact', 'ring-chronological']));
    for (const id of ['trace-policy', 'generate-policy'])
      expect(await page.getByTestId(id).locator('option').allTextContents()).toContain('moe-grouped');
    await screenshot(page, '40-moe-loaded');
    expect(pageErrors(page)).toEqual([]);
  });

  it(
    'probe, exact: every draw equal past the window',
    async () => {
      await expectProbeExactPasses(page);
      await screenshot(page, '41-moe-probe-exact');
      expect(pageErrors(page)).toEqual([]);
    },
    TEST_MS,
  );

  it(
    'probe, moe-grouped: diverges, blamed on an experts stage; the heatmap has router and experts rows',
    async () => {
      expect(await runProbe(page, 'moe-grouped')).toBe('diverges');
      expect(await page.getByTestId('first-divergence').textContent()).toMatch(
        /^first divergence: layer \d+ \((sliding|full)\) experts output \(weighted sum, before post_feedforward_layernorm_2\) at position \d+$/,
      );
      expect(await page.getByTestId('consequence').textContent()).toMatch(/^MTP would be declined/);
      expect(await page.getByTestId('heatmap').isVisible()).toBe(true);
      expect(await page.getByTestId('heatmap-readout').textContent()).toMatch(
        /^layer \d+ \((sliding|full)\) · experts output \(weighted sum, before post_feedforward_layernorm_2\) at position \d+: .* first divergence$/,
      );
      // The canvas has 8 layer rows (q k v attn mlp router experts layer) and 2 final ones.
      expect(await page.getByTestId('heatmap').getAttribute('aria-label')).toMatch(/by 10 stages/);
      await screenshot(page, '42-moe-probe-grouped');
      await page.getByTestId('heatmap').screenshot({ path: path.join(SCREENSHOTS, '43-moe-heatmap.png') });
      // The router row of the first diverging layer is equal (the grouping is in the experts' reduction only).
      const heat = page.getByTestId('heatmap');
      await heat.focus();
      await page.keyboard.press('Home');
      await page.keyboard.press('ArrowUp');
      expect(await page.getByTestId('heatmap-readout').textContent()).toMatch(
        /^layer \d+ \((sliding|full)\) · router scores \(router\.proj\) at position \d+: equal/,
      );
      expect(pageErrors(page)).toEqual([]);
    },
    TEST_MS,
  );

  it(
    'generation with the assistant: MTP identical to classic (exact, K = 4)',
    async () => {
      await expectGenerationIdentical(page, GOLDEN.prompt, 24);
      expect(await page.getByTestId('generation-drafter').textContent()).toMatch(/^Drafts: the MTP assistant/);
      await screenshot(page, '44-moe-generation');
      expect(pageErrors(page)).toEqual([]);
    },
    TEST_MS,
  );
});
