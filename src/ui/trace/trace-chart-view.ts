/**
 * The on-screen trace chart: a focusable canvas painted by drawTraceChart, and a live region that reads
 * the position under the mouse or the keyboard cursor out, so the numbers are not locked inside pixels.
 */
import type { TracePosition } from '../../parity/trace.ts';
import { el } from '../common/dom.ts';
import { onWidthChange, sizeCanvas } from '../common/canvas.ts';
import { fmtInt, fmtSci, fmtTokenId } from '../common/format.ts';
import { DECIDED_GAP } from './trace-model.ts';
import { drawTraceChart, traceChartLayout, type TraceChartLayout } from './trace-chart.ts';

const logit = (t: { id: number; logit: number } | undefined) => (t ? `${fmtTokenId(t.id)} (${fmtSci(t.logit)})` : '—');

/** One position in words, for the live region and the hover readout. */
export function describePosition(p: TracePosition): string {
  return (
    `position ${fmtInt(p.position)} · next token ${fmtTokenId(p.next)} · chain top-1 ${logit(p.chainTop[0])}, gap ${fmtSci(p.gap)}${p.gap >= DECIDED_GAP ? ' (decided)' : ''}` +
    ` · block top-1 ${logit(p.blockTop[0])} · |Δ logit| ${fmtSci(p.deltaChosen)} · ${fmtInt(p.bytesDiffering)} bytes differ · ${p.agree ? 'top-1 agrees' : 'TOP-1 DIFFERS'}`
  );
}

/** The on-screen chart: a focusable canvas plus a readout line. */
export function createTraceChart(): { root: HTMLElement; update(points: readonly TracePosition[]): void } {
  const canvas = el('canvas', { class: 'trace-chart', tabindex: 0, role: 'img', 'data-testid': 'trace-chart' });
  const hint =
    'Move over the chart, or focus it and use the arrow keys (Home: the first disagreement or the largest |Δ|).';
  const readout = el('p', { class: 'readout', 'aria-live': 'polite', 'data-testid': 'trace-readout' }, hint);
  const root = el('div', { class: 'trace-chart-wrap' }, canvas, readout);
  let points: readonly TracePosition[] = [];
  let layout: TraceChartLayout | undefined;
  let cursor: number | undefined;

  const paint = () => {
    if (!points.length) return;
    layout = traceChartLayout(points, Math.max(480, root.clientWidth || 1000));
    const ctx = sizeCanvas(canvas, layout.width, layout.height);
    if (ctx) drawTraceChart(ctx, points, layout, 0, 0, cursor);
  };
  const show = (i: number) => {
    cursor = i;
    readout.textContent = describePosition(points[i]);
    paint();
  };
  /** Where the eye should go first: the first disagreement, else the largest |delta|. */
  const home = () => {
    const d = points.findIndex((p) => !p.agree);
    if (d >= 0) return d;
    let best = 0;
    points.forEach((p, i) => {
      if (p.deltaChosen > points[best].deltaChosen) best = i;
    });
    return best;
  };

  canvas.addEventListener('keydown', (e) => {
    if (!points.length) return;
    const c = cursor ?? home();
    const page = Math.max(1, Math.round(points.length / 10));
    const to: Record<string, number> = {
      ArrowLeft: c - 1,
      ArrowRight: c + 1,
      PageUp: c - page,
      PageDown: c + page,
      Home: home(),
      End: points.length - 1,
    };
    if (e.key in to) {
      e.preventDefault();
      show(Math.min(points.length - 1, Math.max(0, to[e.key])));
    }
  });
  canvas.addEventListener('focus', () => points.length && show(cursor ?? home()));
  canvas.addEventListener('mousemove', (e) => {
    if (!layout) return;
    const i = layout.indexAt(e.clientX - canvas.getBoundingClientRect().left);
    if (i >= 0 && i !== cursor) show(i);
  });
  onWidthChange(root, paint);

  return {
    root,
    update(p) {
      points = p;
      cursor = undefined;
      root.hidden = p.length === 0;
      const dis = p.filter((x) => !x.agree).length;
      const decided = p.filter((x) => x.gap >= DECIDED_GAP).length;
      canvas.setAttribute(
        'aria-label',
        `|Δ logit| per position over ${p.length} traced positions, log scale; ${dis} top-1 disagreements; ${decided} decided positions shaded`,
      );
      readout.textContent = p.length ? describePosition(p[home()]) : hint;
      paint();
    },
  };
}
