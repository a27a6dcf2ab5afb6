/**
 * The whole flow on the real engine in Chromium (WebGPU on SwiftShader): load the fixture folders, run the
 * probe with `exact` (equal) and `ring-chronological` (diverges, localized), export PNG and JSON, open
 * the share link in a fresh page, and run `mlx-m3plus` (MLX's kernel pair named under the divergence).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { readFileSync } from 'node:fs';
import { newPage, pageErrors, screenshot, useServerAndBrowser } from './harness.ts';
import { ASSISTANT_DIR, dropFolder, runPhaseTimes, TARGET_DIR } from './flows.ts';
import { validateReport, type ProbeReport } from '../../src/parity/report.ts';

/**
 * A probe of the tiny model takes ~15 s on SwiftShader on an idle 2-core machine, and several times that
 * when other GPU test suites share the CPU: generous limits, so a busy machine is not a failure.
 */
const PROBE_MS = 480_000;
const TEST_MS = 600_000;

/** Runs the probe with a policy and waits for the verdict of this run. */
async function runProbe(page: Page, policy: string): Promise<string> {
  await page.getByTestId('policy').selectOption(policy);
  const verdict = page.getByTestId('verdict');
  const run = page.getByTestId('run-probe');
  await run.click();
  await expect.poll(() => run.isDisabled()).toBe(true);
  await expect.poll(() => run.isEnabled(), { timeout: PROBE_MS }).toBe(true);
  expect(
    await page.getByTestId('probe-error').count(),
    (await page.getByTestId('probe-error').allTextContents()).join(),
  ).toBe(0);
  expect(await page.getByTestId('provenance').textContent()).toContain(`Policy${policy}`);
  return (await verdict.getAttribute('data-verdict')) ?? '';
}

function pngSize(buf: Buffer): { width: number; height: number } {
  expect([...buf.subarray(0, 8)]).toEqual([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  expect(buf.subarray(12, 16).toString('latin1')).toBe('IHDR');
  return { width: buf.readUInt32BE(16), height: buf.readUInt32BE(20) };
}

describe('probe in the page on the fixture model', () => {
  const env = useServerAndBrowser();
  let page: Page;
  beforeAll(async () => {
    page = await newPage(env.browser, env.url);
    expect(await dropFolder(page, 'target', TARGET_DIR)).toBe('loaded');
    expect(await dropFolder(page, 'assistant', ASSISTANT_DIR)).toBe('loaded');
  });

  it(
    'exact: every draw equal, MTP would be enabled',
    async () => {
      expect(await runProbe(page, 'exact')).toBe('equal');
      expect(await page.getByTestId('summary').textContent()).toMatch(/^block-versus-chain probe passed: 4 draws/);
      expect(await page.getByTestId('consequence').textContent()).toBe('MTP would be enabled');
      expect(await page.getByTestId('first-divergence').count()).toBe(0);
      expect(await page.getByTestId('draws').locator('li.equal').count()).toBe(4);
      // The finished progress list reads the report's timings, its draws numbered as the report numbers them: each
      // draw's prefill, chain and block as the Timings table says, and "Done in" as its Total.
      const rows = await page
        .getByTestId('timings')
        .locator('tbody tr')
        .evaluateAll((tr) => tr.map((r) => [...r.querySelectorAll('td')].map((c) => c.textContent ?? '')));
      const lengths = [8, 8, 8, 48];
      expect(await runPhaseTimes(page, 'probe')).toEqual(
        rows.flatMap(([draw, prefill, chain, block], i) => {
          expect(draw).toBe(`${i} (${lengths[i]})`);
          const name = (phase: string) => `draw ${i} of draws 0–3 (prompt ${lengths[i]} tokens): ${phase}`;
          return [
            [name('prefill'), prefill],
            [name('chain'), chain],
            [name('block'), block],
          ];
        }),
      );
      const total = (await page.getByTestId('probe-view').locator('[data-testid="timings"] + p').textContent()) ?? '';
      expect(await page.getByTestId('probe-elapsed').textContent()).toBe(
        `Done in ${total.replace(/^Total /, '').replace(/ · load .*$/, '')}`,
      );
      // The long draw (48 tokens > W = 16) records the ring.
      expect(await page.getByTestId('ring-caption').textContent()).toMatch(/prompt 48 tokens.*Window 16 slots/);
      await screenshot(page, '05-probe-exact-equal');
      expect(pageErrors(page)).toEqual([]);
    },
    TEST_MS,
  );

  let shareLink = '';
  let firstDivergence = '';

  it(
    "ring-chronological: the long draw diverges, localized at a sliding layer's attention, heatmap shown",
    async () => {
      expect(await runProbe(page, 'ring-chronological')).toBe('diverges');
      firstDivergence = (await page.getByTestId('first-divergence').textContent()) ?? '';
      expect(firstDivergence).toMatch(/^first divergence: layer \d+ \(sliding\) .*at position \d+$/);
      expect(await page.getByTestId('summary').textContent()).toMatch(
        /^block-versus-chain probe failed: 1 of 4 draws differ/,
      );
      expect(await page.getByTestId('consequence').textContent()).toMatch(/^MTP would be declined/);
      expect(await page.getByTestId('draws').locator('li.diverges').textContent()).toMatch(
        /prompt 48 tokens.*verify block position \d+ differs from the single-token chain in [\d,]+ of 4,096 logit bytes/,
      );
      expect(await page.getByTestId('detail-draw').inputValue()).toBe('3');
      const heat = page.getByTestId('heatmap');
      expect(await heat.isVisible()).toBe(true);
      const box = await heat.boundingBox();
      expect(box!.width).toBeGreaterThan(400);
      expect(box!.height).toBeGreaterThan(150);
      expect(await page.getByTestId('heatmap-readout').textContent()).toMatch(/first divergence$/);
      expect(await page.getByTestId('lens-chart').isVisible()).toBe(true);
      expect(await page.getByTestId('rows-table').locator('tbody tr.ne').count()).toBeGreaterThan(0);
      await screenshot(page, '06-probe-ring-chronological');
      await page.getByTestId('heatmap').screenshot({ path: 'test-results/screenshots/07-heatmap.png' });
      expect(pageErrors(page)).toEqual([]);
    },
    TEST_MS,
  );

  it('exports a 2x PNG and a JSON report that validates', async () => {
    const [png] = await Promise.all([page.waitForEvent('download'), page.getByTestId('download-png').click()]);
    expect(png.suggestedFilename()).toMatch(/^ringside-diverges-ring-chronological-f32-K4-[0-9a-f]{12}\.png$/);
    const pngBuf = readFileSync((await png.path())!);
    const { width, height } = pngSize(pngBuf);
    expect(width).toBe(2400); // 1200 CSS px at 2 device pixels each
    expect(height).toBeGreaterThan(2 * 400);
    expect(height % 2).toBe(0);
    await png.saveAs('test-results/screenshots/08-export.png');

    const [json] = await Promise.all([page.waitForEvent('download'), page.getByTestId('download-json').click()]);
    expect(json.suggestedFilename()).toMatch(/\.json$/);
    const report = JSON.parse(readFileSync((await json.path())!, 'utf8')) as ProbeReport;
    expect(validateReport(report)).toEqual([]);
    expect(report.verdict).toBe('diverges');
    expect(report.provenance.policy).toBe('ring-chronological');
    // the compiler it ran under: Chromium on Linux compiles through Dawn to Vulkan (SwiftShader here)
    expect(report.provenance.compiler).toMatchObject({
      engine: 'Dawn',
      os: 'Linux',
      backend: 'Vulkan',
      mathMode: 'vulkan-default',
    });
    expect(report.provenance.compiler?.browser).toMatch(/^Chrome \d+/);
    expect(await page.getByTestId('provenance').textContent()).toMatch(
      /CompilerChrome [\d.]+ on Linux · Dawn → Vulkan/,
    );
    expect(report.draws[3].firstDivergence?.text).toBe(firstDivergence);
    expect(report.draws[3].stages?.length).toBeGreaterThan(12 * 6);
    expect(pageErrors(page)).toEqual([]);
  });

  it('the share link renders the same verdict and first divergence in a fresh page, without a model', async () => {
    await page.getByTestId('copy-link').click();
    const field = page.getByTestId('share-link');
    await expect.poll(() => field.inputValue()).toMatch(/#report=[A-Za-z0-9_-]+$/);
    shareLink = await field.inputValue();
    expect(shareLink.startsWith(env.url)).toBe(true);

    const fresh = await newPage(env.browser, shareLink);
    const verdict = fresh.getByTestId('verdict');
    await expect.poll(() => verdict.getAttribute('data-verdict'), { timeout: 30_000 }).toBe('diverges');
    expect(await fresh.getByTestId('first-divergence').textContent()).toBe(firstDivergence);
    expect(await fresh.getByTestId('summary').textContent()).toBe(await page.getByTestId('summary').textContent());
    expect(await fresh.getByTestId('report-source').textContent()).toBe('shared link');
    expect(await fresh.getByTestId('heatmap').isVisible()).toBe(true);
    // No checkpoint was loaded in the fresh page.
    expect(await fresh.getByTestId('target-zone').getAttribute('data-state')).toBe('empty');
    await screenshot(fresh, '09-share-link-fresh-page');
    expect(pageErrors(fresh)).toEqual([]);
    await fresh.close();
  });

  it(
    'Cancel stops a running probe and the page can run again',
    async () => {
      await page.getByTestId('lengths').fill('48, 48, 48, 48, 48, 48, 48, 48');
      await page.getByTestId('policy').selectOption('exact');
      await page.getByTestId('run-probe').click();
      const cancel = page.getByTestId('probe-cancel');
      await expect.poll(() => cancel.isVisible()).toBe(true);
      await expect
        .poll(() => page.getByTestId('probe-progress').locator('li').count(), { timeout: PROBE_MS })
        .toBeGreaterThan(0);
      // The page stays responsive while the Worker computes.
      const t0 = Date.now();
      expect(await page.evaluate(() => new Promise<number>((r) => requestAnimationFrame(() => r(1))))).toBe(1);
      expect(Date.now() - t0).toBeLessThan(2000);
      await cancel.click();
      await expect
        .poll(() => page.getByTestId('probe-elapsed').textContent(), { timeout: PROBE_MS })
        .toMatch(/^Cancelled after /);
      expect(await page.getByTestId('probe-error').count()).toBe(0);
      expect(await page.getByTestId('run-probe').isEnabled()).toBe(true);
      // The previous report is still shown.
      expect(await page.getByTestId('verdict').getAttribute('data-verdict')).toBe('diverges');
      expect(pageErrors(page)).toEqual([]);
      // The last run settings come back after a reload (IndexedDB), and the recent checkpoints are listed.
      await page.reload();
      await expect.poll(() => page.getByTestId('lengths').inputValue()).toBe('48, 48, 48, 48, 48, 48, 48, 48');
      await expect.poll(() => page.getByTestId('policy').inputValue()).toBe('exact');
      const recent = await page.getByTestId('recent').textContent();
      expect(recent).toMatch(/target · gemma4 · target · 6\.67 MB · [0-9a-f]{12}/);
      expect(recent).toMatch(/assistant · gemma4_assistant · assistant · 549 kB · [0-9a-f]{12}/);
    },
    TEST_MS,
  );

  it(
    "mlx-m3plus: the page offers MLX's policies with a description each; the probe names MLX's kernel pair",
    async () => {
      // A page of its own: the test before reloads `page`, which drops the loaded checkpoints.
      const mlx = await newPage(env.browser, env.url);
      expect(await dropFolder(mlx, 'target', TARGET_DIR)).toBe('loaded');
      const policy = mlx.getByTestId('policy');
      await expect
        .poll(() => policy.locator('option').allTextContents())
        .toEqual(
          expect.arrayContaining([
            'mlx-m1',
            'mlx-m1-ultra',
            'mlx-m3plus',
            'mlx-m3plus-ultra',
            'mlx-m5',
            'mlx-m5+fma',
            'mlx-m3plus-narrow',
          ]),
        );
      // which policy is which Mac: the chip table under the menu, and why mlx-metal differs
      const chips = mlx.getByTestId('policy-chips');
      await chips.locator('summary').click();
      expect(await mlx.getByTestId('policy-chips-table').locator('tbody tr').allInnerTexts()).toEqual([
        'M1, M2 (base, Pro, Max)\tapplegpu_g13?, applegpu_g14? (? not d)\tmlx-m1',
        'M1 Ultra, M2 Ultra\tapplegpu_g13d, applegpu_g14d\tmlx-m1-ultra',
        'M3, M4 (base, Pro, Max)\tapplegpu_g15?, applegpu_g16? (? not d)\tmlx-m3plus',
        'M3 Ultra\tapplegpu_g15d\tmlx-m3plus-ultra',
        'M5 (base, Pro, Max)\tapplegpu_g17? (? not d)\tmlx-m5',
      ]);
      expect(await mlx.getByTestId('policy-chips-metal').textContent()).toMatch(/^mlx-metal stacks generic mechanisms/);
      await policy.selectOption('mlx-m5');
      expect(await mlx.getByTestId('policy-help').textContent()).toMatch(/^MLX on M5: .*33\/25\/13/);
      await screenshot(mlx, '27-policy-chip-table');
      await chips.locator('summary').click();
      await policy.selectOption('mlx-m1');
      expect(await mlx.getByTestId('policy-help').textContent()).toMatch(/^MLX on M1\/M2: /);
      await policy.selectOption('mlx-m3plus-narrow');
      expect(await mlx.getByTestId('policy-help').textContent()).toMatch(/MLXCEL_QMV_WIDE=0/);
      expect(await runProbe(mlx, 'mlx-m3plus')).toBe('diverges');
      expect(await mlx.getByTestId('policy-help').textContent()).toMatch(/qmv_wide for 2 <= M/);
      // MLX routes every quantized linear of 2 <= M < its batch limit to qmv_wide on M3 and newer
      // (mlx/backend/metal/quantized.cpp): q_proj, the forward's first, differs first.
      expect(await mlx.getByTestId('first-divergence').textContent()).toMatch(
        /^first divergence: layer 0 \(sliding\) q /,
      );
      expect(await mlx.getByTestId('divergence-cause').textContent()).toMatch(
        /q_proj: qmv \(M = 1\) vs qmv_wide \(M = 4\)/,
      );
      await screenshot(mlx, '28-probe-mlx-m3plus');
      expect(pageErrors(mlx)).toEqual([]);
      await mlx.close();
    },
    TEST_MS,
  );
});
