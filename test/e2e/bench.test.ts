/**
 * "Measure this GPU" in the page: the benchmark's short form runs in the Worker on the browser's own
 * adapter (SwiftShader here), and the figures travel with the next probe report.
 */
import { describe, expect, it } from 'vitest';
import { newPage, pageErrors, screenshot, useServerAndBrowser } from './harness.ts';
import { dropFolder, TARGET_DIR } from './flows.ts';

describe('GPU measurement in the page', () => {
  const env = useServerAndBrowser();

  it('measures copy bandwidth, FMA and the 12B matmul ratios, and attaches them to the probe report', {
    timeout: 900_000,
  }, async () => {
    const page = await newPage(env.browser, env.url);
    await expect.poll(() => page.getByTestId('adapter').getAttribute('data-state'), { timeout: 60_000 }).toBe('ready');
    const status = page.getByTestId('bench-status');
    // Every text the status takes from the click on: a progress message that arrives after the result must
    // not put "Measuring…" back (it did once). Watched until the end of the test, a whole probe run later,
    // instead of for a fixed delay.
    await status.evaluate((el) => {
      const w = window as unknown as { __benchTexts: string[] };
      w.__benchTexts = [];
      new MutationObserver(() => w.__benchTexts.push(el.textContent ?? '')).observe(el, {
        childList: true,
        characterData: true,
        subtree: true,
      });
    });
    await page.getByTestId('run-bench').click();
    await expect.poll(() => status.getAttribute('data-state'), { timeout: 600_000 }).toMatch(/pass|fail/);
    expect(await status.getAttribute('data-state'), (await status.textContent()) ?? '').toBe('pass');
    const measured = (await status.textContent()) ?? '';
    expect(measured).toMatch(/^Measured in \d+ s; attached to the next probe reports\.$/);
    const figures = (await page.getByTestId('performance').first().textContent()) ?? '';
    expect(figures).toMatch(/Copy bandwidth\d+\.\d\d GB\/s/);
    expect(figures).toMatch(/4-bit matvec \(12B MLP, M = 1\)\d\.\d{3} × copy bandwidth/);
    expect(figures).toMatch(/4-bit matvec, 4 rows vs 1 row \(a verify block of K = 4\)\d+\.\d\d ×/);
    expect(figures).toMatch(/MLP gate \+ up \+ GeGLU \(M = 1\)\d\.\d{3} × copy bandwidth/);
    // a chain token end to end on one 12B layer, as tokens/s, and where its time goes
    expect(figures).toMatch(
      /Chain token end to end\d+\.\d ms = \d+\.\d tokens\/s \(synthetic .*12b geometry, 1 layer, vocab 32768\)/,
    );
    expect(figures).toMatch(
      /Where a token goesrecording \d+\.\d\d ms · submit \d+\.\d\d ms · waiting for the GPU \d+\.\d\d ms/,
    );
    // Every figure keeps a readable width in the narrow adapter card: a label longer than the others
    // once set the label column's width and squeezed every value into a one-character column.
    const valueWidths = await page
      .getByTestId('performance')
      .first()
      .locator('dd')
      .evaluateAll((els) => els.map((e) => e.getBoundingClientRect().width));
    expect(Math.min(...valueWidths)).toBeGreaterThan(120);
    await screenshot(page, '23-measure-gpu');

    await dropFolder(page, 'target', TARGET_DIR);
    await page.getByTestId('lengths').fill('8');
    const run = page.getByTestId('run-probe');
    await expect.poll(() => run.isEnabled(), { timeout: 60_000 }).toBe(true);
    await run.click();
    await expect
      .poll(() => page.getByTestId('verdict').getAttribute('data-verdict'), { timeout: 480_000 })
      .toBe('equal');
    const report = (await page.locator('#report-slot').textContent()) ?? '';
    expect(report).toContain('Performance of this GPU');
    // The status never changed after the result: no late "Measuring…" (see the observer above).
    const texts = await page.evaluate(() => (window as unknown as { __benchTexts: string[] }).__benchTexts);
    const done = texts.indexOf(measured);
    expect(done, texts.join(' | ')).toBeGreaterThan(0);
    expect(texts.slice(done), texts.join(' | ')).toEqual(texts.slice(done).map(() => measured));
    expect(await status.textContent()).toBe(measured);
    expect(pageErrors(page)).toEqual([]);
  });
});
