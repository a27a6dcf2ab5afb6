/**
 * A comparison for sharing, as the reports have it: a Markdown summary (the judgement or the draws on top, then what
 * each side is, with what differs marked) and a picture (the same, with the strip or both heatmaps), drawn with
 * the canvas text API only.
 */
import { VERDICT_TEXT } from '../../parity/trace-judgement.ts';
import { fmtInt, fmtPercent, fmtSci } from '../common/format.ts';
import { drawHeatmap, heatLayout } from '../report/heatmap.ts';
import { canvasPng, PngPainter, renderCanvas } from '../share/png-export.ts';
import { mdEscape } from '../share/share-codec.ts';
import {
  reportHeatmap,
  VERDICT_WORDS,
  type Comparison,
  type FactRow,
  type ProbeComparison,
  type TraceComparison,
} from './compare-model.ts';
import { drawStrip, stripLayout } from './compare-strip.ts';

const pct = (a: number, b: number) => (b > 0 ? fmtPercent(a, b) : '—');
const delta = (v: number | null) => (v === null ? '—' : fmtSci(v));

/** The judgement's counts in one line: "3 of 256 top-1 disagreements (1.17%); on decided positions (gap >= 2): 0 of 180". */
export function judgementLine(c: TraceComparison): string {
  const j = c.judgement;
  return `${fmtInt(j.disagreements)} of ${fmtInt(j.positions)} top-1 disagreements (${pct(j.disagreements, j.positions)}); on decided positions (gap ≥ ${c.decidedGap}): ${fmtInt(j.decidedDisagreements)} of ${fmtInt(j.decided)} (${pct(j.decidedDisagreements, j.decided)})`;
}

/** "|Δ logit| p50 ... · perplexity reference ..., candidate ... (+0.12%)" */
export function deltaLine(c: TraceComparison): string {
  const j = c.judgement;
  const rel = (j.perplexity.candidate / j.perplexity.reference - 1) * 100;
  return `|Δ logit| of the reference's top-1 where the candidate lists it: p50 ${delta(j.delta.p50)} · p90 ${delta(j.delta.p90)} · p99 ${delta(j.delta.p99)} · max ${delta(j.delta.max)} · perplexity reference ${fmtSci(j.perplexity.reference)}, candidate ${fmtSci(j.perplexity.candidate)} (${rel >= 0 ? '+' : ''}${Number.isFinite(rel) ? rel.toFixed(3) : '—'}%)`;
}

/** Ranks with disagreements: "rank 2: 3 · beyond the list (>8): 1", or '' without disagreements. */
export function ranksLine(c: TraceComparison): string {
  return Object.entries(c.judgement.ranks)
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${k.startsWith('>') ? `beyond the list (${k})` : `rank ${k}`}: ${fmtInt(n)}`)
    .join(' · ');
}

function factsMarkdown(rows: readonly FactRow[]): string[] {
  return [
    '| | A | B |',
    '|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${r.differs ? `**${mdEscape(r.label)}** ≠` : mdEscape(r.label)} | ${mdEscape(r.a)} | ${mdEscape(r.b)} |`,
    ),
  ];
}

function traceMarkdown(c: TraceComparison): string[] {
  const j = c.judgement;
  return [
    `### Ringside comparison of two traces: **${VERDICT_WORDS[j.verdict]}**`,
    '',
    mdEscape(VERDICT_TEXT[j.verdict]),
    '',
    `- reference (A): ${mdEscape(c.a.name)}: ${mdEscape(c.a.about)}`,
    `- candidate (B): ${mdEscape(c.b.name)}: ${mdEscape(c.b.about)}`,
    `- ${judgementLine(c)}`,
    `- ${deltaLine(c)}`,
    ...(ranksLine(c) ? [`- where the reference's top-1 landed in the candidate's list: ${ranksLine(c)}`] : []),
    '',
    '| reference top-2 gap | positions | disagreed |',
    '|---|---|---|',
    ...j.buckets.map(
      (b) => `| [${b.from}, ${b.to === null ? '∞' : b.to}) | ${fmtInt(b.positions)} | ${fmtInt(b.disagreed)} |`,
    ),
    '',
    ...factsMarkdown(c.facts),
  ];
}

function probeMarkdown(c: ProbeComparison): string[] {
  const outcome = (d: ProbeComparison['draws'][number]['a']) =>
    !d ? '—' : `${d.verdict}: ${mdEscape(d.text)}${d.firstDivergence ? `; ${mdEscape(d.firstDivergence.text)}` : ''}`;
  return [
    `### Ringside comparison of two probes: **${c.same ? 'same outcome' : 'the draws part'}**`,
    '',
    mdEscape(c.headline),
    '',
    `- A: ${mdEscape(c.a.name)}: ${mdEscape(c.a.report.summary)}`,
    `- B: ${mdEscape(c.b.name)}: ${mdEscape(c.b.report.summary)}`,
    '',
    '| draw | A | B |',
    '|---|---|---|',
    ...c.draws.map((d) => `| ${d.differs ? `**${d.index}** ≠` : d.index} | ${outcome(d.a)} | ${outcome(d.b)} |`),
    '',
    ...factsMarkdown(c.facts),
  ];
}

export function comparisonMarkdown(c: Comparison, link?: string): string {
  const lines = c.kind === 'traces' ? traceMarkdown(c) : probeMarkdown(c);
  if (link) lines.push('', `[Open the comparison](${link})`);
  return `${lines.join('\n')}\n`;
}

/** "ringside-compare-traces-undecided-only", "ringside-compare-probes-part" */
export function comparisonFileStem(c: Comparison): string {
  return c.kind === 'traces'
    ? `ringside-compare-traces-${c.judgement.verdict}`
    : `ringside-compare-probes-${c.same ? 'same' : 'part'}`;
}

/** The facts in two columns, the labels of differing rows in red and marked. */
function paintFacts(P: PngPainter, rows: readonly FactRow[]): void {
  const ctx = P.ctx;
  const colW = (P.inner - 150) / 2;
  P.text('A and B', 15, '#1b1f24', '600');
  for (const r of rows) {
    const top = P.y;
    P.text(`${r.differs ? '≠ ' : ''}${r.label}`, 13, r.differs ? '#c0362c' : '#5b6470', r.differs ? '600' : '', 140);
    const after = [P.y];
    P.y = top;
    P.text(r.a, 13, '#1b1f24', '', colW - 10, P.pad + 150);
    after.push(P.y);
    P.y = top;
    P.text(r.b, 13, '#1b1f24', '', colW - 10, P.pad + 150 + colW);
    after.push(P.y);
    P.y = Math.max(...after) + 2;
  }
  ctx.textAlign = 'left';
}

function paint(ctx: CanvasRenderingContext2D, c: Comparison, createdAt: string): number {
  const P = new PngPainter(ctx);
  if (c.kind === 'traces') {
    const j = c.judgement;
    P.header('◎ Ringside · two traces side by side', createdAt);
    P.banner(
      j.verdict === 'identical' ? 'IDENTICAL' : j.verdict === 'decided' ? 'DECIDED' : 'UNDECIDED ONLY',
      j.verdict !== 'identical',
      `${VERDICT_WORDS[j.verdict]}: ${VERDICT_TEXT[j.verdict]}`,
      judgementLine(c),
      // the rounding class reads amber, as on the page
      j.verdict === 'undecided-only' ? '#a15c00' : undefined,
    );
    P.text(`reference (A) ${c.a.name}: ${c.a.about}`, 14, '#1b1f24');
    P.text(`candidate (B) ${c.b.name}: ${c.b.about}`, 14, '#1b1f24');
    P.text(deltaLine(c), 13, '#5b6470');
    if (ranksLine(c))
      P.text(`where the reference's top-1 landed in the candidate's list: ${ranksLine(c)}`, 13, '#5b6470');
    P.text(
      `by the reference's top-2 gap: ${j.buckets.map((b) => `[${b.from}, ${b.to === null ? '∞' : b.to}) ${fmtInt(b.disagreed)}/${fmtInt(b.positions)}`).join(' · ')}`,
      13,
      '#5b6470',
    );
    P.y += 8;
    P.text(
      'Every position: top-1 kept (green) or not (red); decided by the reference (dark) or not',
      15,
      '#1b1f24',
      '600',
    );
    const L = stripLayout(c.strip.length, P.inner);
    drawStrip(ctx, c.strip, L, P.pad, P.y + 4);
    P.y += L.height + 12;
  } else {
    P.header('◎ Ringside · two probes side by side', createdAt);
    P.banner(c.same ? 'SAME' : 'PART', !c.same, c.headline, `A: ${c.a.report.summary} · B: ${c.b.report.summary}`);
    for (const d of c.draws) {
      const top = P.y;
      const color = d.differs ? '#c0362c' : '#1b1f24';
      const w = P.inner / 2 - 10;
      const say = (x: typeof d.a) => (x ? `draw ${x.index} · ${x.verdict}: ${x.text}` : `draw ${d.index}: absent`);
      P.text(say(d.a), 13, color, d.differs ? '600' : '', w);
      const after = P.y;
      P.y = top;
      P.text(say(d.b), 13, color, d.differs ? '600' : '', w, P.pad + P.inner / 2 + 10);
      P.y = Math.max(after, P.y) + 2;
    }
    P.y += 8;
    const maps = [reportHeatmap(c.a.report), reportHeatmap(c.b.report)];
    if (maps.some(Boolean)) {
      const top = P.y;
      let bottom = top;
      maps.forEach((m, i) => {
        const x = P.pad + i * (P.inner / 2 + 10);
        P.y = top;
        P.text(
          `${i === 0 ? 'A' : 'B'}: ${m ? `draw ${m.draw.index}, where the arms first differ` : 'nothing localized'}`,
          14,
          '#1b1f24',
          '600',
          P.inner / 2 - 10,
          x,
        );
        if (m) {
          const L = heatLayout(m.grid, P.inner / 2 - 10);
          drawHeatmap(ctx, m.grid, L, x, P.y + 4);
          P.y += L.height + 8;
        }
        bottom = Math.max(bottom, P.y);
      });
      P.y = bottom + 8;
    }
  }
  paintFacts(P, c.facts);
  P.y += 6;
  P.footer([`A: ${c.a.name} · B: ${c.b.name}`]);
  return P.end();
}

export const renderComparisonCanvas = (c: Comparison, createdAt: string): HTMLCanvasElement =>
  renderCanvas((ctx) => paint(ctx, c, createdAt));
export const comparisonPng = (c: Comparison, createdAt: string): Promise<Blob> =>
  canvasPng(renderComparisonCanvas(c, createdAt));
