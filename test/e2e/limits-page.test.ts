/**
 * The page under a browser limit profile (`?limits=`, src/gpu/limit-profiles.ts): the Worker creates its device
 * capped to that browser's limits and features, the adapter card says so, an `exact` probe of the fixture is equal
 * there, and the report names the profile; an unknown name is refused where the adapter shows.
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { newPage, pageErrors, screenshot, useServerAndBrowser } from './harness.ts';
import { ASSISTANT_DIR, dropFolder, runProbe, TARGET_DIR, TEST_MS } from './flows.ts';
import { validateReport, type ProbeReport } from '../../src/parity/report.ts';

describe('the page under ?limits=', () => {
  const env = useServerAndBrowser();

  it(
    'chrome-mac: the adapter card names the profile, the exact probe is equal, the report records it',
    async () => {
      const page = await newPage(env.browser, `${env.url}?limits=chrome-mac`);
      const adapter = page.getByTestId('adapter');
      await expect.poll(() => adapter.getAttribute('data-state'), { timeout: 60_000 }).toBe('ready');
      expect(await page.getByTestId('limit-profile').textContent()).toBe(
        "Chrome on a Mac's limits and features (?limits=chrome-mac)",
      );
      expect(await dropFolder(page, 'target', TARGET_DIR)).toBe('loaded');
      expect(await dropFolder(page, 'assistant', ASSISTANT_DIR)).toBe('loaded');
      expect(await runProbe(page, 'exact')).toBe('equal');
      expect(await page.getByTestId('provenance').textContent()).toContain(
        "capped to Chrome on a Mac's (profile chrome-mac)",
      );
      const [json] = await Promise.all([page.waitForEvent('download'), page.getByTestId('download-json').click()]);
      const report = JSON.parse(readFileSync((await json.path())!, 'utf8')) as ProbeReport;
      expect(validateReport(report)).toEqual([]);
      expect(report.provenance.adapter.limitProfile).toBe('chrome-mac');
      // Chrome's caps, never above the adapter's own (SwiftShader's here)
      expect(report.provenance.adapter.limits.maxStorageBuffersPerShaderStage).toBeLessThanOrEqual(10);
      expect(report.provenance.adapter.limits.maxBufferSize).toBeLessThanOrEqual(2 ** 32 - 4);
      await screenshot(page, 'limits-chrome-mac');
      expect(pageErrors(page)).toEqual([]);
      await page.close();
    },
    TEST_MS,
  );

  it('an unknown profile is refused in the adapter card, naming the parameter and the profiles', async () => {
    const page = await newPage(env.browser, `${env.url}?limits=firefox`);
    const adapter = page.getByTestId('adapter');
    await expect.poll(() => adapter.getAttribute('data-state'), { timeout: 60_000 }).toBe('unavailable');
    expect(await adapter.textContent()).toContain(
      `"firefox" (the page's ?limits= parameter) is not a browser limit profile; use one of safari, safari-subgroups, chrome-mac`,
    );
    expect(pageErrors(page)).toEqual([]);
    await page.close();
  });
});
