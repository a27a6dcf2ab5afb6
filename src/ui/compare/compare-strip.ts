/**
 * The strip of a trace comparison: one column per traced position, its top row red where the candidate's top-1 is
 * not the reference's, its bottom row dark where the reference had decided the position (top-1 leads top-2 by the
 * decided gap or more). The same painter draws the page's canvas and the PNG.
 */
import { FONT } from '../common/canvas.ts';
import { fmtInt } from '../common/format.ts';
import type { StripCell } from './compare-model.ts';

export const STRIP_COLORS = {
  agree: '#cfe3d6',
  differs: '#c0362c',
  decided: '#1f4e9a',
  undecided: '#e6eaf0',
} as const;

export interface StripLayout {
  left: number;
  width: number;
  height: number;
  rowH: number;
  /** x of position i's left edge, and its width. */
  cellX(i: number): number;
  cellW: number;
}

const LABEL_W = 64;

export function stripLayout(n: number, width: number): StripLayout {
  const inner = width - LABEL_W;
  const cellW = inner / Math.max(1, n);
  return { left: LABEL_W, width, height: 2 * 18 + 6 + 30, rowH: 18, cellW, cellX: (i) => LABEL_W + i * cellW };
}

/** Paints at (x, y); `cursor` outlines one position. */
export function drawStrip(
  ctx: CanvasRenderingContext2D,
  cells: readonly StripCell[],
  L: StripLayout,
  x: number,
  y: number,
  cursor?: number,
): void {
  ctx.save();
  ctx.translate(x, y);
  ctx.font = `12px ${FONT}`;
  ctx.textBaseline = 'middle';
  ctx.textAlign = 'left';
  ctx.fillStyle = '#1b1f24';
  ctx.fillText('top-1', 0, L.rowH / 2);
  ctx.fillText('decided', 0, L.rowH + 4 + L.rowH / 2);
  const gap = L.cellW > 4 ? 1 : 0;
  cells.forEach((c, i) => {
    const cx = L.cellX(i);
    const w = Math.max(L.cellW - gap, 0.7);
    ctx.fillStyle = c.agree ? STRIP_COLORS.agree : STRIP_COLORS.differs;
    ctx.fillRect(cx, 0, w, L.rowH);
    ctx.fillStyle = c.decided ? STRIP_COLORS.decided : STRIP_COLORS.undecided;
    ctx.fillRect(cx, L.rowH + 4, w, L.rowH);
  });
  // a disagreement narrower than a pixel still shows: a mark under the strip at each one
  ctx.fillStyle = STRIP_COLORS.differs;
  cells.forEach((c, i) => {
    if (!c.agree) ctx.fillRect(L.cellX(i) + L.cellW / 2 - 1, 2 * L.rowH + 6, 2, 5);
  });
  if (cursor !== undefined && cursor >= 0 && cursor < cells.length) {
    ctx.strokeStyle = '#111827';
    ctx.lineWidth = 2;
    ctx.strokeRect(L.cellX(cursor) - 1, -1, Math.max(L.cellW, 2) + 2, 2 * L.rowH + 6);
  }
  ctx.fillStyle = '#5b6470';
  ctx.textAlign = 'left';
  ctx.fillText('position 0', L.left, 2 * L.rowH + 22);
  ctx.textAlign = 'right';
  ctx.fillText(`${fmtInt(cells.length - 1)}`, L.width, 2 * L.rowH + 22);
  ctx.restore();
}

/** The position under x (CSS pixels from the strip's left), or -1. */
export function stripIndexAt(L: StripLayout, n: number, x: number): number {
  const i = Math.floor((x - L.left) / L.cellW);
  return i >= 0 && i < n ? i : -1;
}
