/**
 * The trace chart: |delta logit| of the chain's top-1 token at every traced position on a log axis, the
 * chain's top-1/top-2 gap as grey ticks on the same axis, decided positions (gap >= 2.0) shaded, the 2.0
 * threshold dashed, top-1 disagreements as red crosses. Rows whose |delta| is exactly 0 sit on their own
 * "= 0" line under the axis (a log axis has no 0). The same draw function paints the page canvas
 * (trace-chart-view.ts) and the PNG export (trace-png.ts).
 */
import type { TracePosition } from '../../parity/trace.ts';
import { FONT } from '../common/canvas.ts';
import { DECIDED_GAP } from './trace-model.ts';

export const TRACE_COLORS = {
  agree: '#2f6fde',
  disagree: '#c0362c',
  zero: '#18794e',
  gap: '#9aa3ad',
  decided: '#fbecc8',
  threshold: '#a15c00',
} as const;

export interface TraceChartLayout {
  width: number;
  height: number;
  left: number;
  right: number;
  top: number;
  plotH: number;
  /** y of the "= 0" line under the plot. */
  zeroY: number;
  /** Log10 range of the axis. */
  lo: number;
  hi: number;
  n: number;
  colW: number;
  xOf(i: number): number;
  yOf(v: number): number;
  /** Index of the position under x, or -1. */
  indexAt(x: number): number;
}

const PLOT_H = 180;

export function traceChartLayout(points: readonly TracePosition[], width: number): TraceChartLayout {
  const left = 64;
  const right = 96;
  const top = 14;
  const n = Math.max(1, points.length);
  const colW = Math.max(0.01, (width - left - right) / n);
  const pos = (xs: number[]) => xs.filter((v) => Number.isFinite(v) && v > 0);
  const deltas = pos(points.map((p) => p.deltaChosen));
  const gaps = pos(points.map((p) => p.gap));
  const all = [...deltas, ...gaps, DECIDED_GAP];
  const hi = Math.ceil(Math.log10(Math.max(...all) * 1.05));
  const smallest = Math.min(...(deltas.length ? deltas : [10 ** (hi - 4)]), ...gaps);
  // At least 4 decades so a flat run reads flat, at most 12 so one outlier cannot squash the rest.
  const lo = Math.max(hi - 12, Math.min(hi - 4, Math.floor(Math.log10(smallest))));
  const yOf = (v: number) => top + PLOT_H - ((Math.min(hi, Math.max(lo, Math.log10(v))) - lo) / (hi - lo)) * PLOT_H;
  const zeroY = top + PLOT_H + 18;
  return {
    width,
    height: zeroY + 2 * 14 + 22 + 42,
    left,
    right,
    top,
    plotH: PLOT_H,
    zeroY,
    lo,
    hi,
    n: points.length,
    colW,
    xOf: (i) => left + (i + 0.5) * colW,
    yOf,
    indexAt: (x) => {
      const i = Math.floor((x - left) / colW);
      return i >= 0 && i < points.length ? i : -1;
    },
  };
}

/** A round step for the position axis: about one label per 70 px. */
function positionStep(n: number, colW: number): number {
  const want = Math.max(1, Math.ceil(70 / Math.max(colW, 1e-6)));
  for (const s of [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10000]) if (s >= want) return s;
  return Math.ceil(n / 8);
}

/** Paints the chart at (x, y) in CSS pixels of `ctx`. */
export function drawTraceChart(
  ctx: CanvasRenderingContext2D,
  points: Points,
  L: TraceChartLayout,
  x = 0,
  y = 0,
  cursor?: number,
): void {
  ctx.save();
  ctx.translate(x, y);
  ctx.font = `11px ${FONT}`;
  ctx.textBaseline = 'middle';
  drawDecidedShading(ctx, points, L);
  drawLogAxis(ctx, L);
  drawThreshold(ctx, L);
  drawGapTicks(ctx, points, L);
  drawDeltas(ctx, points, L);
  drawDisagreements(ctx, points, L);
  drawStrips(ctx, points, L);
  drawPositionAxis(ctx, points, L);
  drawCursor(ctx, points, L, cursor);
  drawLegend(ctx, L);
  ctx.restore();
}

/** Right edge of the plot area. */
const plotRight = (L: TraceChartLayout) => L.width - L.right;

/** Width of a gap tick (and of a "= 0" mark): at most 8 px, at most 80% of a column. */
const tickWidth = (L: TraceChartLayout) => Math.max(1, Math.min(8, L.colW * 0.8));

/** y of the two strips under the "= 0" line: top-1 agreement, then decided. */
function stripRows(L: TraceChartLayout): { agree: number; decided: number } {
  const agree = L.zeroY + 12;
  return { agree, decided: agree + 14 };
}

type Points = readonly TracePosition[];

/** Decided positions (gap >= DECIDED_GAP), shaded behind everything. */
function drawDecidedShading(ctx: CanvasRenderingContext2D, points: Points, L: TraceChartLayout): void {
  ctx.fillStyle = TRACE_COLORS.decided;
  points.forEach((p, i) => {
    if (p.gap >= DECIDED_GAP) ctx.fillRect(L.left + i * L.colW, L.top, Math.max(1, L.colW), L.plotH);
  });
}

/** The log axis: decade lines and labels, the "= 0" label, the plot frame and the axis title. */
function drawLogAxis(ctx: CanvasRenderingContext2D, L: TraceChartLayout): void {
  const plotR = plotRight(L);
  ctx.strokeStyle = '#e4e7eb';
  ctx.lineWidth = 1;
  ctx.fillStyle = '#5b6470';
  ctx.textAlign = 'right';
  const step = Math.max(1, Math.ceil((L.hi - L.lo) / 6));
  for (let e = L.hi; e >= L.lo; e -= step) {
    const yy = Math.round(L.yOf(10 ** e)) + 0.5;
    ctx.beginPath();
    ctx.moveTo(L.left, yy);
    ctx.lineTo(plotR, yy);
    ctx.stroke();
    ctx.fillText(`1e${e}`, L.left - 6, yy);
  }
  ctx.fillText('= 0', L.left - 6, L.zeroY);
  ctx.strokeStyle = '#b9c0c8';
  ctx.strokeRect(L.left + 0.5, L.top + 0.5, plotR - L.left - 1, L.plotH);
  ctx.save();
  ctx.translate(12, L.top + L.plotH / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.textAlign = 'center';
  ctx.fillText('|Δ logit| of chain top-1', 0, 0);
  ctx.restore();
}

/** The decided threshold: a dashed line at DECIDED_GAP, labelled right of the plot. */
function drawThreshold(ctx: CanvasRenderingContext2D, L: TraceChartLayout): void {
  const plotR = plotRight(L);
  const ty = Math.round(L.yOf(DECIDED_GAP)) + 0.5;
  ctx.strokeStyle = TRACE_COLORS.threshold;
  ctx.lineWidth = 1;
  ctx.setLineDash([6, 4]);
  ctx.beginPath();
  ctx.moveTo(L.left, ty);
  ctx.lineTo(plotR, ty);
  ctx.stroke();
  ctx.setLineDash([]);
  ctx.fillStyle = TRACE_COLORS.threshold;
  ctx.textAlign = 'left';
  ctx.fillText(`gap ${DECIDED_GAP.toFixed(1)}`, plotR + 6, ty - 7);
  ctx.fillText('(decided)', plotR + 6, ty + 7);
}

/** The chain's top-1/top-2 gaps, as grey ticks. */
function drawGapTicks(ctx: CanvasRenderingContext2D, points: Points, L: TraceChartLayout): void {
  const tick = tickWidth(L);
  ctx.strokeStyle = TRACE_COLORS.gap;
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  points.forEach((p, i) => {
    if (!(p.gap > 0)) return;
    const yy = L.yOf(p.gap);
    ctx.moveTo(L.xOf(i) - tick / 2, yy);
    ctx.lineTo(L.xOf(i) + tick / 2, yy);
  });
  ctx.stroke();
}

/** |delta logit| of each position: a dot on the log axis, or a mark on the "= 0" line. */
function drawDeltas(ctx: CanvasRenderingContext2D, points: Points, L: TraceChartLayout): void {
  const tick = tickWidth(L);
  const r = Math.max(1.2, Math.min(3, L.colW / 2.5));
  points.forEach((p, i) => {
    const cx = L.xOf(i);
    if (p.deltaChosen > 0) {
      ctx.fillStyle = p.agree ? TRACE_COLORS.agree : TRACE_COLORS.disagree;
      ctx.beginPath();
      ctx.arc(cx, L.yOf(p.deltaChosen), r, 0, 2 * Math.PI);
      ctx.fill();
    } else if (p.deltaChosen === 0) {
      ctx.fillStyle = p.agree ? TRACE_COLORS.zero : TRACE_COLORS.disagree;
      ctx.fillRect(cx - Math.max(0.5, tick / 2), L.zeroY - 1.5, Math.max(1, tick), 3);
    }
  });
}

/** Top-1 disagreements: red crosses over their delta (or on the "= 0" line). */
function drawDisagreements(ctx: CanvasRenderingContext2D, points: Points, L: TraceChartLayout): void {
  ctx.strokeStyle = TRACE_COLORS.disagree;
  ctx.lineWidth = 2;
  points.forEach((p, i) => {
    if (p.agree) return;
    const cx = L.xOf(i);
    const cy = p.deltaChosen > 0 ? L.yOf(p.deltaChosen) : L.zeroY;
    ctx.beginPath();
    ctx.moveTo(cx - 5, cy - 5);
    ctx.lineTo(cx + 5, cy + 5);
    ctx.moveTo(cx + 5, cy - 5);
    ctx.lineTo(cx - 5, cy + 5);
    ctx.stroke();
  });
}

/** The two strips under the plot (top-1 agreement, decided), with their labels. */
function drawStrips(ctx: CanvasRenderingContext2D, points: Points, L: TraceChartLayout): void {
  const rows = stripRows(L);
  points.forEach((p, i) => {
    const x0 = L.left + i * L.colW;
    const w = Math.max(1, L.colW - (L.colW > 4 ? 1 : 0));
    ctx.fillStyle = p.agree ? TRACE_COLORS.zero : TRACE_COLORS.disagree;
    ctx.fillRect(x0, rows.agree, w, 8);
    ctx.fillStyle = p.gap >= DECIDED_GAP ? '#e0a33a' : '#eef1f4';
    ctx.fillRect(x0, rows.decided, w, 8);
  });
  ctx.fillStyle = '#1b1f24';
  ctx.textAlign = 'right';
  ctx.fillText('top-1', L.left - 6, rows.agree + 4);
  ctx.fillText('decided', L.left - 6, rows.decided + 4);
}

/** The position axis under the strips: its title and a label every round step. */
function drawPositionAxis(ctx: CanvasRenderingContext2D, points: Points, L: TraceChartLayout): void {
  const y = stripRows(L).decided + 22;
  ctx.fillStyle = '#1b1f24';
  ctx.textAlign = 'right';
  ctx.fillText('position', L.left - 6, y);
  ctx.fillStyle = '#5b6470';
  ctx.textAlign = 'center';
  const ps = positionStep(points.length, L.colW);
  points.forEach((p, i) => {
    if (Number.isFinite(p.position) && p.position % ps === 0) ctx.fillText(String(p.position), L.xOf(i), y);
  });
}

/** A vertical line through the plot and the strips at the hovered position. */
function drawCursor(
  ctx: CanvasRenderingContext2D,
  points: Points,
  L: TraceChartLayout,
  cursor: number | undefined,
): void {
  if (cursor === undefined || cursor < 0 || cursor >= points.length) return;
  ctx.strokeStyle = '#1b1f24';
  ctx.lineWidth = 1;
  const cx = Math.round(L.xOf(cursor)) + 0.5;
  ctx.beginPath();
  ctx.moveTo(cx, L.top);
  ctx.lineTo(cx, stripRows(L).decided + 8);
  ctx.stroke();
}

/** One legend entry: paints its swatch with the left edge at x, centred on y. */
type Swatch = (ctx: CanvasRenderingContext2D, x: number, y: number) => void;

const LEGEND: readonly [Swatch, string][] = [
  [
    (ctx, x, y) => {
      ctx.fillStyle = TRACE_COLORS.agree;
      ctx.beginPath();
      ctx.arc(x + 5, y, 3, 0, 2 * Math.PI);
      ctx.fill();
    },
    '|Δ logit|, top-1 agrees',
  ],
  [
    (ctx, x, y) => {
      ctx.strokeStyle = TRACE_COLORS.disagree;
      ctx.lineWidth = 2;
      ctx.beginPath();
      ctx.moveTo(x + 1, y - 4);
      ctx.lineTo(x + 9, y + 4);
      ctx.moveTo(x + 9, y - 4);
      ctx.lineTo(x + 1, y + 4);
      ctx.stroke();
    },
    'top-1 differs',
  ],
  [
    (ctx, x, y) => {
      ctx.fillStyle = TRACE_COLORS.zero;
      ctx.fillRect(x + 1, y - 1.5, 8, 3);
    },
    '|Δ| exactly 0',
  ],
  [
    (ctx, x, y) => {
      ctx.strokeStyle = TRACE_COLORS.gap;
      ctx.lineWidth = 1.5;
      ctx.beginPath();
      ctx.moveTo(x + 1, y);
      ctx.lineTo(x + 9, y);
      ctx.stroke();
    },
    'chain top-1 − top-2 gap',
  ],
  [
    (ctx, x, y) => {
      ctx.fillStyle = TRACE_COLORS.decided;
      ctx.fillRect(x, y - 5, 10, 10);
    },
    `decided (gap ≥ ${DECIDED_GAP.toFixed(1)})`,
  ],
];

/** The legend, one line under the position axis; entries that would not fit the width are left out. */
function drawLegend(ctx: CanvasRenderingContext2D, L: TraceChartLayout): void {
  let lx = L.left;
  const ly = stripRows(L).decided + 44;
  ctx.textAlign = 'left';
  for (const [swatch, label] of LEGEND) {
    if (lx + 16 + ctx.measureText(label).width > L.width - 8) continue;
    swatch(ctx, lx, ly);
    ctx.fillStyle = '#5b6470';
    ctx.fillText(label, lx + 14, ly);
    lx += 14 + ctx.measureText(label).width + 16;
  }
}
