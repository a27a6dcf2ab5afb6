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

export const TRACE_COLORS = { agree: '#2f6fde', disagree: '#c0362c', zero: '#18794e', gap: '#9aa3ad', decided: '#fbecc8', threshold: '#a15c00' } as const;

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
export function drawTraceChart(ctx: CanvasRenderingContext2D, points: readonly TracePosition[], L: TraceChartLayout, x = 0, y = 0, cursor?: number): void {
  ctx.save();
  ctx.translate(x, y);
  const plotR = L.width - L.right;
  ctx.font = `11px ${FONT}`;
  ctx.textBaseline = 'middle';

  // Decided positions, shaded behind everything.
  ctx.fillStyle = TRACE_COLORS.decided;
  points.forEach((p, i) => {
    if (p.gap >= DECIDED_GAP) ctx.fillRect(L.left + i * L.colW, L.top, Math.max(1, L.colW), L.plotH);
  });

  // Decades.
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

  // The decided threshold.
  const ty = Math.round(L.yOf(DECIDED_GAP)) + 0.5;
  ctx.strokeStyle = TRACE_COLORS.threshold;
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

  // Gaps (grey ticks), then deltas (dots), then disagreements (crosses) on top.
  const tick = Math.max(1, Math.min(8, L.colW * 0.8));
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

  // Strips: top-1 agreement and decided, then the position axis.
  const s1 = L.zeroY + 12;
  const s2 = s1 + 14;
  points.forEach((p, i) => {
    const x0 = L.left + i * L.colW;
    const w = Math.max(1, L.colW - (L.colW > 4 ? 1 : 0));
    ctx.fillStyle = p.agree ? TRACE_COLORS.zero : TRACE_COLORS.disagree;
    ctx.fillRect(x0, s1, w, 8);
    ctx.fillStyle = p.gap >= DECIDED_GAP ? '#e0a33a' : '#eef1f4';
    ctx.fillRect(x0, s2, w, 8);
  });
  ctx.fillStyle = '#1b1f24';
  ctx.textAlign = 'right';
  ctx.fillText('top-1', L.left - 6, s1 + 4);
  ctx.fillText('decided', L.left - 6, s2 + 4);
  ctx.fillText('position', L.left - 6, s2 + 22);
  ctx.fillStyle = '#5b6470';
  ctx.textAlign = 'center';
  const ps = positionStep(points.length, L.colW);
  points.forEach((p, i) => {
    if (Number.isFinite(p.position) && p.position % ps === 0) ctx.fillText(String(p.position), L.xOf(i), s2 + 22);
  });

  if (cursor !== undefined && cursor >= 0 && cursor < points.length) {
    ctx.strokeStyle = '#1b1f24';
    ctx.lineWidth = 1;
    const cx = Math.round(L.xOf(cursor)) + 0.5;
    ctx.beginPath();
    ctx.moveTo(cx, L.top);
    ctx.lineTo(cx, s2 + 8);
    ctx.stroke();
  }

  // Legend.
  let lx = L.left;
  const ly = s2 + 44;
  ctx.textAlign = 'left';
  const item = (draw: (x: number) => void, label: string) => {
    if (lx + 16 + ctx.measureText(label).width > L.width - 8) return;
    draw(lx);
    ctx.fillStyle = '#5b6470';
    ctx.fillText(label, lx + 14, ly);
    lx += 14 + ctx.measureText(label).width + 16;
  };
  item((x) => {
    ctx.fillStyle = TRACE_COLORS.agree;
    ctx.beginPath();
    ctx.arc(x + 5, ly, 3, 0, 2 * Math.PI);
    ctx.fill();
  }, '|Δ logit|, top-1 agrees');
  item((x) => {
    ctx.strokeStyle = TRACE_COLORS.disagree;
    ctx.lineWidth = 2;
    ctx.beginPath();
    ctx.moveTo(x + 1, ly - 4);
    ctx.lineTo(x + 9, ly + 4);
    ctx.moveTo(x + 9, ly - 4);
    ctx.lineTo(x + 1, ly + 4);
    ctx.stroke();
  }, 'top-1 differs');
  item((x) => {
    ctx.fillStyle = TRACE_COLORS.zero;
    ctx.fillRect(x + 1, ly - 1.5, 8, 3);
  }, '|Δ| exactly 0');
  item((x) => {
    ctx.strokeStyle = TRACE_COLORS.gap;
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    ctx.moveTo(x + 1, ly);
    ctx.lineTo(x + 9, ly);
    ctx.stroke();
  }, 'chain top-1 − top-2 gap');
  item((x) => {
    ctx.fillStyle = TRACE_COLORS.decided;
    ctx.fillRect(x, ly - 5, 10, 10);
  }, `decided (gap ≥ ${DECIDED_GAP.toFixed(1)})`);
  ctx.restore();
}
