import { describe, expect, it } from 'vitest';
import { newPage, pageErrors, screenshot, useServerAndBrowser } from './harness.ts';

describe('the page in headless Chromium (WebGPU in a module Worker)', () => {
  const env = useServerAndBrowser();

  it('the empty page: nothing loaded, every run disabled with the reason, tabs by keyboard', async () => {
    const page = await newPage(env.browser, env.url);
    await expect
      .poll(() => page.getByTestId('adapter').getAttribute('data-state'), { timeout: 60_000 })
      .toMatch(/ready|unavailable|error/);
    await expect.poll(() => page.getByTestId('policy').locator('option').count()).toBeGreaterThan(1);
    expect(await page.locator('#report-card').isHidden()).toBe(true);
    expect(await page.locator('#generation-card').isHidden()).toBe(true);
    expect(await page.getByTestId('tab-probe').getAttribute('aria-selected')).toBe('true');
    expect(await page.getByTestId('run-probe').isDisabled()).toBe(true);
    expect(await page.getByTestId('run-why').textContent()).toBe('Load a target checkpoint first.');
    await screenshot(page, '00-empty');
    // Arrow keys move between the tabs (WAI-ARIA tabs pattern).
    await page.getByTestId('tab-probe').focus();
    await page.keyboard.press('ArrowRight');
    expect(await page.getByTestId('tab-trace').getAttribute('aria-selected')).toBe('true');
    expect(await page.getByTestId('panel-trace').isVisible()).toBe(true);
    expect(await page.getByTestId('panel-probe').isHidden()).toBe(true);
    expect(await page.getByTestId('run-trace').isDisabled()).toBe(true);
    expect(await page.getByTestId('trace-why').textContent()).toBe('Load a target checkpoint first.');
    await page.keyboard.press('ArrowRight');
    expect(await page.getByTestId('run-generate').isDisabled()).toBe(true);
    expect(await page.getByTestId('generate-why').textContent()).toBe('Load a target checkpoint first.');
    expect(pageErrors(page)).toEqual([]);
    await page.close();
  });

  it('shows the adapter and runs the WGSL self-test inside the Worker', async () => {
    const page = await newPage(env.browser, env.url);
    const adapter = page.getByTestId('adapter');
    await expect.poll(() => adapter.getAttribute('data-state'), { timeout: 60_000 }).toBe('ready');
    expect(await adapter.textContent()).toMatch(/SwiftShader|Google|Vulkan|Adapter/i);
    await page.getByTestId('run-selftest').click();
    const status = page.getByTestId('selftest-status');
    await expect.poll(() => status.getAttribute('data-state'), { timeout: 90_000 }).toMatch(/pass|fail/);
    const text = await page.locator('#selftest-checks').textContent();
    expect(await status.getAttribute('data-state'), text ?? '').toBe('pass');
    expect(text).toMatch(/f32 fma, 2-D dispatch: [\d,]+ elements/);
    expect(text).toMatch(/subgroups: subgroup size \d+/); // SwiftShader has subgroups (size 4)
    await screenshot(page, '01-selftest');
    expect(pageErrors(page)).toEqual([]);
  });

  it('says "WebGPU unavailable" with what to do when the browser has no WebGPU', async () => {
    const page = await env.browser.newPage();
    // Remove navigator.gpu in every realm (page and Worker) before any script runs.
    await page.addInitScript(() => {
      Object.defineProperty(Object.getPrototypeOf(navigator), 'gpu', { get: () => undefined, configurable: true });
    });
    await page.route('**/src/worker/engine-worker.ts*', async (route) => {
      const res = await route.fetch();
      const body = `Object.defineProperty(Object.getPrototypeOf(navigator), 'gpu', { get: () => undefined });\n${await res.text()}`;
      await route.fulfill({ response: res, body });
    });
    await page.goto(env.url);
    const adapter = page.getByTestId('adapter');
    await expect.poll(() => adapter.getAttribute('data-state'), { timeout: 30_000 }).toBe('unavailable');
    expect(await adapter.textContent()).toMatch(/WebGPU unavailable: WebGPU is not available.*Chrome/);
    await page.close();
  });
});
