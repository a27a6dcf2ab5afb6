/**
 * The run list, the Compare view and the Markdown export's link notice without any model (hand-made reports, TSVs
 * written by the trace-file code from a hand-made trace): documents opened from files join the list and reopen from
 * it; two TSVs dropped in the Compare card are judged as compare-traces judges them, the comparison exports and its
 * JSON and link open it again; two probe reports side by side; a Markdown summary whose link is too long says so and
 * offers the JSON. Screenshots: 30-runs-from-files, 31-compare-tsv, 32-compare-probe, 33-markdown-notice.
 */
import { describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { readFileSync } from 'node:fs';
import { newPage, pageErrors, screenshot, useServerAndBrowser } from './harness.ts';
import { divergingReport, equalReport } from './sample-report.ts';
import { sampleTrace } from './sample-trace.ts';
import { sampleGeneration } from './sample-generation.ts';
import { generationJson } from '../../src/ui/generation/generation-model.ts';
import { reportArmTsv } from '../../src/parity/trace-files.ts';
import { judgeTraces } from '../../src/parity/trace-judgement.ts';
import { parseLogitTraceTsv } from '../../src/format/logit-trace-tsv.ts';
import { compare } from '../../src/ui/compare/compare-model.ts';
import { judgementLine } from '../../src/ui/compare/compare-share.ts';
import { MARKDOWN_LINK_CHARS } from '../../src/ui/share/share.ts';
import { buildShareLink } from '../../src/ui/share/share-link.ts';

async function openJson(page: Page, name: string, data: unknown): Promise<void> {
  await page
    .getByTestId('open-report')
    .setInputFiles({ name, mimeType: 'application/json', buffer: Buffer.from(JSON.stringify(data)) });
}

const file = (name: string, text: string, mimeType = 'text/tab-separated-values') => ({
  name,
  mimeType,
  buffer: Buffer.from(text),
});

/** A trace of 96 positions with near-tie and decided disagreements, and its two arms as mlxcel TSVs. */
const TRACE = sampleTrace({ prefix: 80, traced: 96, disagreeAt: [4, 9, 30, 31, 60, 77] });
const CHAIN_TSV = reportArmTsv(TRACE, 'chain');
const BLOCK_TSV = reportArmTsv(TRACE, 'block');

const runRows = (page: Page) =>
  page
    .getByTestId('runs-list')
    .locator('tbody tr')
    .evaluateAll((rows) =>
      rows.map((r) => [
        r.getAttribute('data-kind'),
        r.querySelectorAll('td')[2]?.textContent,
        r.querySelectorAll('td')[5]?.textContent,
      ]),
    );

describe('runs, comparisons and links without a model', () => {
  const env = useServerAndBrowser();

  it('documents opened from files join the list; each reopens from it, downloads, and two of a kind compare', async () => {
    const page = await newPage(env.browser, env.url);
    expect(await page.getByTestId('runs-card').isHidden()).toBe(true);
    await openJson(page, 'mac.json', equalReport());
    await expect.poll(() => page.getByTestId('verdict').getAttribute('data-verdict')).toBe('equal');
    await openJson(page, 'trace.json', TRACE);
    await expect.poll(() => page.getByTestId('trace-verdict').getAttribute('data-verdict')).toBe('diverges');
    await openJson(page, 'generation.json', generationJson(sampleGeneration({ differ: true, software: true })));
    // a generation opens from a file like a report: its card, its verdict, its exports
    await expect.poll(() => page.getByTestId('generation-verdict').getAttribute('data-verdict')).toBe('differs');
    expect(await page.getByTestId('generation-source').textContent()).toBe('file generation.json');
    expect(await page.locator('#report-card').isHidden()).toBe(true);
    expect(await page.getByTestId('generation-software-note').textContent()).toMatch(/^This adapter is a software one/);
    await openJson(page, 'h200.json', divergingReport());
    await expect.poll(() => page.getByTestId('verdict').getAttribute('data-verdict')).toBe('diverges');
    expect(await page.locator('#generation-card').isHidden()).toBe(true);

    // newest first: every run of the visit, none replaced
    expect(await runRows(page)).toEqual([
      ['probe', 'diverges', 'file h200.json'],
      ['generation', 'differs', 'file generation.json'],
      ['trace', 'diverges', 'file trace.json'],
      ['probe', 'equal', 'file mac.json'],
    ]);
    expect(await page.getByTestId('runs-count').textContent()).toBe('4 runs');
    expect(await page.getByTestId('run-open-4').textContent()).toBe('Shown');
    await screenshot(page, '30-runs-from-files');

    // reopen the first probe, then the generation: one card at a time, the list marks which
    await page.getByTestId('run-open-1').click();
    await expect.poll(() => page.getByTestId('verdict').getAttribute('data-verdict')).toBe('equal');
    expect(await page.getByTestId('report-source').textContent()).toBe('file mac.json');
    await page.getByTestId('run-open-3').click();
    await expect.poll(() => page.locator('#generation-card').isVisible()).toBe(true);
    expect(await page.locator('#report-card').isHidden()).toBe(true);
    expect(await page.locator('tr.open').getAttribute('data-run-id')).toBe('3');

    // the generation card's exports: PNG, Markdown, link (which opens the same run in a fresh page)
    const [png] = await Promise.all([
      page.waitForEvent('download'),
      page.getByTestId('generation-download-png').click(),
    ]);
    expect(png.suggestedFilename()).toMatch(/^ringside-generation-differs-exact-f32-K4-hf-[0-9a-f]{12}\.png$/);
    expect(
      readFileSync((await png.path())!)
        .subarray(1, 4)
        .toString('latin1'),
    ).toBe('PNG');
    await page.getByTestId('generation-copy-markdown').click();
    await expect
      .poll(() => page.getByTestId('generation-share-link').inputValue())
      .toMatch(/^### Ringside classic versus MTP generation: \*\*DIFFERS\*\*/);
    expect(await page.getByTestId('generation-share-link').inputValue()).toContain('[Open the full run](');
    await page.getByTestId('generation-copy-link').click();
    await expect.poll(() => page.getByTestId('generation-share-link').inputValue()).toMatch(/#report=[A-Za-z0-9_-]+$/);
    const fresh = await newPage(env.browser, await page.getByTestId('generation-share-link').inputValue());
    await expect.poll(() => fresh.getByTestId('generation-verdict').getAttribute('data-verdict')).toBe('differs');
    expect(await fresh.getByTestId('generation-summary').textContent()).toBe(
      'first difference at token 8: classic has token id 91, MTP has token id 92',
    );
    expect(await fresh.getByTestId('generation-source').textContent()).toBe('shared link');
    expect(pageErrors(fresh)).toEqual([]);
    await fresh.close();

    // a run's JSON from the list is the document as it came
    const [json] = await Promise.all([page.waitForEvent('download'), page.getByTestId('run-json-2').click()]);
    expect(json.suggestedFilename()).toMatch(/^ringside-trace-diverges-mlx-metal-/);
    expect(JSON.parse(readFileSync((await json.path())!, 'utf8'))).toEqual(JSON.parse(JSON.stringify(TRACE)));

    // ticking: a probe and a trace cannot be compared; two probes can
    const compareButton = page.getByTestId('runs-compare');
    expect(await page.getByTestId('run-pick-3').isDisabled()).toBe(true);
    await page.getByTestId('run-pick-1').check();
    await page.getByTestId('run-pick-2').check();
    expect(await compareButton.isDisabled()).toBe(true);
    expect(await page.getByTestId('runs-compare-why').textContent()).toBe(
      'A probe report and a trace cannot be compared: tick two of one kind.',
    );
    await page.getByTestId('run-pick-2').uncheck();
    await page.getByTestId('run-pick-4').check();
    await compareButton.click();
    await expect.poll(() => page.getByTestId('compare-verdict').getAttribute('data-verdict')).toBe('part');
    expect(await page.locator('#report-card').isHidden()).toBe(true);
    expect(await page.getByTestId('compare-summary').textContent()).toBe(
      'A EQUAL, B DIVERGES: 1 of 4 draws part (draw 3)',
    );
    expect(
      await page
        .getByTestId('compare-draws')
        .locator('tbody tr')
        .evaluateAll((r) => r.map((x) => x.getAttribute('data-differs'))),
    ).toEqual(['no', 'no', 'no', 'yes']);
    expect(await page.getByTestId('compare-facts').locator('tr[data-fact="policy"]').getAttribute('data-differs')).toBe(
      'yes',
    );
    expect(
      await page.getByTestId('compare-facts').locator('tr[data-fact="adapter"]').getAttribute('data-differs'),
    ).toBe('no');
    expect(await page.getByTestId('compare-facts').locator('tr[data-fact="self-test"]').textContent()).toBe(
      'self-testnone ran before the reportnone ran before the report',
    );
    // B's heatmap (its long draw localized), A's none (every draw equal)
    await expect.poll(() => page.getByTestId('compare-heatmap-b').isVisible()).toBe(true);
    expect(await page.getByTestId('compare-heatmap-a').count()).toBe(0);
    await page.locator('#compare-card').screenshot({ path: 'test-results/screenshots/32-compare-probe.png' });
    expect(pageErrors(page)).toEqual([]);
    await page.close();
  });

  it('two TSVs dropped on the Compare card: the judgement on top, the strip, what differs; JSON and link reopen it', async () => {
    const page = await newPage(env.browser, env.url);
    await page.getByTestId('open-compare').click();
    expect(await page.locator('#compare-card').isVisible()).toBe(true);
    // both files dropped at once: the first is A, the second B
    await page.locator('#compare-card').evaluate(
      (node, files) => {
        const dt = new DataTransfer();
        for (const [name, text] of files) dt.items.add(new File([text], name, { type: 'text/tab-separated-values' }));
        node.dispatchEvent(new DragEvent('dragover', { dataTransfer: dt, bubbles: true, cancelable: true }));
        node.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
      },
      [
        ['mac-chain.tsv', CHAIN_TSV],
        ['mac-block.tsv', BLOCK_TSV],
      ],
    );
    await expect
      .poll(() => page.getByTestId('compare-b-what').textContent())
      .toBe('mac-block.tsv: a logit-trace TSV (one arm)');
    expect(await page.getByTestId('compare-a-what').textContent()).toBe('mac-chain.tsv: a logit-trace TSV (one arm)');
    // what the page says is what compare-traces computes from the same files
    const expected = judgeTraces(
      parseLogitTraceTsv(CHAIN_TSV, 'mac-chain.tsv').rows,
      parseLogitTraceTsv(BLOCK_TSV, 'mac-block.tsv').rows,
    );
    expect(expected.verdict).toBe('decided');
    await expect.poll(() => page.getByTestId('compare-verdict').getAttribute('data-verdict')).toBe('decided');
    const c = compare({ a: { name: 'mac-chain.tsv', tsv: CHAIN_TSV }, b: { name: 'mac-block.tsv', tsv: BLOCK_TSV } });
    if (c.kind !== 'traces') throw new Error(c.kind);
    expect(c.judgement).toEqual(expected);
    expect(await page.getByTestId('compare-summary').textContent()).toBe(judgementLine(c));
    expect(await page.getByTestId('compare-strip').isVisible()).toBe(true);
    expect(
      await page
        .getByTestId('compare-buckets')
        .locator('tbody tr')
        .evaluateAll((r) => r.map((x) => [...x.querySelectorAll('td')].slice(1, 3).map((d) => d.textContent))),
    ).toEqual(expected.buckets.map((b) => [String(b.positions), String(b.disagreed)]));
    expect(await page.getByTestId('compare-facts').locator('tr[data-fact="arm"]').getAttribute('data-differs')).toBe(
      'yes',
    );
    expect(await page.getByTestId('compare-facts').locator('tr[data-fact="policy"]').getAttribute('data-differs')).toBe(
      'no',
    );
    // the strip reads out a position under the keyboard: Home goes to the first disagreement
    await page.getByTestId('compare-strip').focus();
    await page.keyboard.press('Home');
    expect(await page.getByTestId('compare-strip-readout').textContent()).toMatch(/^position 4 · .* · TOP-1 DIFFERS$/);
    await page.locator('#compare-card').screenshot({ path: 'test-results/screenshots/31-compare-tsv.png' });

    // the decided gap is the reader's: 10 leaves only the widest gaps decided
    await page.getByTestId('compare-gap').fill('10');
    await page.getByTestId('compare-gap').dispatchEvent('change');
    await expect
      .poll(() => page.getByTestId('compare-summary').textContent())
      .toMatch(/on decided positions \(gap ≥ 10\): 0 of /);

    // JSON: the comparison document; opened as a file it compares again, to the same
    await page.getByTestId('compare-gap').fill('2');
    await page.getByTestId('compare-gap').dispatchEvent('change');
    const [json] = await Promise.all([
      page.waitForEvent('download'),
      page.getByTestId('compare-download-json').click(),
    ]);
    expect(json.suggestedFilename()).toBe('ringside-compare-traces-decided.json');
    const doc = JSON.parse(readFileSync((await json.path())!, 'utf8'));
    expect(doc.schema).toBe('ringside-comparison/1');
    expect(doc.judgement).toEqual(expected);
    expect(doc.a).toEqual({ name: 'mac-chain.tsv', tsv: CHAIN_TSV });
    const [png] = await Promise.all([page.waitForEvent('download'), page.getByTestId('compare-download-png').click()]);
    expect(png.suggestedFilename()).toBe('ringside-compare-traces-decided.png');
    await page.getByTestId('compare-copy-markdown').click();
    await expect
      .poll(() => page.getByTestId('compare-share-link').inputValue())
      .toMatch(/^### Ringside comparison of two traces: \*\*differs on decided positions\*\*/);
    await page.getByTestId('compare-copy-link').click();
    await expect.poll(() => page.getByTestId('compare-share-link').inputValue()).toMatch(/#report=[A-Za-z0-9_-]+$/);
    const link = await page.getByTestId('compare-share-link').inputValue();

    const reopened = await newPage(env.browser, env.url);
    await openJson(reopened, 'comparison.json', doc);
    await expect.poll(() => reopened.getByTestId('compare-verdict').getAttribute('data-verdict')).toBe('decided');
    expect(await reopened.getByTestId('compare-source').textContent()).toBe('file comparison.json');
    expect(await reopened.getByTestId('compare-summary').textContent()).toBe(judgementLine(c));
    expect(pageErrors(reopened)).toEqual([]);
    await reopened.close();
    const linked = await newPage(env.browser, link);
    await expect.poll(() => linked.getByTestId('compare-verdict').getAttribute('data-verdict')).toBe('decided');
    expect(await linked.getByTestId('compare-source').textContent()).toBe('shared link');
    expect(pageErrors(linked)).toEqual([]);
    await linked.close();

    // two kinds, or traces of different streams: refused with the reason, nothing rendered
    await page
      .getByTestId('compare-b-file')
      .setInputFiles(file('probe.json', JSON.stringify(equalReport()), 'application/json'));
    await expect
      .poll(() => page.getByTestId('compare-error').textContent())
      .toBe(
        'A (mac-chain.tsv) is a logit-trace TSV and B (probe.json) a probe report: compare two probe reports, or two traces (logit-trace TSVs or trace reports)',
      );
    expect(await page.getByTestId('compare-body').textContent()).toBe('');
    const shorter = reportArmTsv(sampleTrace({ prefix: 80, traced: 64 }), 'block');
    await page.getByTestId('compare-b-file').setInputFiles(file('short.tsv', shorter));
    await expect
      .poll(() => page.getByTestId('compare-error').textContent())
      .toMatch(/^mac-chain\.tsv has 96 positions and short\.tsv 64: /);
    expect(pageErrors(page)).toEqual([]);
    await page.close();
  });

  it('a Markdown summary too long for its link says so, and offers the JSON file', async () => {
    const page = await newPage(env.browser, env.url);
    const r = divergingReport();
    // the premise: this report's link is past what a summary carries
    const full = buildShareLink(r, env.url, Number.MAX_SAFE_INTEGER);
    expect(full.ok && full.link.length).toBeGreaterThan(MARKDOWN_LINK_CHARS);
    await openJson(page, 'h200.json', r);
    await expect.poll(() => page.getByTestId('verdict').getAttribute('data-verdict')).toBe('diverges');
    await page.getByTestId('copy-markdown').click();
    const status = page.getByTestId('share-status');
    await expect
      .poll(() => status.textContent())
      .toMatch(
        /^Markdown summary (copied to the clipboard|is selected in the field below).* It has no link to the full report: the link would be [\d,]+ characters, and a summary carries links up to 8,000 \(chat tools and issue trackers cut longer ones\)\. Share the JSON file with it instead: Download the JSON$/,
      );
    // the summary itself says it too
    expect(await page.getByTestId('share-link').inputValue()).toMatch(
      /\n_The full report is too large for a link here \([\d,]+ characters\): ask for its JSON file, which opens in Ringside with "Open a report \(JSON\)"\._\n$/,
    );
    await page.locator('#report-card').screenshot({ path: 'test-results/screenshots/33-markdown-notice.png' });
    const [json] = await Promise.all([page.waitForEvent('download'), page.getByTestId('markdown-json-offer').click()]);
    expect(json.suggestedFilename()).toMatch(/^ringside-diverges-mlx-metal-bf16-K4-[0-9a-f]{12}\.json$/);
    expect(JSON.parse(readFileSync((await json.path())!, 'utf8'))).toEqual(JSON.parse(JSON.stringify(r)));
    expect(await status.textContent()).toBe('JSON downloaded.');

    // a report small enough keeps its link, with no notice
    await openJson(page, 'mac.json', equalReport());
    await expect.poll(() => page.getByTestId('verdict').getAttribute('data-verdict')).toBe('equal');
    await page.getByTestId('copy-markdown').click();
    await expect.poll(() => page.getByTestId('share-link').inputValue()).toContain('[Open the full report](');
    expect(await status.textContent()).not.toContain('no link');
    expect(pageErrors(page)).toEqual([]);
    await page.close();
  });
});
