/**
 * The exactness self-test in the page (Chromium, WebGPU on SwiftShader): the first probe of a visit runs it first
 * (a phase of its own) and its line stands in the verdict card; a reload reads its result from IndexedDB instead of
 * running it again; with a kernel fault forced (`?selftest-fault=matmul`) the page says, where the verdict is, that
 * this browser's shader compiler does not keep verify rows exact here, and the report carries the warning.
 */
import { describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { newPage, pageErrors, SCREENSHOTS, screenshot, useServerAndBrowser } from './harness.ts';
import { dropFolder, runJob, TARGET_DIR, TEST_MS } from './flows.ts';
import { validateReport, type ProbeReport } from '../../src/parity/report.ts';

const SELFTEST_PHASE = 'exactness self-test of this adapter';

/** Loads the fixture's target and runs the exact probe over one short draw; returns the run's phase names. */
async function probeOnce(page: Page): Promise<string[]> {
  expect(await dropFolder(page, 'target', TARGET_DIR)).toBe('loaded');
  await page.getByTestId('tab-probe').click();
  await page.getByTestId('lengths').fill('8');
  await page.getByTestId('policy').selectOption('exact');
  await runJob(page, 'probe');
  return page.getByTestId('probe-progress').locator('.phase-name').allTextContents();
}

/** The report of the probe on screen, as its JSON download holds it. */
async function downloadedReport(page: Page): Promise<ProbeReport> {
  const [json] = await Promise.all([page.waitForEvent('download'), page.getByTestId('download-json').click()]);
  return JSON.parse(readFileSync((await json.path())!, 'utf8')) as ProbeReport;
}

/**
 * The run panel (its phases: the self-test first) down to the end of the verdict card, as `name`.png: the picture
 * docs/img keeps of each case.
 */
async function runAndVerdictShot(page: Page, name: string): Promise<void> {
  const box = await page.evaluate(() => {
    const top = document.querySelector('#run-slot')!.getBoundingClientRect();
    const end = document.querySelector('[data-testid="verdict"]')!.getBoundingClientRect();
    return { y: top.top + window.scrollY, bottom: end.bottom + window.scrollY };
  });
  await page.screenshot({
    path: path.join(SCREENSHOTS, `${name}.png`),
    fullPage: true,
    clip: { x: 0, y: box.y - 8, width: 1280, height: box.bottom - box.y + 16 },
  });
}

describe('exactness self-test in the page', () => {
  const env = useServerAndBrowser();

  it(
    'runs before the first verdict, shows its line in the verdict card, and is read from IndexedDB after a reload',
    async () => {
      const page = await newPage(env.browser, env.url);
      const phases = await probeOnce(page);
      // the self-test is the run's first phase: it ran before the probe's draws
      expect(phases[0]).toBe(SELFTEST_PHASE);
      expect(phases.length).toBeGreaterThan(1);
      expect(await page.getByTestId('verdict').getAttribute('data-verdict')).toBe('equal');
      const line = page.getByTestId('exactness-selftest');
      expect(await line.getAttribute('data-ok')).toBe('true');
      expect(await line.textContent()).toMatch(
        /^Exactness self-test passed on this adapter: 6 verify blocks \(K = 8, 4, 2 across the ring's wrap, f32 and bf16, software kernels\) equal the single-token chain byte for byte; ran in /,
      );
      expect(await page.getByTestId('exactness-warning').count()).toBe(0);
      // in the verdict card, above the verdict itself
      expect(await page.getByTestId('verdict').locator('p').first().getAttribute('data-testid')).toBe(
        'exactness-selftest',
      );
      const report = await downloadedReport(page);
      expect(validateReport(report)).toEqual([]);
      expect(report.provenance.exactnessSelfTest).toMatchObject({ ok: true, checks: 6, failed: 0, cached: false });
      await screenshot(page, 'selftest-pass-page');
      await runAndVerdictShot(page, 'selftest-pass');

      // a new visit of the same browser profile: the result kept in IndexedDB, no self-test phase
      await page.reload();
      const again = await probeOnce(page);
      expect(again).not.toContain(SELFTEST_PHASE);
      expect(await page.getByTestId('exactness-selftest').textContent()).toMatch(
        /^Exactness self-test passed on this adapter: .*; result kept from an earlier run \(/,
      );
      expect(pageErrors(page)).toEqual([]);
      await page.close();
    },
    TEST_MS,
  );

  it(
    'with a kernel fault forced (?selftest-fault=matmul): the warning where the verdict is, and in the report',
    async () => {
      const page = await newPage(env.browser, `${env.url}?selftest-fault=matmul`);
      const phases = await probeOnce(page);
      expect(phases[0]).toBe(SELFTEST_PHASE);
      // the probe itself is still equal: its verdict is shown, under the warning that it is no reference here
      expect(await page.getByTestId('verdict').getAttribute('data-verdict')).toBe('equal');
      const warning = page.getByTestId('exactness-warning');
      expect(await warning.getAttribute('role')).toBe('alert');
      const text = (await warning.textContent()) ?? '';
      expect(text).toMatch(
        /^This browser's shader compiler does not keep verify rows exact on this machine, so "exact" verdicts here are not a reference \(the exactness self-test failed: matmul \(matmul_lanes_\*\.wgsl\): layer 0 \(sliding\) q projection, block row 1 /,
      );
      expect(await page.getByTestId('verdict').locator('p').first().getAttribute('data-testid')).toBe(
        'exactness-warning',
      );
      expect(await page.getByTestId('exactness-selftest').textContent()).toMatch(
        /^Exactness self-test FAILED on this adapter: \d of 6 verify blocks differ .* first in matmul; ran in .*; a fault was injected in matmul to test the test\.$/,
      );
      const report = await downloadedReport(page);
      expect(validateReport(report)).toEqual([]);
      expect(report.provenance.exactnessSelfTest).toMatchObject({ ok: false, kernel: 'matmul', fault: 'matmul' });
      expect(report.provenance.exactnessSelfTest?.warning).toBe(text);
      await screenshot(page, 'selftest-fail-page');
      await runAndVerdictShot(page, 'selftest-fail');
      expect(pageErrors(page)).toEqual([]);
      await page.close();
    },
    TEST_MS,
  );

  it('refuses a fault name it does not know, saying so on the page', async () => {
    const page = await newPage(env.browser, `${env.url}?selftest-fault=softmax`);
    await expect
      .poll(() => page.getByRole('alert').allTextContents(), { timeout: 60_000 })
      .toContain('Page address: selftest-fault: unknown kernel fault "softmax" (expected matmul or attention)');
    await page.close();
  });
});
