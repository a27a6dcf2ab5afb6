/**
 * A trace report's judgement in the page (no model): the verdict chip and sentence, the table of where each
 * disagreement put the chain's top-1 in the block arm's list, the |Δ logit| percentiles; the same after a share
 * link; nothing of it for a report written before the judgement existed.
 */
import { describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { newPage, pageErrors, screenshot, useServerAndBrowser } from './harness.ts';
import { asJson, sampleTrace } from './sample-trace.ts';
import { validateReport } from '../../src/parity/report.ts';
import { traceMetrics, traceVerdict, type TraceReport } from '../../src/parity/trace.ts';
import { armRows } from '../../src/parity/trace-files.ts';
import { judgeTraces } from '../../src/parity/trace-judgement.ts';
import { buildShareLink } from '../../src/ui/share/share-link.ts';
import { fmtPercent, fmtSci } from '../../src/ui/common/format.ts';

/**
 * The sample trace made what an engine writes: each block list descending (where the sample swaps the chain's top
 * two, the ids swap and the logits stay), each gap the chain list's own, metrics from those rows, and the judgement.
 */
function judgedTrace(o: Parameters<typeof sampleTrace>[0]): TraceReport {
  const t = asJson(sampleTrace({ topK: 8, ...o }));
  for (const p of t.positions) {
    if (!p.agree) p.blockTop = p.blockTop.map((x, k) => ({ id: x.id, logit: p.chainTop[k].logit }));
    p.gap = p.chainTop[0].logit - p.chainTop[1].logit;
  }
  const metrics = traceMetrics(t.positions);
  const judgement = judgeTraces(armRows(t.positions, 'chain'), armRows(t.positions, 'block'));
  return asJson({ ...t, ...traceVerdict(metrics), metrics, judgement });
}

async function openJson(page: Page, name: string, data: unknown): Promise<void> {
  await page
    .getByTestId('open-report')
    .setInputFiles({ name, mimeType: 'application/json', buffer: Buffer.from(JSON.stringify(data)) });
}

/** The ranks table as shown: [rank, disagreements, share] per row. */
const shownRanks = (page: Page) =>
  page
    .getByTestId('trace-ranks')
    .locator('tbody tr')
    .evaluateAll((rows) => rows.map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent ?? '')));

describe("a trace report's judgement in the page", () => {
  const env = useServerAndBrowser();

  it('shows the verdict, the ranks and |Δ logit|, from a file and from a link', async () => {
    // disagreements at even indices are near ties, at odd ones decided (sample-trace.ts)
    const trace = judgedTrace({ prefix: 40, traced: 48, disagreeAt: [4, 9, 20], policy: 'mlx-m3plus' });
    expect(validateReport(trace)).toEqual([]);
    const j = trace.judgement!;
    expect([j.disagreements, j.decidedDisagreements, j.verdict]).toEqual([3, 1, 'decided']);
    const page = await newPage(env.browser, env.url);
    await openJson(page, 'judged.json', trace);
    const verdict = page.getByTestId('trace-judgement-verdict');
    await expect.poll(() => verdict.getAttribute('data-verdict'), { timeout: 30_000 }).toBe('decided');
    expect(await verdict.textContent()).toBe(
      "decided the block arm's top-1 differs where the chain's top-2 gap is 2.0 or more",
    );
    // the sample's disagreements put the chain's top-1 second in the block arm's list
    expect(await shownRanks(page)).toEqual([['2', '3', fmtPercent(3, 3)]]);
    expect(await page.getByTestId('trace-judgement-delta').textContent()).toBe(
      `|Δ logit| of the chain's top-1 where the block arm lists it (element ⌊p·n⌋ of the sorted list): p50 ${fmtSci(j.delta.p50!)} · p90 ${fmtSci(j.delta.p90!)} · p99 ${fmtSci(j.delta.p99!)} · max ${fmtSci(j.delta.max!)}`,
    );
    await page.getByTestId('trace-judgement').scrollIntoViewIfNeeded();
    await screenshot(page, '60-trace-judgement');

    const l = buildShareLink(trace, env.url);
    if (!l.ok) throw new Error(l.message);
    const fresh = await newPage(env.browser, l.link);
    await expect
      .poll(() => fresh.getByTestId('trace-judgement-verdict').getAttribute('data-verdict'), { timeout: 30_000 })
      .toBe('decided');
    expect(await shownRanks(fresh)).toEqual([['2', '3', fmtPercent(3, 3)]]);
    for (const p of [page, fresh]) {
      expect(pageErrors(p)).toEqual([]);
      await p.close();
    }
  });

  it('identical and undecided-only say so; a report without a judgement shows none', async () => {
    const page = await newPage(env.browser, env.url);
    await openJson(page, 'near-ties.json', judgedTrace({ prefix: 40, traced: 48, disagreeAt: [2, 6] }));
    const verdict = page.getByTestId('trace-judgement-verdict');
    await expect.poll(() => verdict.getAttribute('data-verdict'), { timeout: 30_000 }).toBe('undecided-only');
    expect(await verdict.textContent()).toMatch(
      /^undecided-only the block arm's top-1 differs only where the chain's top-2 gap is under 2\.0/,
    );
    await openJson(page, 'equal.json', judgedTrace({ prefix: 40, traced: 48, equal: true }));
    await expect.poll(() => verdict.getAttribute('data-verdict'), { timeout: 30_000 }).toBe('identical');
    expect(await page.getByTestId('trace-ranks').count()).toBe(0);
    expect(await page.getByTestId('trace-judgement-delta').textContent()).toMatch(/p50 0 · p90 0 · p99 0 · max 0$/);
    await openJson(page, 'older.json', asJson(sampleTrace({ prefix: 40, traced: 48, disagreeAt: [3] })));
    await expect
      .poll(() => page.getByTestId('report-source').textContent(), { timeout: 30_000 })
      .toBe('file older.json');
    expect(await page.getByTestId('trace-judgement').isHidden()).toBe(true);
    expect(pageErrors(page)).toEqual([]);
    await page.close();
  });
});
