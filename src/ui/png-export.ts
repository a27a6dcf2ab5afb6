/**
 * The shareable picture of a report: a dedicated canvas (not a screenshot of the page) with the verdict,
 * the first divergence, the draws, the heatmap and a provenance line, drawn at 2 device pixels per CSS
 * pixel whatever the screen, so it stays sharp in an issue or a slide. The canvas text API only draws
 * text, so report strings cannot inject anything here either.
 */
import type { ProbeReport } from '../parity/report.ts';
import { FONT } from './canvas.ts';
import { fmtInt, fmtList, fmtMs, shortDigest } from './format.ts';
import { drawHeatmap, heatLayout } from './heatmap.ts';
import type { HeatGrid } from './heatmap-model.ts';

export const PNG_WIDTH = 1200;
export const PNG_SCALE = 2;

export interface PngContent {
  report: ProbeReport;
  grid?: HeatGrid;
  gridTitle?: string;
}

/** Greedy word wrap; words longer than the line are cut. */
function wrap(ctx: CanvasRenderingContext2D, text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    const next = line ? `${line} ${word}` : word;
    if (ctx.measureText(next).width <= width || !line) line = next;
    else {
      lines.push(line);
      line = word;
    }
    while (ctx.measureText(line).width > width && line.length > 1) {
      let cut = line.length - 1;
      while (cut > 1 && ctx.measureText(line.slice(0, cut)).width > width) cut--;
      lines.push(line.slice(0, cut));
      line = line.slice(cut);
    }
  }
  if (line) lines.push(line);
  return lines.slice(0, 12);
}

/** Paints everything; returns the height used. Called once to measure, once to draw. */
function paint(ctx: CanvasRenderingContext2D, c: PngContent): number {
  const r = c.report;
  const p = r.provenance;
  const W = PNG_WIDTH;
  const pad = 32;
  const inner = W - 2 * pad;
  const diverges = r.verdict === 'diverges';
  let y = 0;
  const text = (s: string, size: number, color: string, weight = '', width = inner, x = pad, lineH = Math.round(size * 1.4)) => {
    ctx.font = `${weight} ${size}px ${FONT}`.trim();
    ctx.fillStyle = color;
    ctx.textBaseline = 'top';
    ctx.textAlign = 'left';
    for (const l of wrap(ctx, s, width)) {
      ctx.fillText(l, x, y);
      y += lineH;
    }
  };

  ctx.fillStyle = '#ffffff';
  ctx.fillRect(0, 0, W, 100_000);
  ctx.fillStyle = '#111827';
  ctx.fillRect(0, 0, W, 52);
  y = 15;
  text('◎ Ringside · Gemma 4 block-versus-chain probe', 20, '#f3f4f6', '600');
  y = 16;
  ctx.textAlign = 'right';
  ctx.font = `14px ${FONT}`;
  ctx.fillStyle = '#b8c0cc';
  ctx.fillText(p.createdAt.slice(0, 19).replace('T', ' '), W - pad, 18);

  // Verdict banner.
  y = 72;
  const bannerTop = y;
  ctx.font = `bold 30px ${FONT}`;
  const label = diverges ? 'DIVERGES' : 'EQUAL';
  const bw = ctx.measureText(label).width + 36;
  ctx.fillStyle = diverges ? '#c0362c' : '#18794e';
  ctx.fillRect(pad, bannerTop, bw, 48);
  ctx.fillStyle = '#ffffff';
  ctx.textBaseline = 'middle';
  ctx.textAlign = 'left';
  ctx.fillText(label, pad + 18, bannerTop + 25);
  y = bannerTop + 2;
  text(r.summary, 17, '#1b1f24', '600', inner - bw - 20, pad + bw + 20, 23);
  text(r.consequence, 15, '#5b6470', '', inner - bw - 20, pad + bw + 20, 21);
  y = Math.max(y, bannerTop + 48) + 16;

  const fd = r.draws.find((d) => d.firstDivergence)?.firstDivergence;
  if (fd) text(fd.text, 18, '#c0362c', 'bold');
  for (const d of r.draws) text(`draw ${fmtInt(d.index)} · prompt ${fmtInt(d.promptLength)} tokens · ${d.verdict}: ${d.text}`, 14, d.verdict === 'equal' ? '#18794e' : '#1b1f24');
  y += 10;

  if (c.grid && c.grid.cells.length > 0) {
    text(c.gridTitle ?? 'Where the arms first differ', 15, '#1b1f24', '600');
    const L = heatLayout(c.grid, inner);
    drawHeatmap(ctx, c.grid, L, pad, y + 4);
    y += L.height + 14;
  }

  // Provenance.
  ctx.fillStyle = '#dde1e6';
  ctx.fillRect(pad, y, inner, 1);
  y += 12;
  const adapter = [p.adapter.vendor, p.adapter.architecture, p.adapter.description].filter(Boolean).join(' ') || 'unknown adapter';
  text(`${adapter} · ${p.platform}`, 13, '#5b6470');
  text(`policy ${p.policy} · ${p.precision} activations · K = ${fmtInt(p.block)} · draws ${fmtList(p.drawLengths)} · prefill chunk ${fmtInt(p.prefillChunk)}${p.draftPosition ? ` · draft position ${p.draftPosition}` : ''} · total ${fmtMs(r.timings.totalMs)}`, 13, '#5b6470');
  text(`target ${p.target.modelType} ${fmtInt(p.target.layers)} layers, ${p.target.quantization} · digest ${shortDigest(p.target.digest)}` +
    (p.assistant ? ` · assistant ${p.assistant.modelType} · digest ${shortDigest(p.assistant.digest)}` : '') + ` · ringside ${p.app.version}`, 13, '#5b6470');
  return y + pad - 8;
}

/** Renders the report picture to a canvas of PNG_WIDTH x height CSS pixels at PNG_SCALE. */
export function renderReportCanvas(c: PngContent): HTMLCanvasElement {
  const measure = document.createElement('canvas').getContext('2d');
  if (!measure) throw new Error('Canvas 2D is not available in this browser.');
  const height = Math.ceil(paint(measure, c));
  const canvas = document.createElement('canvas');
  canvas.width = PNG_WIDTH * PNG_SCALE;
  canvas.height = height * PNG_SCALE;
  const ctx = canvas.getContext('2d');
  if (!ctx) throw new Error('Canvas 2D is not available in this browser.');
  ctx.scale(PNG_SCALE, PNG_SCALE);
  paint(ctx, c);
  return canvas;
}

export function reportPng(c: PngContent): Promise<Blob> {
  const canvas = renderReportCanvas(c);
  return new Promise((resolve, reject) => canvas.toBlob((b) => (b ? resolve(b) : reject(new Error('PNG encoding failed'))), 'image/png'));
}
