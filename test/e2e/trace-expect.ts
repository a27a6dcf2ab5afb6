/** What the trace view must show for a report, and how to read what it shows (shared by the e2e tests). */
import type { Page } from 'playwright-core';
import { fmtInt, fmtSci } from '../../src/ui/common/format.ts';
import type { TraceReport } from '../../src/parity/trace.ts';

/** The metric cells the trace view shows, keyed by data-metric. */
export async function shownMetrics(page: Page): Promise<Record<string, string>> {
  return page
    .getByTestId('trace-metrics')
    .evaluate((t) =>
      Object.fromEntries(
        [...t.querySelectorAll('tr')].map((r) => [
          r.getAttribute('data-metric') ?? '',
          r.querySelector('td')?.textContent ?? '',
        ]),
      ),
    );
}

/** What the metric table must say for a report (the page's own formatting of the JSON's numbers). */
export function expectedMetrics(r: TraceReport): Record<string, string> {
  const m = r.metrics;
  return {
    positions: fmtInt(m.positions),
    rowsByteEqual: `${fmtInt(m.rowsByteEqual)} of ${fmtInt(m.positions)}`,
    top1Disagreements: `${fmtInt(m.top1Disagreements)} of ${fmtInt(m.positions)}`,
    decidedPositions: `${fmtInt(m.decidedPositions)} of ${fmtInt(m.positions)}`,
    decidedDisagreements: `${fmtInt(m.decidedDisagreements)} of ${fmtInt(m.decidedPositions)}`,
    deltaP50: fmtSci(m.deltaLogit.p50),
    deltaP90: fmtSci(m.deltaLogit.p90),
    deltaP99: fmtSci(m.deltaLogit.p99),
    deltaMax: fmtSci(m.deltaLogit.max),
    pplChain: fmtSci(m.perplexity.chain),
    pplBlock: fmtSci(m.perplexity.block),
  };
}

/** Buckets as shown: [range, positions, disagreements] per row. */
export async function shownBuckets(page: Page): Promise<string[][]> {
  return page
    .getByTestId('trace-buckets')
    .locator('tbody tr')
    .evaluateAll((rows) => rows.map((r) => [...r.querySelectorAll('td')].slice(0, 3).map((c) => c.textContent ?? '')));
}

export function expectedBuckets(r: TraceReport): string[][] {
  return r.metrics.buckets.map((b) => [
    `[${b.lo}, ${b.hi === null ? '∞' : b.hi})${b.lo >= 2 ? ' decided' : ''}`,
    fmtInt(b.positions),
    fmtInt(b.disagreements),
  ]);
}
