/**
 * Rendering reports without any model: from a share link and from an opened JSON file, in fresh pages;
 * refusal of invalid reports and damaged links; and crafted reports whose strings carry markup.
 */
import { describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { newPage, pageErrors, screenshot, useServerAndBrowser } from './harness.ts';
import { craftedReport, divergingReport, equalReport, XSS, XSS2 } from './sample-report.ts';
import { encodeShareFragment } from '../../src/ui/share/share-codec.ts';
import type { ProbeReport } from '../../src/parity/report.ts';

const linkFor = (url: string, r: unknown) => `${url}#${encodeShareFragment(r as ProbeReport)}`;

async function openJson(page: Page, name: string, data: unknown): Promise<void> {
  await page
    .getByTestId('open-report')
    .setInputFiles({ name, mimeType: 'application/json', buffer: Buffer.from(JSON.stringify(data)) });
}

describe('report view without a model', () => {
  const env = useServerAndBrowser();

  it('renders a diverging report from a share link: verdict, first divergence, heatmap, lens, ring, rows, provenance', async () => {
    const page = await newPage(env.browser, linkFor(env.url, divergingReport()));
    const verdict = page.getByTestId('verdict');
    await expect.poll(() => verdict.getAttribute('data-verdict'), { timeout: 30_000 }).toBe('diverges');
    expect(await page.getByTestId('first-divergence').textContent()).toBe(
      'first divergence: layer 0 (sliding) attention output at position 0',
    );
    expect(await page.getByTestId('summary').textContent()).toContain('1 of 4 draws differ');
    expect(await page.getByTestId('report-source').textContent()).toBe('shared link');
    // The details start on the diverging draw at the first divergence's position.
    expect(await page.getByTestId('detail-draw').inputValue()).toBe('3');
    expect(await page.getByTestId('position').inputValue()).toBe('0');
    expect(await page.getByTestId('heatmap').isVisible()).toBe(true);
    const box = await page.getByTestId('heatmap').boundingBox();
    expect(box!.width).toBeGreaterThan(600);
    expect(await page.getByTestId('heatmap-readout').textContent()).toMatch(
      /layer 0 \(sliding\) · attention output at position 0: .* first divergence/,
    );
    expect(await page.getByTestId('rows-table').locator('tbody tr').count()).toBe(4);
    expect(await page.getByTestId('ring-caption').textContent()).toMatch(/Window 1,024 slots.*slot 0.*wraps at slot/);
    const prov = await page.getByTestId('provenance').textContent();
    expect(prov).toContain('mlx-metal');
    // the compiler the report was made under: Chrome on a Mac compiles through Dawn to Metal, relaxed math
    expect(prov).toContain('Chrome 140 on macOS · Dawn → Metal');
    expect(prov).toContain('Math modeMetal relaxed math (#pragma METAL fp math_mode(relaxed)) on macOS 15 and later');
    expect(await page.getByTestId('lens-chart').isVisible()).toBe(true);
    await screenshot(page, '10-shared-report');
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.screenshot({ path: 'test-results/screenshots/10-shared-report-viewport-1280x800.png' });

    // Keyboard: the heatmap is focusable and arrow keys walk the cells.
    await page.getByTestId('heatmap').focus();
    await page.keyboard.press('ArrowRight');
    expect(await page.getByTestId('heatmap-readout').textContent()).toMatch(/^layer 1 \(sliding\) · attention output/);
    // Switching metric and position re-renders without errors.
    await page.getByTestId('metric-ulp').check();
    await page.getByTestId('position').selectOption('all');
    expect(await page.getByTestId('heatmap-note').textContent()).toContain('log10 ULP');
    await screenshot(page, '11-shared-report-ulp-all');
    expect(pageErrors(page)).toEqual([]);
    await page.close();
  });

  it('renders an equal report from an opened JSON file at 1440x900', async () => {
    const page = await newPage(env.browser, env.url);
    await page.setViewportSize({ width: 1440, height: 900 });
    await openJson(page, 'equal.json', equalReport());
    const verdict = page.getByTestId('verdict');
    await expect.poll(() => verdict.getAttribute('data-verdict'), { timeout: 30_000 }).toBe('equal');
    expect(await page.getByTestId('first-divergence').count()).toBe(0);
    expect(await page.getByTestId('report-source').textContent()).toBe('file equal.json');
    expect(await page.getByTestId('heatmap-note').textContent()).toMatch(
      /is equal in every logit byte: nothing to localize/,
    );
    expect(await page.getByTestId('draws').locator('li').count()).toBe(4);
    await page.screenshot({ path: 'test-results/screenshots/12-file-equal-report-viewport.png' });
    expect(pageErrors(page)).toEqual([]);
    await page.close();
  });

  it("refuses an invalid report with the validator's problems, and a damaged link with what is wrong", async () => {
    const page = await newPage(env.browser, env.url);
    const bad = { ...equalReport(), schema: 'ringside-report/0', verdict: 'maybe' };
    await openJson(page, 'bad.json', bad);
    const err = page.getByTestId('report-error');
    await expect.poll(() => err.textContent(), { timeout: 30_000 }).toContain('schema must be "ringside-report/1"');
    expect(await err.textContent()).toContain('verdict must be "equal" or "diverges"');
    expect(await err.getAttribute('role')).toBe('alert');
    expect(await page.locator('#report-card').isHidden()).toBe(true);

    await openJson(page, 'notjson.json', 'x');
    await page
      .getByTestId('open-report')
      .setInputFiles({ name: 'broken.json', mimeType: 'application/json', buffer: Buffer.from('{"schema": ') });
    await expect.poll(() => err.textContent()).toMatch(/broken\.json.*not JSON/);

    const damaged = await newPage(env.browser, `${env.url}#report=AAAA!!`);
    await expect
      .poll(() => damaged.getByTestId('report-error').textContent(), { timeout: 30_000 })
      .toMatch(/shared link.*damaged/);
    const garbage = await newPage(env.browser, `${env.url}#report=${Buffer.from('hello world').toString('base64url')}`);
    await expect
      .poll(() => garbage.getByTestId('report-error').textContent(), { timeout: 30_000 })
      .toMatch(/shared link.*damaged/);
    for (const p of [page, damaged, garbage]) {
      expect(pageErrors(p)).toEqual([]);
      await p.close();
    }
  });

  it('renders a crafted report as literal text: no markup, no script runs, through a link and a file', async () => {
    const crafted = craftedReport();
    for (const via of ['link', 'file'] as const) {
      const page = await newPage(env.browser, via === 'link' ? linkFor(env.url, crafted) : env.url);
      if (via === 'file') await openJson(page, `${XSS}.json`, crafted);
      const verdict = page.getByTestId('verdict');
      await expect.poll(() => verdict.getAttribute('data-verdict'), { timeout: 30_000 }).toBe('diverges');
      // Text shows literally.
      expect(await page.getByTestId('summary').textContent()).toBe(`summary ${XSS}`);
      expect(await page.getByTestId('consequence').textContent()).toBe(`consequence ${XSS2}`);
      expect(await page.getByTestId('first-divergence').textContent()).toBe(`first ${XSS}`);
      expect(await page.getByTestId('draws').textContent()).toContain(`draw text ${XSS}`);
      const prov = await page.getByTestId('provenance').textContent();
      expect(prov).toContain(`policy ${XSS}`);
      expect(prov).toContain(`label ${XSS}`);
      expect(prov).toContain('— layers'); // a string where a number belongs prints as a dash
      // Nothing was parsed as markup and nothing ran.
      const report = page.locator('#report-card');
      expect(await report.locator('img, script, b, i').count()).toBe(0);
      expect(await page.locator('img').count()).toBe(0);
      expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
      // The share bar still works on it (its Markdown escapes the markup).
      await page.getByTestId('copy-markdown').click();
      const md = page.getByTestId('share-link');
      await expect.poll(() => md.inputValue()).toContain('Ringside block-versus-chain probe');
      expect(await md.inputValue()).toContain('\\<img'); // escaped for Markdown renderers
      expect(await md.inputValue()).not.toMatch(/(?<!\\)<img/);
      await screenshot(page, `13-crafted-report-${via}`);
      // The <img src=x onerror=...> payload, had it been parsed anywhere (even into a detached element), runs
      // once the fetch of "x" fails: fail that same fetch here and wait for it, instead of a fixed delay.
      // (The <script> payload would have run when inserted, before the check above.)
      await page.evaluate(
        () =>
          new Promise<void>((done) => {
            const img = new Image();
            img.onerror = img.onload = () => done();
            img.src = 'x';
          }),
      );
      expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
      expect(pageErrors(page)).toEqual([]);
      await page.close();
    }
  });
});
