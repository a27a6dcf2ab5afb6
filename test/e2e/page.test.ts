import { describe, expect, it } from 'vitest';
import { newPage, pageErrors, screenshot, useServerAndBrowser } from './harness.ts';

describe('the page in headless Chromium (WebGPU in a module Worker)', () => {
  const env = useServerAndBrowser();

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
    expect(text).toMatch(/f32 fma, 2-D dispatch: \d+ elements/);
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
      const body = "Object.defineProperty(Object.getPrototypeOf(navigator), 'gpu', { get: () => undefined });\n" + (await res.text());
      await route.fulfill({ response: res, body });
    });
    await page.goto(env.url);
    const adapter = page.getByTestId('adapter');
    await expect.poll(() => adapter.getAttribute('data-state'), { timeout: 30_000 }).toBe('unavailable');
    expect(await adapter.textContent()).toMatch(/WebGPU unavailable: WebGPU is not available.*Chrome/);
    await page.close();
  });
});
