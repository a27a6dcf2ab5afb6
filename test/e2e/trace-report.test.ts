/**
 * Trace reports in the page without a model: from an opened JSON file and from share links (whole and
 * compacted), the metric table, buckets, chart and positions; the share bar on a trace (PNG, JSON,
 * Markdown, link, and the refusal of a link too large even compacted); markup in a crafted trace.
 */
import { describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { readFileSync } from 'node:fs';
import { newPage, pageErrors, screenshot, useServerAndBrowser } from './harness.ts';
import { asJson, sampleTrace } from './sample-trace.ts';
import { XSS } from './sample-report.ts';
import { buildShareLink } from '../../src/ui/share/share-link.ts';
import { validateReport } from '../../src/parity/report.ts';
import { expectedBuckets, expectedMetrics, shownBuckets, shownMetrics } from './trace-expect.ts';

async function openJson(page: Page, name: string, data: unknown): Promise<void> {
  await page
    .getByTestId('open-report')
    .setInputFiles({ name, mimeType: 'application/json', buffer: Buffer.from(JSON.stringify(data)) });
}

describe('trace reports without a model', () => {
  const env = useServerAndBrowser();

  it('renders a diverging trace from a JSON file: verdict, metrics, buckets, chart, disagreements, provenance', async () => {
    const trace = asJson(sampleTrace({ disagreeAt: [17, 60, 131, 200] }));
    const page = await newPage(env.browser, env.url);
    await openJson(page, 'trace.json', trace);
    const verdict = page.getByTestId('trace-verdict');
    await expect.poll(() => verdict.getAttribute('data-verdict'), { timeout: 30_000 }).toBe('diverges');
    expect(await page.getByTestId('report-title').textContent()).toBe('Teacher-forced trace report');
    expect(await page.getByTestId('report-source').textContent()).toBe('file trace.json');
    expect(await page.getByTestId('trace-summary').textContent()).toBe(trace.summary);
    expect(await page.getByTestId('trace-consequence').textContent()).toMatch(/top-1 differs on 2 decided positions/);
    expect(await page.getByTestId('trace-setup').textContent()).toBe(
      '256 traced positions after a prefix of 1536 tokens · K = 4 · policy mlx-metal · bf16',
    );
    expect(await shownMetrics(page)).toMatchObject(expectedMetrics(trace));
    expect(await shownBuckets(page)).toEqual(expectedBuckets(trace));
    expect(await page.getByTestId('trace-disagreements').locator('tbody tr').count()).toBe(4);
    expect(await page.getByTestId('trace-provenance').textContent()).toMatch(/Prefix1,536Traced positions256/);
    // The probe view is not shown next to it.
    expect(await page.getByTestId('probe-view').isHidden()).toBe(true);
    const chart = page.getByTestId('trace-chart');
    expect(await chart.isVisible()).toBe(true);
    const box = await chart.boundingBox();
    expect(box!.width).toBeGreaterThan(800);
    expect(box!.height).toBeGreaterThan(250);
    // The readout starts on the first disagreement; the keyboard walks positions.
    expect(await page.getByTestId('trace-readout').textContent()).toMatch(/^position 1,553 · .* TOP-1 DIFFERS$/);
    await chart.focus();
    await page.keyboard.press('ArrowRight');
    expect(await page.getByTestId('trace-readout').textContent()).toMatch(/^position 1,554 · .*top-1 agrees$/);
    await page.keyboard.press('End');
    expect(await page.getByTestId('trace-readout').textContent()).toMatch(/^position 1,791 · /);
    // All positions on request.
    await page.locator('.all-positions summary').click();
    await expect.poll(() => page.getByTestId('trace-all-positions').locator('tbody tr').count()).toBe(256);
    await screenshot(page, '17-trace-file-sample');
    await chart.screenshot({ path: 'test-results/screenshots/17-trace-chart.png' });
    expect(pageErrors(page)).toEqual([]);
    await page.close();
  });

  it('shares a trace: PNG, JSON, Markdown and a link that renders the same in a fresh page', async () => {
    const trace = asJson(sampleTrace({ prefix: 40, traced: 48, disagreeAt: [9], policy: 'ring-chronological' }));
    const page = await newPage(env.browser, env.url);
    await openJson(page, 'small.json', trace);
    await expect
      .poll(() => page.getByTestId('trace-verdict').getAttribute('data-verdict'), { timeout: 30_000 })
      .toBe('diverges');

    const [png] = await Promise.all([page.waitForEvent('download'), page.getByTestId('download-png').click()]);
    expect(png.suggestedFilename()).toMatch(
      /^ringside-trace-diverges-ring-chronological-bf16-K4-P40-T48-3f2a9c1d7e5b\.png$/,
    );
    const buf = readFileSync((await png.path())!);
    expect(buf.readUInt32BE(16)).toBe(2400);
    expect(buf.readUInt32BE(20)).toBeGreaterThan(2 * 500);
    await png.saveAs('test-results/screenshots/18-trace-export.png');
    const [json] = await Promise.all([page.waitForEvent('download'), page.getByTestId('download-json').click()]);
    const saved = JSON.parse(readFileSync((await json.path())!, 'utf8'));
    expect(saved).toEqual(trace);

    await page.getByTestId('copy-markdown').click();
    const field = page.getByTestId('share-link');
    await expect.poll(() => field.inputValue()).toMatch(/^### Ringside teacher-forced trace: \*\*DIVERGES\*\*/);
    expect(await field.inputValue()).toContain('[Open the full trace](');

    await page.getByTestId('copy-link').click();
    await expect.poll(() => field.inputValue()).toMatch(/#report=[A-Za-z0-9_-]+$/);
    // The field sits under the header, as wide as the card (not squeezed beside the buttons).
    const fieldBox = (await field.boundingBox())!;
    const cardBox = (await page.locator('#report-card').boundingBox())!;
    expect(fieldBox.width).toBeGreaterThan(cardBox.width - 60);
    expect(fieldBox.y).toBeGreaterThan((await page.getByTestId('copy-link').boundingBox())!.y + 20);
    await page.locator('#report-card').screenshot({ path: 'test-results/screenshots/19-share-field.png' });
    const link = await field.inputValue();

    const fresh = await newPage(env.browser, link);
    await expect
      .poll(() => fresh.getByTestId('trace-verdict').getAttribute('data-verdict'), { timeout: 30_000 })
      .toBe('diverges');
    expect(await fresh.getByTestId('report-source').textContent()).toBe('shared link');
    expect(await fresh.getByTestId('trace-summary').textContent()).toBe(trace.summary);
    expect(await shownMetrics(fresh)).toMatchObject(expectedMetrics(trace));
    expect(await fresh.getByTestId('trace-compacted').isHidden()).toBe(true);
    expect(await fresh.getByTestId('trace-chart').isVisible()).toBe(true);
    for (const p of [page, fresh]) {
      expect(pageErrors(p)).toEqual([]);
      await p.close();
    }
  });

  it('a long trace shares a compacted link that says so; one too long even compacted is refused with what to do', async () => {
    const long = asJson(sampleTrace({ traced: 700, disagreeAt: [3] }));
    const l = buildShareLink(long, env.url);
    if (!l.ok) throw new Error(l.message);
    expect(l.compacted).toBe(true);
    const page = await newPage(env.browser, l.link);
    await expect
      .poll(() => page.getByTestId('trace-verdict').getAttribute('data-verdict'), { timeout: 30_000 })
      .toBe('diverges');
    expect(await page.getByTestId('trace-compacted').isVisible()).toBe(true);
    expect(await shownMetrics(page)).toMatchObject(expectedMetrics(long));
    expect(validateReport(long)).toEqual([]);

    await openJson(page, 'huge.json', asJson(sampleTrace({ traced: 4096 })));
    await expect
      .poll(() => page.getByTestId('report-source').textContent(), { timeout: 30_000 })
      .toBe('file huge.json');
    expect(await page.getByTestId('trace-compacted').isHidden()).toBe(true);
    await page.getByTestId('copy-link').click();
    await expect
      .poll(() => page.getByTestId('share-status').textContent())
      .toMatch(/too large for a link .*Download JSON/);
    expect(await page.getByTestId('share-link').isHidden()).toBe(true);
    expect(pageErrors(page)).toEqual([]);
    await page.close();
  });

  it('renders a crafted trace as literal text', async () => {
    const t = asJson(sampleTrace({ traced: 16, disagreeAt: [1] })) as unknown as Record<string, any>;
    t.summary = `summary ${XSS}`;
    t.provenance.policy = `policy ${XSS}`;
    t.positions[0].deltaChosen = '<b>x</b>';
    t.positions[0].chainTop[0].id = `<b>${XSS}</b>`;
    const page = await newPage(env.browser, env.url);
    await openJson(page, 'crafted-trace.json', t);
    await expect
      .poll(() => page.getByTestId('trace-summary').textContent(), { timeout: 30_000 })
      .toBe(`summary ${XSS}`);
    expect(await page.getByTestId('trace-setup').textContent()).toContain(`policy policy ${XSS}`);
    expect(await page.locator('#report-card').locator('img, script, b').count()).toBe(0);
    expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
    expect(pageErrors(page)).toEqual([]);
    await page.close();
  });
});
