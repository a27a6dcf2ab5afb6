/**
 * The ring diagram for the long draw: which sequence position sits in each physical slot of a sliding
 * layer's rotating cache, where the verify block's rows land, and in what order each arm reads the keys.
 * Classic decode reads the ring in physical slot order (a rotation of chronological order once the ring has
 * wrapped); the buffered verify reads chronological order. Same keys, different summation order: that is
 * the mechanism docs/MODEL.md section 7 names for the 12B's layer-0 divergence.
 */
import type { RingView } from '../../parity/report.ts';
import { el } from '../common/dom.ts';
import { FONT, onWidthChange, sizeCanvas } from '../common/canvas.ts';
import { fmtInt, fmtList } from '../common/format.ts';

export interface RingFacts {
  window: number;
  filled: number;
  minPos: number;
  maxPos: number;
  /** Slot holding the oldest position (where chronological order starts), or -1 when empty. */
  oldestSlot: number;
  blockPositions: number[];
  blockSlots: number[];
  /** Positions in physical slot order with the block written (what the chain's last row reads). */
  physical: (number | null)[];
  /** The same keys in chronological order (what the block arm reads). */
  chronological: number[];
}

/** Pure: derived facts of a ring view (tested in Node). */
export function ringFacts(r: RingView): RingFacts {
  const W = r.window;
  const physical: (number | null)[] = Array.from({ length: W }, (_, s) => {
    const p = r.slotPositions[s];
    return p === null || p === undefined || !Number.isFinite(p) ? null : p;
  });
  const blockPositions = r.blockSlots.map((_, t) => r.blockStart + t);
  const blockSlots = r.blockSlots.filter((s) => Number.isInteger(s) && s >= 0 && s < W);
  let minPos = Infinity;
  let maxPos = -Infinity;
  let oldestSlot = -1;
  physical.forEach((p, s) => {
    if (p === null) return;
    if (p < minPos) {
      minPos = p;
      oldestSlot = s;
    }
    maxPos = Math.max(maxPos, p);
  });
  const filled = physical.filter((p) => p !== null).length;
  // After the chain has written every block row, those slots hold the block positions.
  const after = physical.slice();
  blockSlots.forEach((s, t) => (after[s] = blockPositions[t]));
  const chronological = after.filter((p): p is number => p !== null).sort((a, b) => a - b);
  return { window: W, filled, minPos, maxPos, oldestSlot, blockPositions, blockSlots, physical: after, chronological };
}

const ORDER_WORDS: Record<RingView['blockOrder'], string> = {
  physical: 'physical slot order, like the chain',
  chronological: 'chronological order',
  'masked-chronological': 'chronological order over the buffered cache, under an additive window mask',
};

/** Ink for a label on a slot of ageColor: dark on the pale (old) half, white on the dark (recent) half. */
function ageInk(p: number, lo: number, hi: number): string {
  const f = hi > lo ? (p - lo) / (hi - lo) : 1;
  return f > 0.55 ? '#ffffff' : '#1b1f24';
}

/** Age colour: old positions pale, recent dark; block rows orange. */
function ageColor(p: number | null, lo: number, hi: number, block: boolean): string {
  if (block) return '#e8590c';
  if (p === null) return '#eef0f3';
  const f = hi > lo ? (p - lo) / (hi - lo) : 1;
  const c = [Math.round(198 - f * 160), Math.round(219 - f * 120), Math.round(239 - f * 80)];
  return `rgb(${c[0]}, ${c[1]}, ${c[2]})`;
}

export function describeRing(r: RingView, f: RingFacts): string {
  const filled =
    f.filled === 0
      ? 'empty'
      : `positions ${fmtInt(f.minPos)}–${fmtInt(f.maxPos)} in ${fmtInt(f.filled)} of ${fmtInt(f.window)} slots, the oldest in slot ${fmtInt(f.oldestSlot)}`;
  const rows = f.blockPositions.length;
  const slots = fmtList(f.blockSlots);
  const at = (p: number | undefined) => (p === undefined ? '—' : fmtInt(p));
  return (
    `Window ${fmtInt(f.window)} slots. Before the block the ring holds ${filled}. ` +
    `The block's ${rows} row${rows === 1 ? '' : 's'} (positions ${at(f.blockPositions[0])}–${at(f.blockPositions[rows - 1])}) go to slot${rows === 1 ? '' : 's'} ${slots || '—'}. ` +
    `Chain (M = 1) reads keys in physical slot order starting at slot 0${f.oldestSlot > 0 ? ` (position ${at(f.physical[0] ?? undefined)}), so chronological order wraps at slot ${fmtInt(f.oldestSlot)}` : ''}; ` +
    `block (M = ${rows}) reads them in ${ORDER_WORDS[r.blockOrder]}.`
  );
}

/** Paints the ring and the two reading orders at the canvas's width (nothing without a ring view). */
function paintRing(canvas: HTMLCanvasElement, root: HTMLElement, ring: RingView | undefined): void {
  const w = Math.max(560, root.clientWidth || 900);
  const h = 290;
  const ctx = sizeCanvas(canvas, w, h);
  if (!ctx || !ring) return;
  ctx.textBaseline = 'middle';
  const scene = ringScene(ring);
  drawRing(ctx, scene);
  drawReadingOrders(ctx, w, scene);
}

/** What both drawings read: the ring's facts, the span of positions the colours run over, the block's slots. */
interface RingScene {
  f: RingFacts;
  ring: RingView;
  /** Oldest and newest position shown (the ring's and the block's), the ends of the colour scale. */
  lo: number;
  hi: number;
  isBlock: Set<number>;
}

function ringScene(ring: RingView): RingScene {
  const f = ringFacts(ring);
  return {
    f,
    ring,
    lo: Math.min(f.minPos, ...f.blockPositions),
    hi: Math.max(f.maxPos, ...f.blockPositions),
    isBlock: new Set(f.blockSlots),
  };
}

function drawRing(ctx: CanvasRenderingContext2D, scene: RingScene): void {
  const { f, ring, lo, hi, isBlock } = scene;
  const W = f.window;
  // The ring: slot 0 at the top, slots clockwise. Room above it for the slot-0 and oldest-slot labels.
  const cx = 140;
  const cy = 156;
  const R = 104;
  const r0 = 64;
  const gap = W <= 64 ? 0.02 : 0;
  // Positions inside the band where they fit: 12 px type, smaller only as far as a slot's width needs (never under 10).
  const slotArc = (2 * Math.PI * ((R + r0) / 2)) / W;
  const labelFont = (text: string) => {
    for (let px = 12; px >= 10; px--) {
      ctx.font = `${px}px ${FONT}`;
      if (ctx.measureText(text).width <= slotArc - 3) return true;
    }
    return false;
  };
  for (let s = 0; s < W; s++) {
    const a0 = -Math.PI / 2 + (2 * Math.PI * s) / W + gap;
    const a1 = -Math.PI / 2 + (2 * Math.PI * (s + 1)) / W - gap;
    ctx.beginPath();
    ctx.arc(cx, cy, R, a0, a1);
    ctx.arc(cx, cy, r0, a1, a0, true);
    ctx.closePath();
    ctx.fillStyle = ageColor(isBlock.has(s) ? null : (ring.slotPositions[s] ?? null), lo, hi, isBlock.has(s));
    ctx.fill();
    const p = f.physical[s];
    if (p !== null && labelFont(fmtInt(p))) {
      const am = (a0 + a1) / 2;
      ctx.fillStyle = isBlock.has(s) ? '#fff' : ageInk(p, lo, hi);
      ctx.textAlign = 'center';
      ctx.fillText(fmtInt(p), cx + (Math.cos(am) * (R + r0)) / 2, cy + (Math.sin(am) * (R + r0)) / 2);
    }
  }
  // Block rows: a wedge outside the ring with a minimum width, so 4 of 1024 slots stay visible.
  ctx.fillStyle = '#e8590c';
  for (const s of f.blockSlots) {
    const am = -Math.PI / 2 + (2 * Math.PI * (s + 0.5)) / W;
    const half = Math.max(Math.PI / W, 0.025);
    ctx.beginPath();
    ctx.arc(cx, cy, R + 9, am - half, am + half);
    ctx.arc(cx, cy, R + 2, am + half, am - half, true);
    ctx.closePath();
    ctx.fill();
  }
  // A slot boundary marked outside the ring, past the block wedges: the tick never crosses a slot's label.
  const mark = (slot: number, text: string, color: string, side: 'left' | 'right') => {
    const a = -Math.PI / 2 + (2 * Math.PI * slot) / W;
    ctx.strokeStyle = color;
    ctx.lineWidth = 2;
    ctx.beginPath();
    ctx.moveTo(cx + Math.cos(a) * (R + 12), cy + Math.sin(a) * (R + 12));
    ctx.lineTo(cx + Math.cos(a) * (R + 24), cy + Math.sin(a) * (R + 24));
    ctx.stroke();
    ctx.fillStyle = color;
    ctx.font = `600 13px ${FONT}`;
    let x = cx + Math.cos(a) * (R + 30);
    let y = cy + Math.sin(a) * (R + 32);
    // Near the top, labels go on one line above the ring, slot 0 to the left and the other to the right.
    if (y < cy - R + 12 && Math.abs(x - cx) < 80) {
      y = cy - R - 32;
      x = side === 'right' ? Math.min(x, cx) - 6 : Math.max(x, cx) + 6;
      ctx.textAlign = side;
    } else ctx.textAlign = Math.cos(a) < -0.2 ? 'right' : Math.cos(a) > 0.2 ? 'left' : 'center';
    ctx.fillText(text, x, y);
  };
  mark(0, 'slot 0', '#1b1f24', 'right');
  if (f.oldestSlot > 0) mark(f.oldestSlot, `oldest: pos ${fmtInt(f.minPos)}`, '#2f6fde', 'left');
  ctx.fillStyle = '#1b1f24';
  ctx.textAlign = 'center';
  ctx.font = `600 14px ${FONT}`;
  ctx.fillText(`W = ${fmtInt(W)}`, cx, cy - 8);
  ctx.font = `12px ${FONT}`;
  ctx.fillStyle = '#5b6470';
  ctx.fillText('clockwise', cx, cy + 10);
}

function drawReadingOrders(ctx: CanvasRenderingContext2D, w: number, scene: RingScene): void {
  const { f, ring, lo, hi, isBlock } = scene;
  const W = f.window;
  // The two reading orders as strips of the same colours.
  const sx = 300;
  const sw = w - sx - 16;
  const strip = (
    y: number,
    title: string,
    seq: (number | null)[],
    blockAt: (i: number) => boolean,
    first: string,
    last: string,
  ) => {
    ctx.textAlign = 'left';
    ctx.fillStyle = '#1b1f24';
    ctx.font = `13px ${FONT}`;
    ctx.fillText(title, sx, y - 13);
    const cw = sw / Math.max(1, seq.length);
    seq.forEach((p, i) => {
      ctx.fillStyle = ageColor(p, lo, hi, blockAt(i));
      ctx.fillRect(sx + i * cw, y, Math.max(cw - (cw > 4 ? 1 : 0), 0.6), 24);
    });
    ctx.fillStyle = '#5b6470';
    ctx.font = `12px ${FONT}`;
    ctx.fillText(first, sx, y + 37);
    ctx.textAlign = 'right';
    ctx.fillText(last, sx + sw, y + 37);
  };
  const blockPosSet = new Set(f.blockPositions);
  const pos = (p: number | null | undefined, none: string) => (p === null || p === undefined ? none : fmtInt(p));
  strip(
    52,
    'Chain arm (M = 1): keys in physical slot order',
    f.physical,
    (i) => isBlock.has(i),
    `slot 0: pos ${pos(f.physical[0], 'empty')}`,
    `slot ${fmtInt(W - 1)}: pos ${pos(f.physical[W - 1], 'empty')}`,
  );
  strip(
    152,
    `Block arm (M = ${f.blockPositions.length}): keys in ${ring.blockOrder === 'physical' ? 'physical' : 'chronological'} order`,
    ring.blockOrder === 'physical' ? f.physical : f.chronological,
    ring.blockOrder === 'physical' ? (i) => isBlock.has(i) : (i) => blockPosSet.has(f.chronological[i]),
    `pos ${ring.blockOrder === 'physical' ? pos(f.physical[0], '—') : pos(f.chronological[0], '—')}`,
    `pos ${ring.blockOrder === 'physical' ? pos(f.physical[W - 1], '—') : pos(f.chronological[f.chronological.length - 1], '—')}`,
  );
  ctx.textAlign = 'left';
  ctx.font = `12px ${FONT}`;
  ctx.fillStyle = '#e8590c';
  ctx.fillRect(sx, 246, 13, 13);
  ctx.fillStyle = '#1b1f24';
  ctx.fillText('block rows', sx + 18, 253);
  ctx.fillStyle = 'rgb(198, 219, 239)';
  ctx.fillRect(sx + 110, 246, 13, 13);
  ctx.fillStyle = 'rgb(38, 99, 159)';
  ctx.fillRect(sx + 125, 246, 13, 13);
  ctx.fillStyle = '#1b1f24';
  ctx.fillText('older → newer position', sx + 144, 253);
}

export function createRingView(): { root: HTMLElement; update(r: RingView | undefined, drawLabel: string): void } {
  const canvas = el('canvas', { class: 'ring', role: 'img', 'data-testid': 'ring-view' });
  const caption = el('p', { class: 'small', 'data-testid': 'ring-caption' });
  const root = el('div', { class: 'ring-wrap' }, canvas, caption);
  let ring: RingView | undefined;

  const paint = () => paintRing(canvas, root, ring);
  onWidthChange(root, paint);

  return {
    root,
    update(r, drawLabel) {
      ring = r;
      caption.textContent = r
        ? `${drawLabel}: ${describeRing(r, ringFacts(r))}`
        : 'This report has no ring view (the probe records one for the long draw).';
      canvas.hidden = !r;
      canvas.setAttribute('aria-label', caption.textContent);
      paint();
    },
  };
}
