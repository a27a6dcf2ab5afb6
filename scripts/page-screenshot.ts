/**
 * Takes the README's screenshot of the page: the demo model loaded, one probe run, the whole page saved as a PNG.
 * Uses the browser tests' harness (Vite on 127.0.0.1, Debian's Chromium with WebGPU on SwiftShader).
 *
 *   node --import tsx scripts/page-screenshot.ts [--policy ring-chronological] [--out docs/img/page-probe.png]
 */
import { parseArgs } from 'node:util';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { launchBrowser, newPage, startServer } from '../test/e2e/harness.ts';

const { values } = parseArgs({
  options: {
    policy: { type: 'string', default: 'ring-chronological' },
    out: { type: 'string', default: 'docs/img/page-probe.png' },
    width: { type: 'string', default: '1280' },
  },
});
const PROBE_MS = 600_000;

const { server, url } = await startServer();
const browser = await launchBrowser();
try {
  const page = await newPage(browser, url);
  await page.setViewportSize({ width: Number(values.width), height: 900 });
  await page.getByTestId('demo').click();
  await page.waitForFunction(
    () => /Demo model loaded/.test(document.querySelector('[data-testid="demo-status"]')?.textContent ?? ''),
    undefined,
    { timeout: 120_000 },
  );
  await page.getByTestId('tab-probe').click();
  await page.getByTestId('policy').selectOption(String(values.policy));
  const run = page.getByTestId('run-probe');
  const elapsed = page.getByTestId('probe-elapsed');
  await run.click();
  await page.waitForFunction(
    () => /^(Done in|Failed after|Cancelled after) /.test(document.querySelector('[data-testid="probe-elapsed"]')?.textContent ?? ''),
    undefined,
    { timeout: PROBE_MS },
  );
  const errors = await page.getByTestId('probe-error').allTextContents();
  if (errors.length) throw new Error(`the probe failed: ${errors.join(' ')}`);
  console.log(`probe: ${await elapsed.textContent()}; ${await page.getByTestId('summary').textContent()}`);
  const out = path.resolve(String(values.out));
  mkdirSync(path.dirname(out), { recursive: true });
  await page.screenshot({ path: out, fullPage: true });
  console.log(`screenshot written to ${out}`);
} finally {
  await browser.close();
  await server.close();
}
