/**
 * Renders any ProbeReport (live run, opened file, share link) the same way: verdict card in mlxcel's
 * words, then the details of one draw (heatmap, logit lens, rows), the long draw's ring, timings and
 * provenance. Input must come through readAnyReport (read-report.ts); everything is rendered as text nodes
 * or drawn on canvases, never parsed as HTML. The card around it (title, source, share bar) is the
 * report shell's (report-shell.ts).
 */
import type { DrawResult, ProbeReport } from '../../parity/report.ts';
import { append, clear, el } from '../common/dom.ts';
import { verdictHead } from '../common/verdict-head.ts';
import { fmtInt, fmtMs, fmtPercent, fmtSci } from '../common/format.ts';
import { buildHeatmap, type HeatGrid, type Metric, type PositionPick } from './heatmap-model.ts';
import { createHeatmapView } from './heatmap.ts';
import { createLensChart, lensPoints } from './lens-chart.ts';
import { createRingView } from './ring-view.ts';
import { defaultDetailDraw, firstDivergenceOf, longRing, longState } from './report-model.ts';
import { createStateView } from './state-view.ts';
import { provenanceList } from './provenance-view.ts';
import { exactnessNodes } from '../common/exactness-view.ts';
import { performanceList } from '../adapter/performance-view.ts';
import { reportPng } from '../share/png-export.ts';
import { reportFileStem, reportMarkdown } from '../share/share-codec.ts';
import type { Shareable } from '../share/share.ts';

const drawName = (d: DrawResult) => `draw ${fmtInt(d.index)} (prompt ${fmtInt(d.promptLength)} tokens)`;

export function createReportView(): {
  root: HTMLElement;
  show(report: ProbeReport, raw: unknown): void;
  shareable(): Shareable | undefined;
} {
  const verdictBox = el('div', { class: 'verdict-card', 'data-testid': 'verdict', 'aria-live': 'polite' });
  const controls = createDetailControls({
    drawChanged: () => {
      controls.setPositions(draw());
      renderDetails();
    },
    viewChanged: () => renderDetails(),
  });
  const heat = createHeatmapView();
  const heatNote = el('p', { class: 'muted small', 'data-testid': 'heatmap-note' });
  const lens = createLensChart();
  const ring = createRingView();
  // A Qwen3.5 report has no ring: its long draw's recurrent state takes the ring's place.
  const state = createStateView();
  const ringTitle = el('h3', { 'data-testid': 'ring-title' }, 'Ring cache of the long draw');
  const rowsBox = el('div', { class: 'table-wrap' });
  const timingsBox = el('div', { class: 'table-wrap' });
  const provBox = el('div', {});
  const root = el(
    'div',
    { class: 'report-body', 'data-testid': 'probe-view', hidden: true },
    verdictBox,
    el('h3', {}, 'Where the arms differ'),
    controls.root,
    heatNote,
    heat.root,
    el('h3', {}, 'Logit lens per layer'),
    lens.root,
    el('h3', {}, 'Rows of the verify block'),
    rowsBox,
    ringTitle,
    ring.root,
    state.root,
    el(
      'div',
      { class: 'two-col' },
      el('div', {}, el('h3', {}, 'Timings'), timingsBox),
      el('div', {}, el('h3', {}, 'Provenance'), provBox),
    ),
  );

  let report: ProbeReport | undefined;
  let rawReport: unknown;
  let grid: HeatGrid | undefined;
  let gridTitle = '';

  const draw = (): DrawResult | undefined => report?.draws[controls.drawIndex()];

  /** The details of the selected draw: heatmap, logit lens and rows. */
  function renderDetails() {
    const d = draw();
    if (!report || !d) return;
    const stages = d.stages ?? [];
    const p = controls.pick();
    const metric = controls.metric();
    grid = buildHeatmap(stages, p, metric, d.firstDivergence);
    gridTitle = heatmapTitle(d, p, metric);
    heat.root.hidden = grid.cells.length === 0;
    heatNote.textContent = heatmapNote(d, grid, p, gridTitle);
    heat.update(grid);
    lens.update(lensPoints(d.lens ?? [], p), d.verdict === 'equal');
    // Position and metric only mean something for the heatmap; an equal draw has none.
    controls.hideHeatmapChoices(stages.length === 0 && (d.lens?.length ?? 0) === 0);
    clear(rowsBox);
    append(rowsBox, rowsTable(d));
  }

  return {
    root,
    show(r, raw) {
      report = r;
      rawReport = raw;
      root.hidden = false;
      renderVerdict(verdictBox, r);
      controls.setDraws(r.draws, defaultDetailDraw(r));
      controls.setPositions(draw());
      renderDetails();
      const lr = longRing(r);
      const ls = longState(r);
      ring.update(lr?.ring, lr ? drawName(lr.draw) : '');
      state.update(ls?.state, ls ? drawName(ls.draw) : '');
      ring.root.hidden = ls !== undefined && lr === undefined;
      ringTitle.textContent = ring.root.hidden ? 'Recurrent state of the long draw' : 'Ring cache of the long draw';
      clear(timingsBox);
      append(timingsBox, ...timingsNodes(r));
      clear(provBox);
      append(provBox, provenanceList(r.provenance, 'provenance'));
    },
    shareable() {
      if (!report) return undefined;
      const r = report;
      const [g, title] = [grid, gridTitle];
      return {
        raw: rawReport,
        stem: reportFileStem(r),
        png: () => reportPng({ report: r, grid: g, gridTitle: title }),
        markdown: (link) => reportMarkdown(r, link),
      };
    },
  };
}

/** The choices above the heatmap: which draw, which block position, what the colour shows. */
interface DetailControls {
  root: HTMLElement;
  /** Lists the report's draws and selects the one at `selected`. */
  setDraws(draws: readonly DrawResult[], selected: number): void;
  drawIndex(): number;
  /** Lists the block positions a draw has data for, starting on its first divergence's. */
  setPositions(d: DrawResult | undefined): void;
  pick(): PositionPick;
  metric(): Metric;
  hideHeatmapChoices(hidden: boolean): void;
}

function createDetailControls(on: { drawChanged(): void; viewChanged(): void }): DetailControls {
  const drawSelect = el('select', { 'data-testid': 'detail-draw', 'aria-label': 'Draw shown in the details' });
  const posSelect = el('select', { 'data-testid': 'position', 'aria-label': 'Block position' });
  const metricBytes = el('input', {
    type: 'radio',
    name: 'heat-metric',
    value: 'bytes',
    checked: true,
    'data-testid': 'metric-bytes',
  });
  const metricUlp = el('input', { type: 'radio', name: 'heat-metric', value: 'ulp', 'data-testid': 'metric-ulp' });
  const posLabel = el('label', {}, 'Position ', posSelect);
  const metricBox = el(
    'fieldset',
    { class: 'inline' },
    el('legend', {}, 'Colour by'),
    el('label', {}, metricBytes, ' bytes differing'),
    el('label', {}, metricUlp, ' log10 ULP'),
  );
  const root = el('div', { class: 'row controls' }, el('label', {}, 'Draw ', drawSelect), posLabel, metricBox);

  drawSelect.addEventListener('change', on.drawChanged);
  posSelect.addEventListener('change', on.viewChanged);
  metricBytes.addEventListener('change', on.viewChanged);
  metricUlp.addEventListener('change', on.viewChanged);

  return {
    root,
    setDraws(draws, selected) {
      clear(drawSelect);
      draws.forEach((d, i) => append(drawSelect, el('option', { value: i }, `${drawName(d)} · ${d.verdict}`)));
      drawSelect.value = String(selected);
    },
    drawIndex: () => Number(drawSelect.value),
    setPositions(d) {
      const positions = new Set<number>();
      for (const r of d?.rows ?? []) if (Number.isFinite(r.position)) positions.add(r.position);
      for (const s of d?.stages ?? [])
        for (const r of s.rows) if (Number.isFinite(r.position)) positions.add(r.position);
      clear(posSelect);
      append(posSelect, el('option', { value: 'all' }, 'all (max)'));
      for (const p of [...positions].sort((a, b) => a - b).slice(0, 512))
        append(posSelect, el('option', { value: p }, String(p)));
      // Start on the first divergence's position: the row the verdict talks about.
      const fp = d?.firstDivergence?.position;
      posSelect.value = fp !== undefined && positions.has(fp) ? String(fp) : 'all';
    },
    pick: () => (posSelect.value === 'all' || posSelect.value === '' ? 'all' : Number(posSelect.value)),
    metric: () => (metricUlp.checked ? 'ulp' : 'bytes'),
    hideHeatmapChoices(hidden) {
      posLabel.hidden = metricBox.hidden = hidden;
    },
  };
}

function heatmapTitle(d: DrawResult, p: PositionPick, metric: Metric): string {
  return `${drawName(d)}, ${p === 'all' ? 'all positions' : `position ${p}`}: ${metric === 'bytes' ? 'share of bytes differing' : 'log10 ULP'} per layer and stage`;
}

/** The line over the heatmap: how to read it, or why there is nothing to show. */
function heatmapNote(d: DrawResult, grid: HeatGrid, p: PositionPick, title: string): string {
  if (grid.cells.length > 0)
    return `${title}. Stages run top to bottom inside each layer; the outlined cell is the first divergence.`;
  if (d.verdict === 'equal') return `${drawName(d)} is equal in every logit byte: nothing to localize.`;
  if ((d.stages ?? []).length === 0)
    return `No per-layer captures in ${drawName(d)}: run the probe with "Localize" on to see where the arms first differ.`;
  return `No captures at position ${p}.`;
}

/** The verdict card: EQUAL or DIVERGES, the summary and consequence, the first divergence, each draw's verdict. */
function renderVerdict(box: HTMLElement, r: ProbeReport): void {
  clear(box);
  box.setAttribute('data-verdict', r.verdict);
  const fd = firstDivergenceOf(r);
  append(
    box,
    ...exactnessNodes(r.provenance.exactnessSelfTest),
    verdictHead(
      r.verdict,
      r.verdict === 'equal' ? 'EQUAL' : 'DIVERGES',
      el('p', { class: 'summary', 'data-testid': 'summary' }, r.summary),
      el('p', { class: 'consequence', 'data-testid': 'consequence' }, r.consequence),
    ),
    fd ? el('p', { class: 'first-divergence', 'data-testid': 'first-divergence' }, fd.fd.text) : null,
    fd?.fd.cause ? el('p', { class: 'small muted', 'data-testid': 'divergence-cause' }, fd.fd.cause) : null,
    el(
      'ul',
      { class: 'draws', 'data-testid': 'draws' },
      ...r.draws.map((d) =>
        el(
          'li',
          { class: d.verdict },
          el('span', { class: `chip ${d.verdict}` }, d.verdict),
          el('strong', {}, ` ${drawName(d)}: `),
          d.text,
        ),
      ),
    ),
  );
}

/** The logits row of each block position of a draw, block arm versus chain arm. */
function rowsTable(d: DrawResult): HTMLElement {
  if (d.rows.length === 0) return el('p', { class: 'muted small' }, 'No per-row data in this draw.');
  const body = el('tbody', {});
  for (const r of d.rows) {
    const equal = r.bytesDiffering === 0;
    append(
      body,
      el(
        'tr',
        { class: equal ? 'eq' : 'ne' },
        el('td', {}, fmtInt(r.position)),
        el(
          'td',
          {},
          `${fmtInt(r.bytesDiffering)} of ${fmtInt(r.bytesTotal)}`,
          el('span', { class: 'muted' }, ` (${fmtPercent(r.bytesDiffering, r.bytesTotal)})`),
        ),
        el('td', {}, fmtSci(r.maxAbs)),
        el('td', {}, fmtInt(r.maxUlp)),
        el('td', {}, fmtSci(r.nmse)),
      ),
    );
  }
  return el(
    'table',
    { class: 'data', 'data-testid': 'rows-table' },
    el('caption', {}, `${drawName(d)}: logits row of each block position, block arm versus chain arm`),
    el(
      'thead',
      {},
      el(
        'tr',
        {},
        ...['position', 'bytes differing of total', 'max abs', 'max ULP', 'NMSE'].map((h) =>
          el('th', { scope: 'col' }, h),
        ),
      ),
    ),
    body,
  );
}

/** Per-draw timings, the total, and the GPU's own throughput when the report carries it. */
function timingsNodes(r: ProbeReport): HTMLElement[] {
  const hasLocalize = r.draws.some((d) => d.timings.localizeMs !== undefined);
  const hasState = r.draws.some((d) => d.timings.stateMs !== undefined);
  const head = [
    'draw',
    'prefill',
    'chain',
    'block',
    ...(hasLocalize ? ['localize'] : []),
    ...(hasState ? ['state'] : []),
  ];
  const nodes: HTMLElement[] = [
    el(
      'table',
      { class: 'data compact', 'data-testid': 'timings' },
      el('thead', {}, el('tr', {}, ...head.map((h) => el('th', { scope: 'col' }, h)))),
      el(
        'tbody',
        {},
        ...r.draws.map((d) =>
          el(
            'tr',
            {},
            el('td', {}, `${fmtInt(d.index)} (${fmtInt(d.promptLength)})`),
            el('td', {}, fmtMs(d.timings.prefillMs)),
            el('td', {}, fmtMs(d.timings.chainMs)),
            el('td', {}, fmtMs(d.timings.blockMs)),
            hasLocalize ? el('td', {}, fmtMs(d.timings.localizeMs ?? NaN)) : null,
            hasState ? el('td', {}, fmtMs(d.timings.stateMs ?? NaN)) : null,
          ),
        ),
      ),
    ),
    el(
      'p',
      { class: 'small' },
      `Total ${fmtMs(r.timings.totalMs)}${r.timings.loadMs !== undefined ? ` · load ${fmtMs(r.timings.loadMs)}` : ''}`,
    ),
  ];
  if (r.performance) nodes.push(el('h3', {}, 'Performance of this GPU'), performanceList(r.performance));
  return nodes;
}
