/**
 * "Measure this GPU" in the page: the benchmark's short form runs in the Worker on the browser's own
 * adapter (SwiftShader here), and the figures travel with the next probe report.
 */
import { describe, expect, it } from 'vitest';
import { newPage, pageErrors, screenshot, useServerAndBrowser } from './harness.ts';
import { dropFolder, TARGET_DIR } from './flows.ts';

describe('GPU measurement in the page', () => {
  const env = useServerAndBrowser();

  it('measures copy bandwidth, FMA and the 12B matmul ratios, and attaches them to the probe report', { timeout: 900_000 }, async () => {
    const page = await newPage(env.browser, env.url);
    await expect.poll(() => page.getByTestId('adapter').getAttribute('data-state'), { timeout: 60_000 }).toBe('ready');
    await page.getByTestId('run-bench').click();
    const status = page.getByTestId('bench-status');
    await expect.poll(() => status.getAttribute('data-state'), { timeout: 600_000 }).toMatch(/pass|fail/);
    expect(await status.getAttribute('data-state'), (await status.textContent()) ?? '').toBe('pass');
    // A progress message that arrives after the result must not put "Measuring…" back (it did, once).
    await page.waitForTimeout(500);
    expect(await status.textContent()).toMatch(/^Measured in \d+ s; attached to the next probe reports\.$/);
    const figures = (await page.getByTestId('performance').first().textContent()) ?? '';
    expect(figures).toMatch(/Copy bandwidth\d+\.\d\d GB\/s/);
    expect(figures).toMatch(/4-bit matvec \(12B MLP, M = 1\)\d\.\d{3} × copy bandwidth/);
    expect(figures).toMatch(/Verify block K = 4 vs M = 1\d+\.\d\d ×/);
    // a chain token end to end on one 12B layer, as tokens/s, and where its time goes
    expect(figures).toMatch(/Chain token end to end\d+\.\d ms = \d+\.\d tokens\/s \(synthetic .*12b geometry, 1 layer, vocab 32768\)/);
    expect(figures).toMatch(/Where a token goesrecording \d+\.\d\d ms · submit \d+\.\d\d ms · waiting for the GPU \d+\.\d\d ms/);
    await screenshot(page, '23-measure-gpu');

    await dropFolder(page, 'target', TARGET_DIR);
    await page.getByTestId('lengths').fill('8');
    const run = page.getByTestId('run-probe');
    await expect.poll(() => run.isEnabled(), { timeout: 60_000 }).toBe(true);
    await run.click();
    await expect.poll(() => page.getByTestId('verdict').getAttribute('data-verdict'), { timeout: 480_000 }).toBe('equal');
    const report = (await page.locator('#report-slot').textContent()) ?? '';
    expect(report).toContain('Performance of this GPU');
    expect(pageErrors(page)).toEqual([]);
  });
});
