/**
 * A Gemma 4 E-series checkpoint in the page, on the real engine in Chromium (WebGPU on SwiftShader): gemma4-e-tiny's
 * target (per-layer embeddings, 4 KV-shared layers, double-wide MLP) and its centroid-head assistant dropped on their
 * zones, what the summaries say about them, the probe (exact equal past the window; ring-chronological diverges,
 * localized to layer 0's attention, with no k / v rows on the shared layers), the trace, and MTP generation drafted
 * by the centroid head, identical to classic and starting from the fixture's transformers goldens.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import path from 'node:path';
import { readFileSync } from 'node:fs';
import { newPage, pageErrors, screenshot, SCREENSHOTS, useServerAndBrowser } from './harness.ts';
import {
  dropFolder,
  expectGenerationIdentical,
  expectProbeExactPasses,
  runJob,
  runProbe,
  TEST_MS,
  tokensOf,
} from './flows.ts';

const E_TINY = path.resolve('test/fixtures/gemma4-e-tiny');
const GOLDEN = JSON.parse(readFileSync(path.join(E_TINY, 'golden.json'), 'utf8')) as {
  prompt: number[];
  greedy: number[];
  draft: { tokens: number[] };
};

describe('a Gemma 4 E-series checkpoint in the page (gemma4-e-tiny)', () => {
  const env = useServerAndBrowser();
  let page: Page;
  beforeAll(async () => {
    page = await newPage(env.browser, env.url);
  });

  it('loads target and assistant: per-layer inputs, KV sharing and the centroid head in the summaries', async () => {
    expect(await dropFolder(page, 'target', path.join(E_TINY, 'target'))).toBe('loaded');
    expect(await dropFolder(page, 'assistant', path.join(E_TINY, 'assistant'))).toBe('loaded');
    const t = await page.getByTestId('target-summary').textContent();
    expect(t).toMatch(/Typegemma4/);
    // P = 64 for each of the 10 layers: a [512, 640] table, small enough for one buffer.
    expect(t).toMatch(/Per-layer inputs64 per layer × 10 layers \(table 512 × 640, 1 buffer\)/);
    // The last 4 layers (6-9) read the last owner of their type among layers 0-5: 5 (sliding) and 4 (full).
    expect(t).toMatch(
      /KV sharing4 of 10 layers: 6–8 read 5 \(sliding\), 9 reads 4 \(full\); 6 own caches; double-wide MLP \(256\) on the shared layers/,
    );
    expect(t).not.toMatch(/Experts|LM head/);
    const a = await page.getByTestId('assistant-summary').textContent();
    expect(a).toMatch(/Typegemma4_assistant/);
    expect(a).toMatch(/LM headcentroid: 16 centroids, top 4 \(32 tokens each: 128 of 512 scored\)/);
    expect(a).not.toMatch(/Per-layer inputs|KV sharing/);
    // The dense Gemma 4 policy list (no MoE or Qwen policies).
    const policies = page.getByTestId('policy').locator('option');
    await expect.poll(() => policies.allTextContents()).toContain('ring-chronological');
    expect(await policies.allTextContents()).not.toContain('moe-grouped');
    await screenshot(page, '50-e-series-loaded');
    expect(pageErrors(page)).toEqual([]);
  });

  it(
    'probe, exact: every draw equal past the window',
    async () => {
      await expectProbeExactPasses(page);
      expect(await page.getByTestId('provenance').textContent()).toMatch(/gemma4 · target · 10 layers/);
      await screenshot(page, '51-e-series-probe-exact');
      expect(pageErrors(page)).toEqual([]);
    },
    TEST_MS,
  );

  it(
    'probe, ring-chronological: diverges at layer 0 attention; the heatmap has no k / v rows on shared layers',
    async () => {
      expect(await runProbe(page, 'ring-chronological')).toBe('diverges');
      expect(await page.getByTestId('first-divergence').textContent()).toBe(
        'first divergence: layer 0 (sliding) attention output at position 0',
      );
      expect(await page.getByTestId('consequence').textContent()).toMatch(/^MTP would be declined/);
      expect(await page.getByTestId('heatmap').isVisible()).toBe(true);
      expect(await page.getByTestId('heatmap-readout').textContent()).toMatch(
        /^layer 0 \(sliding\) · attention output .* first divergence$/,
      );
      // Layers 6-9 share K/V: their k and v cells are hatched and read as none, not as uncaptured.
      const heat = page.getByTestId('heatmap');
      await heat.focus();
      await page.keyboard.press('Home'); // layer 0 attn
      for (const key of ['ArrowUp', 'ArrowUp', ...Array(6).fill('ArrowRight')]) await page.keyboard.press(key);
      expect(await page.getByTestId('heatmap-readout').textContent()).toMatch(
        /^layer 6 \(sliding\) · k \(after k_norm \+ RoPE\): none \(a KV-shared layer has no k_proj \/ v_proj; it attends to an earlier layer's K\/V\)$/,
      );
      await heat.blur();
      await screenshot(page, '52-e-series-probe-ring');
      await page.getByTestId('heatmap').screenshot({ path: path.join(SCREENSHOTS, '53-e-series-heatmap.png') });
      expect(pageErrors(page)).toEqual([]);
    },
    TEST_MS,
  );

  it(
    'trace: exact keeps every row; ring-chronological parts the rows after the wrap',
    async () => {
      await page.getByTestId('tab-trace').click();
      await page.getByTestId('trace-prefix').fill('20');
      await page.getByTestId('trace-traced').fill('24');
      for (const [policy, verdict] of [
        ['exact', 'equal'],
        ['ring-chronological', 'diverges'],
      ] as const) {
        await page.getByTestId('trace-policy').selectOption(policy);
        await runJob(page, 'trace');
        expect(await page.getByTestId('trace-verdict').getAttribute('data-verdict')).toBe(verdict);
        expect(await page.getByTestId('trace-provenance').textContent()).toContain(`Policy${policy}`);
      }
      expect(await page.getByTestId('trace-summary').textContent()).toMatch(
        /^teacher-forced trace: \d+ of 24 rows differ/,
      );
      await screenshot(page, '54-e-series-trace-ring');
      expect(pageErrors(page)).toEqual([]);
    },
    TEST_MS,
  );

  it(
    'generation drafted by the centroid-head assistant: the goldens, identical to classic (exact, K = 4)',
    async () => {
      await expectGenerationIdentical(page, GOLDEN.prompt, 40);
      // transformers' float64 greedy decode, and the centroid head's draft tokens for round 0.
      expect((await tokensOf(page, 'classic-tokens')).slice(0, GOLDEN.greedy.length)).toEqual(GOLDEN.greedy);
      const round0 = page.getByTestId('mtp-rounds-table').locator('tbody tr').first();
      expect((await round0.locator('.round-drafts .tok').allTextContents()).map(Number)).toEqual(GOLDEN.draft.tokens);
      expect(await page.getByTestId('generation-drafter').textContent()).toBe(
        'Drafts: the MTP assistant assistant (centroid head: 16 centroids, top 4)',
      );
      await screenshot(page, '55-e-series-generation');
      expect(pageErrors(page)).toEqual([]);
    },
    TEST_MS,
  );
});
