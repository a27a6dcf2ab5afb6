/**
 * Takes the README's screenshot of the page: the demo model loaded, one probe run, the whole page saved as a PNG.
 * Uses the browser tests' harness (Vite on 127.0.0.1, Debian's Chromium with WebGPU on SwiftShader). Where `pngquant`
 * is installed the PNG is reduced to a palette in place: a whole-page screenshot is about 570 KB as Chromium writes
 * it and under 200 KB after, with no visible change to the text.
 *
 *   node --import tsx scripts/page-screenshot.ts [--policy ring-chronological] [--out docs/img/page-probe.png]
 */
import { parseArgs } from 'node:util';
import { spawnSync } from 'node:child_process';
import { mkdirSync, statSync } from 'node:fs';
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
    () =>
      /^(Done in|Failed after|Cancelled after) /.test(
        document.querySelector('[data-testid="probe-elapsed"]')?.textContent ?? '',
      ),
    undefined,
    { timeout: PROBE_MS },
  );
  const errors = await page.getByTestId('probe-error').allTextContents();
  if (errors.length) throw new Error(`the probe failed: ${errors.join(' ')}`);
  console.log(`probe: ${await elapsed.textContent()}; ${await page.getByTestId('summary').textContent()}`);
  const out = path.resolve(String(values.out));
  mkdirSync(path.dirname(out), { recursive: true });
  await page.screenshot({ path: out, fullPage: true });
  const quant = spawnSync('pngquant', ['--force', '--skip-if-larger', '--speed', '1', '--output', out, out]);
  const how = quant.error
    ? 'as Chromium wrote it (no pngquant)'
    : quant.status === 0
      ? 'palette (pngquant)'
      : 'as Chromium wrote it';
  console.log(`screenshot written to ${out}: ${Math.round(statSync(out).size / 1024)} KB, ${how}`);
} finally {
  await browser.close();
  await server.close();
}
