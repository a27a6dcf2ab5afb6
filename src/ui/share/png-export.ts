/**
 * The shareable picture of a report: a dedicated canvas (not a screenshot of the page) with the verdict,
 * the first divergence, the draws, the heatmap and a provenance line, drawn at 2 device pixels per CSS
 * pixel whatever the screen, so it stays sharp in an issue or a slide. The canvas text API only draws
 * text, so report strings cannot inject anything here either.
 */
import { familyName, type ProbeReport, type Provenance } from '../../parity/report.ts';
import { FONT } from '../common/canvas.ts';
import { fmtInt, fmtList, fmtMs, shortDigest } from '../common/format.ts';
import { drawHeatmap, heatLayout } from '../report/heatmap.ts';
import type { HeatGrid } from '../report/heatmap-model.ts';

export const PNG_WIDTH = 1200;
export const PNG_SCALE = 2;

export interface PngContent {
  report: ProbeReport;
  grid?: HeatGrid;
  gridTitle?: string;
}

/** Greedy word wrap; words longer than the line are cut. */
export function wrap(ctx: CanvasRenderingContext2D, text: string, width: number): string[] {
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

/** A top-down text cursor over a PNG canvas: the pieces every exported picture shares. */
export class PngPainter {
  y = 0;
  readonly pad = 32;
  readonly inner = PNG_WIDTH - 2 * 32;
  constructor(readonly ctx: CanvasRenderingContext2D) {}

  text(
    s: string,
    size: number,
    color: string,
    weight = '',
    width = this.inner,
    x = this.pad,
    lineH = Math.round(size * 1.4),
  ): void {
    const ctx = this.ctx;
    ctx.font = `${weight} ${size}px ${FONT}`.trim();
    ctx.fillStyle = color;
    ctx.textBaseline = 'top';
    ctx.textAlign = 'left';
    for (const l of wrap(ctx, s, width)) {
      ctx.fillText(l, x, this.y);
      this.y += lineH;
    }
  }

  /** White page, the dark title bar with `title` and the creation time. */
  header(title: string, createdAt: string): void {
    const ctx = this.ctx;
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(0, 0, PNG_WIDTH, 100_000);
    ctx.fillStyle = '#111827';
    ctx.fillRect(0, 0, PNG_WIDTH, 52);
    this.y = 15;
    this.text(title, 20, '#f3f4f6', '600');
    ctx.textAlign = 'right';
    ctx.font = `14px ${FONT}`;
    ctx.fillStyle = '#b8c0cc';
    ctx.fillText(createdAt.slice(0, 19).replace('T', ' '), PNG_WIDTH - this.pad, 18);
    this.y = 72;
  }

  /** The verdict label box with the summary and its consequence beside it; `color` overrides bad's red or green. */
  banner(label: string, bad: boolean, summary: string, consequence: string, color?: string): void {
    const ctx = this.ctx;
    const top = this.y;
    ctx.font = `bold 30px ${FONT}`;
    const bw = ctx.measureText(label).width + 36;
    ctx.fillStyle = color ?? (bad ? '#c0362c' : '#18794e');
    ctx.fillRect(this.pad, top, bw, 48);
    ctx.fillStyle = '#ffffff';
    ctx.textBaseline = 'middle';
    ctx.textAlign = 'left';
    ctx.fillText(label, this.pad + 18, top + 25);
    this.y = top + 2;
    this.text(summary, 17, '#1b1f24', '600', this.inner - bw - 20, this.pad + bw + 20, 23);
    this.text(consequence, 15, '#5b6470', '', this.inner - bw - 20, this.pad + bw + 20, 21);
    this.y = Math.max(this.y, top + 48) + 16;
  }

  /** A rule, then small grey lines. */
  footer(lines: string[]): void {
    this.ctx.fillStyle = '#dde1e6';
    this.ctx.fillRect(this.pad, this.y, this.inner, 1);
    this.y += 12;
    for (const l of lines) this.text(l, 13, '#5b6470');
  }

  /** Height used so far, with the bottom margin. */
  end(): number {
    return this.y + this.pad - 8;
  }
}

export function adapterLine(p: Pick<Provenance, 'adapter' | 'platform' | 'compiler'>): string {
  const adapter =
    [p.adapter.vendor, p.adapter.architecture, p.adapter.description].filter(Boolean).join(' ') || 'unknown adapter';
  // The compiler's math mode says how a Mac's numbers were computed (Metal relaxed) where the report records it.
  return `${adapter} · ${p.platform}${p.compiler ? ` · ${p.compiler.engine} → ${p.compiler.backend}, ${p.compiler.math}` : ''}`;
}

/** Paints everything; returns the height used. Called once to measure, once to draw. */
function paint(ctx: CanvasRenderingContext2D, c: PngContent): number {
  const r = c.report;
  const p = r.provenance;
  const P = new PngPainter(ctx);
  P.header(`◎ Ringside · ${familyName(p.target.modelType)} block-versus-chain probe`, p.createdAt);
  P.banner(r.verdict === 'diverges' ? 'DIVERGES' : 'EQUAL', r.verdict === 'diverges', r.summary, r.consequence);

  const fd = r.draws.find((d) => d.firstDivergence)?.firstDivergence;
  if (fd) P.text(fd.text, 18, '#c0362c', 'bold');
  for (const d of r.draws)
    P.text(
      `draw ${fmtInt(d.index)} · prompt ${fmtInt(d.promptLength)} tokens · ${d.verdict}: ${d.text}`,
      14,
      d.verdict === 'equal' ? '#18794e' : '#1b1f24',
    );
  P.y += 10;

  if (c.grid && c.grid.cells.length > 0) {
    P.text(c.gridTitle ?? 'Where the arms first differ', 15, '#1b1f24', '600');
    const L = heatLayout(c.grid, P.inner);
    drawHeatmap(ctx, c.grid, L, P.pad, P.y + 4);
    P.y += L.height + 14;
  }

  P.footer([
    adapterLine(p),
    `policy ${p.policy} · ${p.precision} activations · K = ${fmtInt(p.block)} · draws ${fmtList(p.drawLengths)} · prefill chunk ${fmtInt(p.prefillChunk)}${p.draftPosition ? ` · draft position ${p.draftPosition}` : ''} · total ${fmtMs(r.timings.totalMs)}`,
    `target ${p.target.modelType} ${fmtInt(p.target.layers)} layers, ${p.target.quantization} · digest ${shortDigest(p.target.digest)}` +
      (p.assistant ? ` · assistant ${p.assistant.modelType} · digest ${shortDigest(p.assistant.digest)}` : '') +
      ` · ringside ${p.app.version}`,
  ]);
  return P.end();
}

/** Renders `paint` to a canvas of PNG_WIDTH x height CSS pixels at PNG_SCALE (measured by a first dry run). */
export function renderCanvas(paintFn: (ctx: CanvasRenderingContext2D) => number): HTMLCanvasElement {
  const measure = document.createElement('canvas').getContext('2d');
  if (!measure) throw new Error('Canvas 2D is not available in this browser.');
  const height = Math.ceil(paintFn(measure));
  const canvas = document.createElement('canvas');
  canvas.width = PNG_WIDTH * PNG_SCALE;
  canvas.height = height * PNG_SCALE;
  const ctx = canvas.getContext('2d');
  if (!ctx) throw new Error('Canvas 2D is not available in this browser.');
  ctx.scale(PNG_SCALE, PNG_SCALE);
  paintFn(ctx);
  return canvas;
}

export function canvasPng(canvas: HTMLCanvasElement): Promise<Blob> {
  return new Promise((resolve, reject) =>
    canvas.toBlob((b) => (b ? resolve(b) : reject(new Error('PNG encoding failed'))), 'image/png'),
  );
}

/** Renders the report picture to a canvas of PNG_WIDTH x height CSS pixels at PNG_SCALE. */
export function renderReportCanvas(c: PngContent): HTMLCanvasElement {
  return renderCanvas((ctx) => paint(ctx, c));
}

export function reportPng(c: PngContent): Promise<Blob> {
  return canvasPng(renderReportCanvas(c));
}
