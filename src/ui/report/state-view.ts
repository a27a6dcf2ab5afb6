/**
 * The recurrent state view of a Qwen3.5 report, where a Gemma report shows its ring: a Qwen3.5 target has no
 * sliding window. Each Gated DeltaNet layer carries a state S (value heads x key dim x value dim, f32) and a conv
 * window of raw rows; its full-attention layers keep a linear KV cache. The table shows, per linear layer and
 * block token t, whether the block arm's staged S after t equals the chain arm's committed S after t + 1 steps
 * (src/parity/state-view.ts), coloured like the heatmap. Text nodes only.
 */
import type { StateView } from '../../parity/report.ts';
import { append, clear, el } from '../common/dom.ts';
import { fmtInt, fmtPercent, fmtSci } from '../common/format.ts';
import { bytesLevel, heatColor } from './heatmap-model.ts';

/** Pure facts of a state view (tested in Node): how many (layer, token) states differ, and the first one. */
export function stateFacts(s: StateView): {
  tokens: number;
  differing: number;
  total: number;
  first: { layer: number; token: number } | null;
} {
  const tokens = Math.max(0, ...s.layers.map((l) => l.rows.length));
  let differing = 0;
  let total = 0;
  let first: { layer: number; token: number } | null = null;
  for (let t = 0; t < tokens; t++)
    for (const l of s.layers) {
      const r = l.rows[t];
      if (!r) continue;
      total++;
      if (r.bytesDiffering > 0) {
        differing++;
        first ??= { layer: l.layer, token: t };
      }
    }
  return { tokens, differing, total, first };
}

/** The view's text: what the state is, how the arms carry it, and what this draw found. */
export function describeState(s: StateView): string {
  const f = stateFacts(s);
  const shape = `${fmtInt(s.valueHeads)} × ${fmtInt(s.keyHeadDim)} × ${fmtInt(s.valueHeadDim)} f32`;
  const window = `the last ${fmtInt(s.convKernel - 1)} raw in_proj_qkv rows of ${fmtInt(s.convChannels)} channels`;
  const full = s.fullLayers.length
    ? ` Full-attention layers (${s.fullLayers.join(', ')}) keep a linear KV cache, one row per position: there is no ring.`
    : '';
  const found =
    f.total === 0
      ? 'No states were compared.'
      : f.differing === 0
        ? `All ${fmtInt(f.total)} states are equal in every byte.`
        : `${fmtInt(f.differing)} of ${fmtInt(f.total)} states differ; the first is layer ${f.first!.layer} after block token ${f.first!.token} (position ${fmtInt(s.blockStart + f.first!.token)}).`;
  return (
    `Each Gated DeltaNet layer carries a recurrent state S (${shape}) and a conv window (${window}).${full} ` +
    `A chain step (M = 1) commits S after its token; the verify block (M = ${fmtInt(f.tokens)}) stages S after each of its tokens and commit(n) keeps the state after token n − 1. ` +
    `Each cell compares the two after block token t, byte for byte. ${found}`
  );
}

export function createStateView(): { root: HTMLElement; update(s: StateView | undefined, drawLabel: string): void } {
  const caption = el('p', { class: 'small', 'data-testid': 'state-caption' });
  const tableBox = el('div', { class: 'table-wrap' });
  const root = el('div', { class: 'state-wrap', 'data-testid': 'state-view', hidden: true }, tableBox, caption);
  return {
    root,
    update(s, drawLabel) {
      root.hidden = !s;
      clear(tableBox);
      if (!s) {
        caption.textContent = '';
        return;
      }
      caption.textContent = `${drawLabel}: ${describeState(s)}`;
      const tokens = stateFacts(s).tokens;
      const head = el(
        'tr',
        {},
        el('th', { scope: 'col' }, 'layer'),
        ...Array.from({ length: tokens }, (_, t) =>
          el('th', { scope: 'col' }, `S after token ${t} (pos ${fmtInt(s.blockStart + t)})`),
        ),
      );
      const body = s.layers.map((l) =>
        el(
          'tr',
          { 'data-layer': l.layer },
          el('th', { scope: 'row' }, `layer ${l.layer} (linear)`),
          ...Array.from({ length: tokens }, (_, t) => {
            const r = l.rows[t];
            if (!r) return el('td', { class: 'state-cell' }, '—');
            const equal = r.bytesDiffering === 0;
            const level = bytesLevel(r.bytesDiffering, r.bytesTotal);
            return el(
              'td',
              {
                class: `state-cell ${equal ? 'eq' : 'ne'}`,
                style: `background: ${heatColor(level)}${level > 0.6 ? '; color: #fff' : ''}`,
                title: `${fmtInt(r.bytesDiffering)} of ${fmtInt(r.bytesTotal)} bytes differ, max abs ${fmtSci(r.maxAbs)}, max ULP ${fmtInt(r.maxUlp)}, NMSE ${fmtSci(r.nmse)}`,
              },
              equal ? 'equal' : `${fmtPercent(r.bytesDiffering, r.bytesTotal)} of bytes · max abs ${fmtSci(r.maxAbs)}`,
            );
          }),
        ),
      );
      append(
        tableBox,
        el(
          'table',
          { class: 'data compact state-table', 'data-testid': 'state-table' },
          el('caption', {}, 'Recurrent state S of each Gated DeltaNet layer: block arm versus chain arm'),
          el('thead', {}, head),
          el('tbody', {}, ...body),
        ),
      );
    },
  };
}
