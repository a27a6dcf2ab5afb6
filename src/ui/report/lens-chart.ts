/**
 * Per-layer logit lens: how far the block arm's next-token distribution (read through the final norm and
 * LM head at each layer) is from the chain arm's, as KL on a log axis, with top-1 agreement per layer.
 * Answers "does the difference born at layer N grow into a different argmax by the head?".
 */
import type { LensLayer } from '../../parity/report.ts';
import { el } from '../common/dom.ts';
import { FONT, onWidthChange, sizeCanvas } from '../common/canvas.ts';
import { fmtSci } from '../common/format.ts';
import type { PositionPick } from './heatmap-model.ts';

export interface LensPoint {
  layer: number;
  /** Largest KL over the picked positions (NaN when none). */
  kl: number;
  /** Every picked position agrees on top-1. */
  agree: boolean;
}

/** Pure: one point per layer for a position pick. */
export function lensPoints(lens: LensLayer[], pick: PositionPick): LensPoint[] {
  return lens
    .filter((l) => Number.isFinite(l.layer))
    .map((l) => {
      const rows = pick === 'all' ? l.rows : l.rows.filter((r) => r.position === pick);
      const kls = rows.map((r) => r.kl).filter(Number.isFinite);
      return {
        layer: l.layer,
        kl: kls.length ? Math.max(...kls) : NaN,
        agree: rows.length > 0 && rows.every((r) => r.top1Agree),
      };
    })
    .sort((a, b) => a.layer - b.layer);
}

export function createLensChart(): { root: HTMLElement; update(points: LensPoint[], equalDraw: boolean): void } {
  const canvas = el('canvas', { class: 'lens', role: 'img', 'data-testid': 'lens-chart' });
  const note = el('p', { class: 'muted small' });
  const root = el('div', { class: 'lens-wrap' }, canvas, note);
  let points: LensPoint[] = [];

  const paint = () => {
    const w = Math.max(420, root.clientWidth || 900);
    const h = 204;
    const ctx = sizeCanvas(canvas, w, h);
    if (!ctx || points.length === 0) return;
    const left = 64;
    const right = 12;
    const top = 12;
    const plotH = 120;
    const colW = (w - left - right) / points.length;
    const nonzero = points.map((p) => p.kl).filter((k) => k > 0);
    // Log axis from the smallest to the largest non-zero KL, at least 3 decades so a flat run reads flat.
    const hi = nonzero.length ? Math.ceil(Math.log10(Math.max(...nonzero))) : 0;
    const lo = nonzero.length ? Math.min(hi - 3, Math.floor(Math.log10(Math.min(...nonzero)))) : -3;
    const yOf = (kl: number) => top + plotH - ((Math.log10(kl) - lo) / (hi - lo)) * plotH;

    ctx.font = `11px ${FONT}`;
    ctx.textBaseline = 'middle';
    ctx.strokeStyle = '#e4e7eb';
    ctx.fillStyle = '#5b6470';
    ctx.textAlign = 'right';
    const step = Math.max(1, Math.ceil((hi - lo) / 4));
    for (let e = lo; e <= hi; e += step) {
      const y = yOf(10 ** e);
      ctx.beginPath();
      ctx.moveTo(left, y + 0.5);
      ctx.lineTo(w - right, y + 0.5);
      ctx.stroke();
      ctx.fillText(`1e${e}`, left - 6, y);
    }
    ctx.save();
    ctx.translate(12, top + plotH / 2);
    ctx.rotate(-Math.PI / 2);
    ctx.textAlign = 'center';
    ctx.fillText('KL(chain‖block)', 0, 0);
    ctx.restore();

    const labelEvery = colW >= 18 ? 1 : colW >= 9 ? 2 : 5;
    points.forEach((p, i) => {
      const x = left + i * colW;
      if (p.kl > 0) {
        ctx.fillStyle = p.agree ? '#2f6fde' : '#c0362c';
        const y = yOf(p.kl);
        ctx.fillRect(x + colW * 0.15, y, colW * 0.7, top + plotH - y);
      } else if (p.kl === 0) {
        ctx.fillStyle = '#18794e';
        ctx.fillRect(x + colW * 0.15, top + plotH - 2, colW * 0.7, 2);
      }
      // Top-1 agreement strip.
      ctx.fillStyle = Number.isNaN(p.kl) && !p.agree ? '#e4e7eb' : p.agree ? '#18794e' : '#c0362c';
      ctx.fillRect(x + 1, top + plotH + 8, colW - 2, 8);
      if (p.layer % labelEvery === 0) {
        ctx.fillStyle = '#5b6470';
        ctx.textAlign = 'center';
        ctx.fillText(String(p.layer), x + colW / 2, top + plotH + 26);
      }
    });
    ctx.textAlign = 'right';
    ctx.fillStyle = '#1b1f24';
    ctx.fillText('top-1', left - 6, top + plotH + 12);
    ctx.fillText('layer', left - 6, top + plotH + 26);
    ctx.textAlign = 'left';
    ctx.fillStyle = '#5b6470';
    ctx.fillText(
      'blue bar: KL, argmax agrees · red: argmax differs · green line: KL exactly 0',
      left,
      top + plotH + 46,
    );
    ctx.fillText('top-1 strip: green where the argmax agrees, red where it differs', left, top + plotH + 60);
  };
  onWidthChange(root, paint);

  return {
    root,
    update(p, equalDraw) {
      points = p;
      const disagree = p.filter((x) => !x.agree).map((x) => x.layer);
      const maxKl = Math.max(0, ...p.map((x) => (Number.isFinite(x.kl) ? x.kl : 0)));
      const text =
        p.length === 0
          ? equalDraw
            ? 'The arms agree: no logit lens needed.'
            : 'No logit lens in this draw (the probe records one when a draw diverges and Localize is on).'
          : `${p.length} layers; largest KL ${fmtSci(maxKl)}; top-1 ${disagree.length === 0 ? 'agrees at every layer' : `differs at layer${disagree.length > 1 ? 's' : ''} ${disagree.slice(0, 12).join(', ')}${disagree.length > 12 ? ', …' : ''}`}.`;
      note.textContent = text;
      canvas.hidden = p.length === 0;
      canvas.setAttribute('aria-label', `Logit lens: ${text}`);
      paint();
    },
  };
}
