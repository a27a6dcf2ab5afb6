/**
 * The localization heatmap on a canvas: layers across, stages down, layer kinds (sliding / full / linear) marked above,
 * the first divergence outlined. The same draw function paints the on-screen canvas and the PNG export.
 * The canvas is keyboard reachable: arrow keys move a cursor and a live region reads the cell out, so the
 * numbers are not locked inside pixels.
 */
import { FINAL_STAGES, QWEN_STAGE_LABELS, STAGE_LABELS } from '../../parity/report.ts';
import { el } from '../common/dom.ts';
import { FONT, onWidthChange, sizeCanvas } from '../common/canvas.ts';
import { fmtInt, fmtPercent, fmtSci } from '../common/format.ts';
import { heatColor, legendStops, MISSING_COLOR, SHARED_COLOR, type HeatCell, type HeatGrid } from './heatmap-model.ts';

/** Layer-kind strip: sliding (Gemma), full attention, linear (Qwen3.5 Gated DeltaNet). */
export const KIND_COLOR = { sliding: '#9cc3ee', full: '#1f4e9a', linear: '#8fd0b8' } as const;

export interface HeatLayout {
  left: number;
  top: number;
  cellW: number;
  cellH: number;
  width: number;
  height: number;
  /** Left edge of column i (the head column sits after a small gap). */
  colX(i: number): number;
  /** Column under x, or -1. */
  colAt(x: number): number;
}

const HEAD_GAP = 8;

/** Cell sizes that fit `maxWidth` CSS pixels: wide cells for the tiny model, thin ones for 60 layers. */
export function heatLayout(grid: HeatGrid, maxWidth: number): HeatLayout {
  const left = 84;
  const top = 34;
  const cols = Math.max(1, grid.columns.length);
  const cellW = Math.max(8, Math.min(44, Math.floor((maxWidth - left - 8) / cols)));
  const cellH = 22;
  const headAt = grid.columns.findIndex((c) => c.layer === null);
  const colX = (i: number) => left + i * cellW + (headAt >= 0 && i >= headAt ? HEAD_GAP : 0);
  const colAt = (x: number) => {
    for (let i = 0; i < cols; i++) if (x >= colX(i) && x < colX(i) + cellW) return i;
    return -1;
  };
  // At least wide enough for the legend on one line where there is room; it wraps onto a second otherwise.
  const width = Math.min(Math.max(colX(cols) + 8, 800), Math.max(maxWidth, colX(cols) + 8));
  return { left, top, cellW, cellH, width, height: top + grid.stages.length * cellH + 48, colX, colAt };
}

/** Paints the grid at (x, y) in CSS pixels of `ctx` (callers scale the context for device pixels). */
export function drawHeatmap(
  ctx: CanvasRenderingContext2D,
  grid: HeatGrid,
  L: HeatLayout,
  x = 0,
  y = 0,
  cursor?: { col: number; row: number },
): void {
  ctx.save();
  ctx.translate(x, y);
  ctx.font = `12px ${FONT}`;
  ctx.textBaseline = 'middle';
  const x0 = L.left;
  const y0 = L.top;
  const labelEvery = L.cellW >= 20 ? 1 : L.cellW >= 12 ? 2 : 5;

  // Layer labels and the sliding/full strip.
  grid.columns.forEach((c, i) => {
    const cx = L.colX(i);
    if (c.kind) {
      ctx.fillStyle = KIND_COLOR[c.kind];
      ctx.fillRect(cx + 1, y0 - 9, L.cellW - 2, 6);
    }
    if (c.layer === null || c.layer % labelEvery === 0 || c.kind === 'full') {
      ctx.fillStyle = c.kind === 'full' ? KIND_COLOR.full : '#5b6470';
      ctx.textAlign = 'center';
      ctx.font = `${c.kind === 'full' ? 'bold ' : ''}11px ${FONT}`;
      ctx.fillText(c.label, cx + L.cellW / 2, y0 - 20);
    }
  });
  ctx.font = `12px ${FONT}`;

  // Stage labels.
  ctx.textAlign = 'right';
  ctx.fillStyle = '#1b1f24';
  grid.stages.forEach((s, r) => ctx.fillText(s, x0 - 8, y0 + r * L.cellH + L.cellH / 2));

  // Cells: white where nothing was captured, a neutral tint where equal, the palette where different; a KV-shared
  // layer's k and v cells hatched (it has no projections: it reads an earlier layer's K/V).
  for (let i = 0; i < grid.columns.length; i++) {
    for (let r = 0; r < grid.stages.length; r++) {
      const cell = grid.at(i, r);
      const cx = L.colX(i) + 0.5;
      const cy = y0 + r * L.cellH + 0.5;
      if (!cell && isSharedKv(grid, i, r)) hatch(ctx, cx, cy, L.cellW - 1, L.cellH - 1);
      else {
        ctx.fillStyle = cell ? heatColor(cell.level) : MISSING_COLOR;
        ctx.fillRect(cx, cy, L.cellW - 1, L.cellH - 1);
      }
    }
  }
  // Separator between the per-layer stages (six; seven with per-layer inputs, eight with MoE layers, eleven with Gated
  // DeltaNet layers) and the final ones.
  const right = L.colX(grid.columns.length - 1) + L.cellW;
  const layerRows = grid.stages.length - FINAL_STAGES.length;
  ctx.strokeStyle = '#8a93a0';
  ctx.lineWidth = 1;
  ctx.beginPath();
  ctx.moveTo(x0, y0 + layerRows * L.cellH + 0.5);
  ctx.lineTo(right, y0 + layerRows * L.cellH + 0.5);
  ctx.stroke();

  const first = grid.cells.find((c) => c.first);
  if (first) outline(ctx, L, first.col, first.row, '#111827', 3);
  if (cursor) outline(ctx, L, cursor.col, cursor.row, '#2f6fde', 2);

  // Legend under the grid.
  let ly = y0 + grid.stages.length * L.cellH + 16;
  let lx = x0;
  const swatch = (color: string, text: string) => {
    if (lx + 22 + ctx.measureText(text).width > L.width && lx > x0) {
      lx = x0;
      ly += 18;
    }
    ctx.fillStyle = color;
    ctx.fillRect(lx, ly - 6, 12, 12);
    ctx.strokeStyle = '#c8ced6';
    ctx.strokeRect(lx + 0.5, ly - 5.5, 11, 11);
    ctx.fillStyle = '#1b1f24';
    ctx.textAlign = 'left';
    ctx.fillText(text, lx + 16, ly);
    lx += 22 + ctx.measureText(text).width;
  };
  swatch(heatColor(0), 'equal');
  for (const [lv, label] of legendStops(grid)) swatch(heatColor(lv), label);
  // Only the layer kinds the grid has: Gemma's sliding and full, Qwen3.5's linear (Gated DeltaNet) and full.
  const kinds = new Set(grid.columns.map((c) => c.kind));
  if (kinds.has('sliding')) swatch(KIND_COLOR.sliding, 'sliding layer');
  if (kinds.has('linear')) swatch(KIND_COLOR.linear, 'linear (Gated DeltaNet) layer');
  swatch(KIND_COLOR.full, 'full layer');
  if (grid.columns.some((c) => c.kvShared)) {
    const text = "KV-shared: no k, v (reads an earlier layer's)";
    swatch(SHARED_COLOR, text); // then hatch the swatch it drew
    hatch(ctx, lx - 22 - ctx.measureText(text).width + 0.5, ly - 5.5, 11, 11);
  }
  if (first) {
    if (lx + 22 + ctx.measureText('first divergence').width > L.width) {
      lx = x0;
      ly += 18;
    }
    ctx.strokeStyle = '#111827';
    ctx.lineWidth = 3;
    ctx.strokeRect(lx + 1.5, ly - 4.5, 9, 9);
    ctx.fillStyle = '#1b1f24';
    ctx.fillText('first divergence', lx + 16, ly);
  }
  ctx.restore();
}

/** Whether (col, row) is the k or v cell of a KV-shared layer. */
function isSharedKv(grid: HeatGrid, col: number, row: number): boolean {
  const stage = grid.stages[row];
  return grid.columns[col]?.kvShared === true && (stage === 'k' || stage === 'v');
}

/** A pale cell with thin diagonal lines: "nothing here by construction", unlike white "not captured". */
function hatch(ctx: CanvasRenderingContext2D, x: number, y: number, w: number, h: number): void {
  ctx.save();
  ctx.fillStyle = SHARED_COLOR;
  ctx.fillRect(x, y, w, h);
  ctx.beginPath();
  ctx.rect(x, y, w, h);
  ctx.clip();
  ctx.strokeStyle = '#b4bcc8';
  ctx.lineWidth = 1;
  ctx.beginPath();
  for (let d = -h; d < w; d += 6) {
    ctx.moveTo(x + d, y + h);
    ctx.lineTo(x + d + h, y);
  }
  ctx.stroke();
  ctx.restore();
}

function outline(
  ctx: CanvasRenderingContext2D,
  L: HeatLayout,
  col: number,
  row: number,
  color: string,
  w: number,
): void {
  ctx.strokeStyle = color;
  ctx.lineWidth = w;
  ctx.strokeRect(L.colX(col) + w / 2, L.top + row * L.cellH + w / 2, L.cellW - w, L.cellH - w);
}

/** One cell in words, for the live region and the hover readout. */
export function describeCell(grid: HeatGrid, col: number, row: number, cell: HeatCell | undefined): string {
  const c = grid.columns[col];
  const stage = grid.stages[row];
  // A grid with Gated DeltaNet layers is a Qwen3.5 report: its attention layers' own labels (no v_norm).
  const labels = grid.columns.some((x) => x.kind === 'linear') ? QWEN_STAGE_LABELS : STAGE_LABELS;
  const where = `${c?.layer === null ? 'head' : `layer ${c?.layer}${c?.kind ? ` (${c.kind})` : ''}`} · ${labels[stage]}`;
  if (!cell && isSharedKv(grid, col, row))
    return `${where}: none (a KV-shared layer has no k_proj / v_proj; it attends to an earlier layer's K/V)`;
  if (!cell) return `${where}: not captured`;
  const d = cell.diff;
  const pos = Number.isFinite(d.position) ? ` at position ${d.position}` : ' over all positions';
  if (d.bytesDiffering === 0 && d.maxUlp === 0)
    return `${where}${pos}: equal (${fmtInt(d.bytesTotal)} bytes)${cell.first ? ' — first divergence' : ''}`;
  return `${where}${pos}: ${fmtInt(d.bytesDiffering)} of ${fmtInt(d.bytesTotal)} bytes differ (${fmtPercent(d.bytesDiffering, d.bytesTotal)}), max abs ${fmtSci(d.maxAbs)}, max ULP ${fmtInt(d.maxUlp)}, NMSE ${fmtSci(d.nmse)}${cell.first ? ' — first divergence' : ''}`;
}

/** The on-screen heatmap: a focusable canvas plus a readout line. */
export function createHeatmapView(): { root: HTMLElement; update(grid: HeatGrid): void } {
  const canvas = el('canvas', { class: 'heatmap', tabindex: 0, role: 'img', 'data-testid': 'heatmap' });
  const readout = el(
    'p',
    { class: 'readout', 'aria-live': 'polite', 'data-testid': 'heatmap-readout' },
    'Move over a cell, or focus the map and use the arrow keys.',
  );
  const root = el('div', { class: 'heatmap-wrap' }, canvas, readout);
  let grid: HeatGrid | undefined;
  let layout: HeatLayout | undefined;
  let cursor: { col: number; row: number } | undefined;

  const paint = () => {
    if (!grid) return;
    const width = Math.max(480, root.clientWidth || 1000);
    layout = heatLayout(grid, width);
    const ctx = sizeCanvas(canvas, layout.width, layout.height);
    if (!ctx) return;
    drawHeatmap(ctx, grid, layout, 0, 0, document.activeElement === canvas ? cursor : undefined);
  };
  const show = (col: number, row: number) => {
    if (!grid) return;
    cursor = { col, row };
    readout.textContent = describeCell(grid, col, row, grid.at(col, row));
    paint();
  };

  canvas.addEventListener('keydown', (e) => {
    if (!grid || grid.columns.length === 0) return;
    const c = cursor ?? { col: 0, row: 0 };
    const moves: Record<string, [number, number]> = {
      ArrowLeft: [-1, 0],
      ArrowRight: [1, 0],
      ArrowUp: [0, -1],
      ArrowDown: [0, 1],
    };
    const m = moves[e.key];
    if (m) {
      e.preventDefault();
      show(
        Math.min(grid.columns.length - 1, Math.max(0, c.col + m[0])),
        Math.min(grid.stages.length - 1, Math.max(0, c.row + m[1])),
      );
    } else if (e.key === 'Home') {
      e.preventDefault();
      const f = grid.cells.find((x) => x.first);
      if (f) show(f.col, f.row);
    }
  });
  canvas.addEventListener('focus', () => {
    if (!grid) return;
    const f = grid.cells.find((x) => x.first);
    show(cursor?.col ?? f?.col ?? 0, cursor?.row ?? f?.row ?? 0);
  });
  canvas.addEventListener('blur', paint);
  canvas.addEventListener('mousemove', (e) => {
    if (!grid || !layout) return;
    const r = canvas.getBoundingClientRect();
    const col = layout.colAt(e.clientX - r.left);
    const row = Math.floor((e.clientY - r.top - layout.top) / layout.cellH);
    if (
      col >= 0 &&
      col < grid.columns.length &&
      row >= 0 &&
      row < grid.stages.length &&
      (col !== cursor?.col || row !== cursor?.row)
    )
      show(col, row);
  });
  onWidthChange(root, paint);

  return {
    root,
    update(g) {
      grid = g;
      cursor = undefined;
      const first = g.cells.find((c) => c.first);
      canvas.setAttribute(
        'aria-label',
        `Heatmap of ${g.columns.length} layer columns by ${g.stages.length} stages, ${g.metric === 'bytes' ? 'share of bytes differing' : 'log10 ULP difference'}` +
          (first ? `; first divergence at ${describeCell(g, first.col, first.row, first).split(':')[0]}` : ''),
      );
      readout.textContent = first
        ? describeCell(g, first.col, first.row, first)
        : 'Move over a cell, or focus the map and use the arrow keys.';
      paint();
    },
  };
}
