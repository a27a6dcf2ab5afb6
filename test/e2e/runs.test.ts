/**
 * The visit's runs on the real engine (the demo model in Chromium, WebGPU on SwiftShader): a probe, a trace and a
 * generation each join the run list, none replaces another, each reopens from it; a second probe under an inexact
 * policy and the first one compare side by side from the list. Screenshots: 34-runs (the page after a probe, a trace
 * and a generation), 35-compare-probe (the two probes).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { newPage, pageErrors, screenshot, useServerAndBrowser } from './harness.ts';
import { runJob, TEST_MS } from './flows.ts';

describe('the run list on the demo model', () => {
  const env = useServerAndBrowser();
  let page: Page;
  beforeAll(async () => {
    page = await newPage(env.browser, env.url);
    await page.getByTestId('demo').click();
    await page.waitForFunction(
      () => /Demo model loaded/.test(document.querySelector('[data-testid="demo-status"]')?.textContent ?? ''),
      undefined,
      { timeout: 90_000 },
    );
    // a self-test first: every report after it names it in its provenance
    await page.getByTestId('run-selftest').click();
    await page.waitForFunction(
      () => /passed|FAILED/.test(document.querySelector('[data-testid="selftest-status"]')?.textContent ?? ''),
      undefined,
      { timeout: 120_000 },
    );
  });

  const rows = () =>
    page
      .getByTestId('runs-list')
      .locator('tbody tr')
      .evaluateAll((tr) =>
        tr.map((r) => [
          r.getAttribute('data-kind'),
          r.querySelectorAll('td')[2]?.textContent,
          r.querySelectorAll('td')[3]?.textContent,
        ]),
      );

  it(
    'a probe, a trace and a generation: three runs in the list, each reopens',
    async () => {
      await page.getByTestId('tab-probe').click();
      await page.getByTestId('policy').selectOption('exact');
      await runJob(page, 'probe');
      await page.getByTestId('tab-trace').click();
      await page.getByTestId('trace-policy').selectOption('ring-chronological');
      await runJob(page, 'trace');
      // the trace did not replace the probe: both are in the list, the trace on screen
      expect(await rows()).toEqual([
        ['trace', 'diverges', 'ring-chronological · f32 · K = 4 · prefix 80, traced 96'],
        ['probe', 'equal', 'exact · f32 · K = 4 · draws 8; 8; 8; 64'],
      ]);
      await page.getByTestId('tab-generate').click();
      await page.getByTestId('generate-max-new').fill('16');
      await page.getByTestId('generate-policy').selectOption('exact');
      await runJob(page, 'generate');
      expect(await rows()).toEqual([
        ['generation', 'identical', 'exact · f32 · K = 4 · 16 tokens'],
        ['trace', 'diverges', 'ring-chronological · f32 · K = 4 · prefix 80, traced 96'],
        ['probe', 'equal', 'exact · f32 · K = 4 · draws 8; 8; 8; 64'],
      ]);
      expect(await page.locator('#generation-card').isVisible()).toBe(true);
      expect(await page.locator('#report-card').isHidden()).toBe(true);
      expect(await page.getByTestId('run-open-3').textContent()).toBe('Shown');
      await screenshot(page, '34-runs');
      // the run panel with its settled progress, the list, the top of the run on screen
      await page.locator('#run-card').evaluate((e) => e.scrollIntoView({ block: 'start' }));
      await page.screenshot({ path: 'test-results/screenshots/34-runs-viewport.png' });

      // the probe reopens as it was, with its report's exports
      await page.getByTestId('run-open-1').click();
      await expect.poll(() => page.getByTestId('verdict').getAttribute('data-verdict')).toBe('equal');
      expect(await page.getByTestId('report-title').textContent()).toBe('Block-versus-chain probe report');
      expect(await page.locator('#generation-card').isHidden()).toBe(true);
      const prov = (await page.getByTestId('provenance').textContent()) ?? '';
      expect(prov).toMatch(/Commit[0-9a-f]{12}/);
      expect(prov).toMatch(/Self-testpassed: 2 of 3 checks passed, 1 skipped \(20\d\d-/);
      await page.getByTestId('run-open-2').click();
      await expect.poll(() => page.getByTestId('trace-verdict').getAttribute('data-verdict')).toBe('diverges');
      expect(pageErrors(page)).toEqual([]);
    },
    TEST_MS,
  );

  it(
    'a second probe under ring-chronological, compared with the first from the list',
    async () => {
      await page.getByTestId('tab-probe').click();
      await page.getByTestId('policy').selectOption('ring-chronological');
      await runJob(page, 'probe');
      expect((await rows())[0]).toEqual(['probe', 'diverges', 'ring-chronological · f32 · K = 4 · draws 8; 8; 8; 64']);
      await page.getByTestId('run-pick-1').check();
      await page.getByTestId('run-pick-4').check();
      await page.getByTestId('runs-compare').click();
      await expect.poll(() => page.getByTestId('compare-verdict').getAttribute('data-verdict')).toBe('part');
      expect(await page.getByTestId('compare-summary').textContent()).toBe(
        'A EQUAL, B DIVERGES: 1 of 4 draws part (draw 3)',
      );
      const facts = page.getByTestId('compare-facts');
      expect(await facts.locator('tr[data-fact="policy"]').getAttribute('data-differs')).toBe('yes');
      for (const same of ['adapter', 'browser', 'precision', 'commit', 'self-test', 'target'])
        expect(await facts.locator(`tr[data-fact="${same}"]`).getAttribute('data-differs'), same).toBe('no');
      // SwiftShader has subgroups and no shader-f16: the f16 check is skipped
      expect(await facts.locator('tr[data-fact="self-test"] td').first().textContent()).toBe(
        'passed: 2 of 3 checks passed, 1 skipped',
      );
      await expect.poll(() => page.getByTestId('compare-heatmap-b').isVisible()).toBe(true);
      await page.locator('#compare-card').screenshot({ path: 'test-results/screenshots/35-compare-probe.png' });
      expect(pageErrors(page)).toEqual([]);
    },
    TEST_MS,
  );
});
