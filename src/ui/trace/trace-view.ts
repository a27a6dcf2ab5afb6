/**
 * Renders any trace report (live run, opened file, share link): verdict, the disagreement metrics in a
 * table, disagreements by chain-gap bucket, the |Δ logit| chart, the positions, timings and provenance.
 * Input must come through readAnyReport (read-report.ts); text goes in as text nodes only.
 */
import type { TracePosition } from '../../parity/trace.ts';
import { append, clear, el } from '../common/dom.ts';
import { verdictHead } from '../common/verdict-head.ts';
import { fmtInt, fmtMs, fmtPercent, fmtSci, fmtTokenId, plural } from '../common/format.ts';
import { provenanceList } from '../report/provenance-view.ts';
import { exactnessNodes } from '../common/exactness-view.ts';
import { traceFileStem, traceMarkdown } from '../share/share-codec.ts';
import type { Shareable } from '../share/share.ts';
import { createTraceChart } from './trace-chart-view.ts';
import {
  bucketLabel,
  DECIDED_GAP,
  disagreements,
  JUDGEMENT_TEXT,
  traceConsequence,
  traceSetup,
  type TraceView,
} from './trace-model.ts';
import { tracePng } from './trace-png.ts';

/** Rows past this go to the "all positions" table only on request, and no further than this many. */
const ALL_ROWS_MAX = 4096;

const top1 = (t: { id: number; logit: number }[]) => (t[0] ? `${fmtTokenId(t[0].id)} (${fmtSci(t[0].logit)})` : '—');

function positionsTable(rows: readonly TracePosition[], caption: string, testid: string): HTMLElement {
  const head = [
    'position',
    'next',
    'chain top-1 (logit)',
    'block top-1 (logit)',
    'chain gap',
    '|Δ logit|',
    'nll chain',
    'nll block',
    'bytes differing',
    'top-1',
  ];
  return el(
    'table',
    { class: 'data', 'data-testid': testid },
    el('caption', {}, caption),
    el('thead', {}, el('tr', {}, ...head.map((h) => el('th', { scope: 'col' }, h)))),
    el(
      'tbody',
      {},
      ...rows.map((p) =>
        el(
          'tr',
          { class: p.agree ? (p.bytesDiffering === 0 ? 'eq' : '') : 'ne' },
          el('td', {}, fmtInt(p.position)),
          el('td', {}, fmtTokenId(p.next)),
          el('td', {}, top1(p.chainTop)),
          el('td', {}, top1(p.blockTop)),
          el('td', {}, fmtSci(p.gap), p.gap >= DECIDED_GAP ? el('span', { class: 'muted' }, ' decided') : null),
          el('td', {}, fmtSci(p.deltaChosen)),
          el('td', {}, fmtSci(p.nllChain)),
          el('td', {}, fmtSci(p.nllBlock)),
          el('td', {}, fmtInt(p.bytesDiffering)),
          el('td', {}, p.agree ? 'agrees' : 'differs'),
        ),
      ),
    ),
  );
}

function renderVerdict(verdictBox: HTMLElement, r: TraceView) {
  clear(verdictBox);
  verdictBox.setAttribute('data-verdict', r.verdict);
  const m = r.metrics;
  const chip = (bad: boolean, text: string, testid: string) =>
    el(
      'li',
      { class: bad ? 'diverges' : 'equal', 'data-testid': testid },
      el('span', { class: `chip ${bad ? 'diverges' : 'equal'}` }, bad ? 'differs' : 'ok'),
      ' ',
      text,
    );
  append(
    verdictBox,
    ...exactnessNodes(r.provenance.exactnessSelfTest),
    verdictHead(
      r.verdict,
      r.verdict === 'equal' ? 'EQUAL' : 'DIVERGES',
      el('p', { class: 'summary', 'data-testid': 'trace-summary' }, r.summary),
      el('p', { class: 'consequence', 'data-testid': 'trace-consequence' }, traceConsequence(r)),
      el('p', { class: 'consequence small', 'data-testid': 'trace-setup' }, traceSetup(r)),
    ),
    el(
      'ul',
      { class: 'draws' },
      chip(
        m.rowsByteEqual !== m.positions,
        `${fmtInt(m.rowsByteEqual)} of ${fmtInt(m.positions)} rows byte-equal`,
        'trace-fact-rows',
      ),
      chip(
        m.top1Disagreements > 0,
        `${plural(m.top1Disagreements, 'top-1 disagreement')} over ${plural(m.positions, 'position')}`,
        'trace-fact-top1',
      ),
      chip(
        m.decidedDisagreements > 0,
        `${plural(m.decidedDisagreements, 'disagreement')} on ${plural(m.decidedPositions, 'decided position')} (chain gap ≥ ${DECIDED_GAP.toFixed(1)})`,
        'trace-fact-decided',
      ),
    ),
  );
}

function renderMetrics(metricsBox: HTMLElement, r: TraceView) {
  const m = r.metrics;
  const d = m.deltaLogit;
  const rel = m.perplexity.block / m.perplexity.chain - 1;
  const rows: [string, string, string][] = [
    ['positions', 'Traced positions', fmtInt(m.positions)],
    ['rowsByteEqual', 'Rows byte-equal', `${fmtInt(m.rowsByteEqual)} of ${fmtInt(m.positions)}`],
    ['top1Disagreements', 'Top-1 disagreements', `${fmtInt(m.top1Disagreements)} of ${fmtInt(m.positions)}`],
    [
      'decidedPositions',
      `Decided positions (gap ≥ ${DECIDED_GAP.toFixed(1)})`,
      `${fmtInt(m.decidedPositions)} of ${fmtInt(m.positions)}`,
    ],
    [
      'decidedDisagreements',
      'Disagreements on decided positions',
      `${fmtInt(m.decidedDisagreements)} of ${fmtInt(m.decidedPositions)}`,
    ],
    ['deltaP50', '|Δ logit| p50', fmtSci(d.p50)],
    ['deltaP90', '|Δ logit| p90', fmtSci(d.p90)],
    ['deltaP99', '|Δ logit| p99', fmtSci(d.p99)],
    ['deltaMax', '|Δ logit| max', fmtSci(d.max)],
    ['pplChain', 'Perplexity, chain', fmtSci(m.perplexity.chain)],
    ['pplBlock', 'Perplexity, block', fmtSci(m.perplexity.block)],
    ['pplRelative', 'Perplexity block / chain − 1', rel === 0 ? '0' : fmtSci(rel)],
  ];
  clear(metricsBox);
  append(
    metricsBox,
    el(
      'table',
      { class: 'data', 'data-testid': 'trace-metrics' },
      el(
        'tbody',
        {},
        ...rows.map(([k, label, v]) =>
          el(
            'tr',
            { 'data-metric': k },
            el('th', { scope: 'row' }, label),
            el('td', { 'data-testid': `metric-${k}` }, v),
          ),
        ),
      ),
    ),
  );
}

function renderBuckets(bucketsBox: HTMLElement, r: TraceView) {
  clear(bucketsBox);
  const b = r.metrics.buckets;
  if (!b.length) return append(bucketsBox, el('p', { class: 'muted small' }, 'No gap buckets in this report.'));
  append(
    bucketsBox,
    el(
      'table',
      { class: 'data', 'data-testid': 'trace-buckets' },
      el(
        'thead',
        {},
        el('tr', {}, ...['chain gap', 'positions', 'disagreements', 'share'].map((h) => el('th', { scope: 'col' }, h))),
      ),
      el(
        'tbody',
        {},
        ...b.map((x) =>
          el(
            'tr',
            { class: x.disagreements > 0 ? 'ne' : '' },
            el('td', {}, bucketLabel(x), x.lo >= DECIDED_GAP ? el('span', { class: 'muted' }, ' decided') : null),
            el('td', {}, fmtInt(x.positions)),
            el('td', {}, fmtInt(x.disagreements)),
            el('td', {}, x.positions > 0 ? fmtPercent(x.disagreements, x.positions) : '—'),
          ),
        ),
      ),
    ),
  );
}

/**
 * mlxcel's judgement (compare_logit_traces), chain as reference and block as candidate: its verdict, where each
 * disagreement put the chain's top-1 in the block arm's list, and |Δ logit| of that token where the list has it.
 * A report written before the judgement existed shows nothing here.
 */
function renderJudgement(judgementBox: HTMLElement, r: TraceView) {
  clear(judgementBox);
  const j = r.judgement;
  judgementBox.hidden = !j;
  if (!j) return;
  const bad = j.verdict !== 'identical';
  const d = j.delta;
  const pct = (v: number | null) => (v === null ? '—' : fmtSci(v));
  const ranks = Object.entries(j.ranks).filter(([, n]) => n > 0);
  append(
    judgementBox,
    el('h3', {}, 'Judgement, as mlxcel judges two logit traces'),
    el(
      'p',
      { class: 'small', 'data-testid': 'trace-judgement-verdict', 'data-verdict': j.verdict },
      el('span', { class: `chip ${bad ? 'diverges' : 'equal'}` }, j.verdict),
      ' ',
      JUDGEMENT_TEXT[j.verdict],
    ),
    ranks.length
      ? el(
          'div',
          { class: 'table-wrap' },
          el('p', { class: 'muted small' }, "Where each disagreement put the chain's top-1 in the block arm's list:"),
          el(
            'table',
            { class: 'data', 'data-testid': 'trace-ranks' },
            el(
              'thead',
              {},
              el('tr', {}, ...['rank', 'disagreements', 'share'].map((h) => el('th', { scope: 'col' }, h))),
            ),
            el(
              'tbody',
              {},
              ...ranks.map(([k, n]) =>
                el(
                  'tr',
                  {},
                  el('td', {}, k.startsWith('>') ? `beyond the list (${k})` : k),
                  el('td', {}, fmtInt(n)),
                  el('td', {}, fmtPercent(n, j.disagreements)),
                ),
              ),
            ),
          ),
        )
      : null,
    el(
      'p',
      { class: 'muted small', 'data-testid': 'trace-judgement-delta' },
      `|Δ logit| of the chain's top-1 where the block arm lists it (element ⌊p·n⌋ of the sorted list): p50 ${pct(d.p50)} · p90 ${pct(d.p90)} · p99 ${pct(d.p99)} · max ${pct(d.max)}`,
    ),
  );
}

function renderPositions(positionsBox: HTMLElement, r: TraceView) {
  clear(positionsBox);
  const dis = disagreements(r);
  if (dis.length)
    append(
      positionsBox,
      positionsTable(
        dis.slice(0, ALL_ROWS_MAX),
        `${plural(dis.length, 'position')} where the block arm's top-1 differs from the chain's`,
        'trace-disagreements',
      ),
    );
  else
    append(
      positionsBox,
      el(
        'p',
        { class: 'small', 'data-testid': 'trace-no-disagreement' },
        `The block arm's top-1 token equals the chain's at all ${fmtInt(r.positions.length)} traced positions.`,
      ),
    );
  if (!r.positions.length) return;
  const all = el(
    'details',
    { class: 'all-positions' },
    el(
      'summary',
      {},
      `All ${fmtInt(r.positions.length)} positions${r.positions.length > ALL_ROWS_MAX ? ` (the first ${fmtInt(ALL_ROWS_MAX)} shown)` : ''}`,
    ),
  );
  // Built on first opening: thousands of rows cost nothing until someone asks for them.
  all.addEventListener('toggle', () => {
    if (all.open && all.childElementCount === 1)
      append(
        all,
        positionsTable(
          r.positions.slice(0, ALL_ROWS_MAX),
          'every traced position, chain arm versus block arm',
          'trace-all-positions',
        ),
      );
  });
  append(positionsBox, all);
}

function renderChartNote(chartNote: HTMLElement, r: TraceView) {
  const zero = r.positions.filter((p) => p.deltaChosen === 0).length;
  const n = r.positions.length;
  chartNote.textContent =
    n === 0
      ? 'This report lists no positions.'
      : zero === n
        ? `|Δ logit| is exactly 0 at all ${fmtInt(n)} positions: they sit on the "= 0" line under the axis.`
        : `${fmtInt(n)} positions; ${fmtInt(zero)} with |Δ logit| exactly 0 (on the "= 0" line). Shaded: decided positions, where the chain's top-1 leads top-2 by ≥ ${DECIDED_GAP.toFixed(1)}; the dashed line marks that gap.`;
}

function renderTimings(timingsBox: HTMLElement, r: TraceView) {
  clear(timingsBox);
  const t = r.timings;
  append(
    timingsBox,
    el(
      'dl',
      { class: 'kv', 'data-testid': 'trace-timings' },
      ...(
        [
          ['Prefill', fmtMs(t.prefillMs)],
          ['Chain arm', fmtMs(t.chainMs)],
          ['Block arm', fmtMs(t.blockMs)],
          ['Total', fmtMs(t.totalMs)],
        ] as const
      ).flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]),
    ),
  );
}

export function createTraceView(): {
  root: HTMLElement;
  show(r: TraceView, raw: unknown): void;
  shareable(): Shareable | undefined;
} {
  const verdictBox = el('div', { class: 'verdict-card', 'data-testid': 'trace-verdict', 'aria-live': 'polite' });
  const compacted = el(
    'p',
    { class: 'small note', 'data-testid': 'trace-compacted', hidden: true },
    'This trace came through a share link that was too long for the whole report: its top-k lists are cut to the top 2 (chain) and top 1 (block) and its numbers rounded to 7 significant digits. Ask for the JSON file for everything.',
  );
  const chart = createTraceChart();
  const chartNote = el('p', { class: 'muted small', 'data-testid': 'trace-chart-note' });
  const metricsBox = el('div', { class: 'table-wrap' });
  const bucketsBox = el('div', { class: 'table-wrap' });
  const judgementBox = el('div', { 'data-testid': 'trace-judgement' });
  const positionsBox = el('div', { class: 'table-wrap' });
  const timingsBox = el('div', { class: 'table-wrap' });
  const provBox = el('div', {});
  const root = el(
    'div',
    { class: 'report-body', 'data-testid': 'trace-view', hidden: true },
    verdictBox,
    compacted,
    el('h3', {}, '|Δ logit| per traced position'),
    chartNote,
    chart.root,
    el(
      'div',
      { class: 'two-col even' },
      el('div', {}, el('h3', {}, 'Metrics'), metricsBox),
      el('div', {}, el('h3', {}, 'Disagreements by chain gap'), bucketsBox),
    ),
    judgementBox,
    el('h3', {}, 'Positions'),
    positionsBox,
    el(
      'div',
      { class: 'two-col' },
      el('div', {}, el('h3', {}, 'Timings'), timingsBox),
      el('div', {}, el('h3', {}, 'Provenance'), provBox),
    ),
  );
  let report: TraceView | undefined;
  let rawReport: unknown;

  return {
    root,
    show(r, raw) {
      report = r;
      rawReport = raw;
      root.hidden = false;
      compacted.hidden = r.linkCompacted !== true;
      renderVerdict(verdictBox, r);
      renderChartNote(chartNote, r);
      chart.update(r.positions);
      renderMetrics(metricsBox, r);
      renderBuckets(bucketsBox, r);
      renderJudgement(judgementBox, r);
      renderPositions(positionsBox, r);
      renderTimings(timingsBox, r);
      clear(provBox);
      append(
        provBox,
        provenanceList(r.provenance, 'trace-provenance', [
          ['Prefix', fmtInt(r.provenance.prefix)],
          ['Traced positions', fmtInt(r.provenance.traced)],
        ]),
      );
    },
    shareable() {
      if (!report) return undefined;
      const r = report;
      return {
        raw: rawReport,
        stem: traceFileStem(r),
        png: () => tracePng(r),
        markdown: (link) => traceMarkdown(r, link),
      };
    },
  };
}
