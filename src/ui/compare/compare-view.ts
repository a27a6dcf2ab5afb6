/**
 * The Compare card: two sides, A and B, each a run of this visit or a file (an mlxcel logit-trace TSV, a Ringside
 * probe or trace report; drop two files on the card, or choose them), and the two side by side (compare-model.ts):
 * for traces the judgement on top and a strip of every position, then the gap buckets, ranks, |delta logit| and what
 * each side is; for probe reports the draws, first divergences, both heatmaps and the provenance, what differs
 * marked. Exports like a report's (PNG, JSON, Markdown, link): the JSON and the link carry both inputs, so they open
 * the same comparison again. Test ids start with "compare-".
 */
import { VERDICT_TEXT } from '../../parity/trace-judgement.ts';
import type { TraceArm } from '../../parity/trace-files.ts';
import { DECIDED_GAP } from '../../parity/trace-thresholds.ts';
import { append, clear, el } from '../common/dom.ts';
import { verdictHead } from '../common/verdict-head.ts';
import { onWidthChange, sizeCanvas } from '../common/canvas.ts';
import { fmtInt, fmtPercent, fmtSci, fmtTokenId } from '../common/format.ts';
import { createHeatmapView } from '../report/heatmap.ts';
import { createShareBar } from '../share/share.ts';
import type { RunEntry, RunStore } from '../runs/run-store.ts';
import {
  compare,
  comparisonDocument,
  reportHeatmap,
  sourceKind,
  VERDICT_WORDS,
  type CompareInput,
  type CompareSource,
  type Comparison,
  type FactRow,
  type ProbeComparison,
  type TraceComparison,
} from './compare-model.ts';
import {
  comparisonFileStem,
  comparisonMarkdown,
  comparisonPng,
  deltaLine,
  judgementLine,
  ranksLine,
} from './compare-share.ts';
import {
  compareSlot,
  fillRunSelects,
  runSource,
  showSides,
  type Side,
  type SlotHandlers,
  type Which,
} from './compare-slots.ts';
import { drawStrip, STRIP_COLORS, stripIndexAt, stripLayout } from './compare-strip.ts';

/** What a file holds, read by its content: JSON is a report, anything else a logit-trace TSV. */
export function fileSource(name: string, text: string): CompareSource {
  if (!text.trimStart().startsWith('{')) return { name, tsv: text };
  try {
    return { name, report: JSON.parse(text) };
  } catch (e) {
    throw new Error(`${name} starts like JSON but is not valid JSON (${(e as Error).message})`);
  }
}

function factsTable(rows: readonly FactRow[]): HTMLElement {
  const differing = rows.filter((r) => r.differs).length;
  return el(
    'div',
    { class: 'table-wrap' },
    el(
      'table',
      { class: 'data facts', 'data-testid': 'compare-facts' },
      el(
        'caption',
        {},
        `What each side is: ${differing ? `${differing} of ${rows.length} rows differ (marked ≠)` : 'the same in every row'}`,
      ),
      el('thead', {}, el('tr', {}, ...['', 'A', 'B'].map((h) => el('th', { scope: 'col' }, h)))),
      el(
        'tbody',
        {},
        ...rows.map((r) =>
          el(
            'tr',
            {
              class: r.differs ? 'differs' : undefined,
              'data-fact': r.label,
              'data-differs': r.differs ? 'yes' : 'no',
            },
            el('th', { scope: 'row' }, r.differs ? `≠ ${r.label}` : r.label),
            el('td', {}, r.a),
            el('td', {}, r.b),
          ),
        ),
      ),
    ),
  );
}

/** The strip on a canvas with a readout of the position under the mouse or the keyboard cursor. */
function stripView(c: TraceComparison): HTMLElement {
  const canvas = el('canvas', { class: 'compare-strip', tabindex: 0, role: 'img', 'data-testid': 'compare-strip' });
  const hint = 'Move over the strip, or focus it and use the arrow keys (Home: the first disagreement).';
  const readout = el('p', { class: 'readout', 'aria-live': 'polite', 'data-testid': 'compare-strip-readout' }, hint);
  const legend = el(
    'p',
    { class: 'small muted' },
    ...(
      [
        [STRIP_COLORS.agree, "top-1 kept (the candidate's top-1 is the reference's)"],
        [STRIP_COLORS.differs, 'top-1 differs'],
        [STRIP_COLORS.decided, `decided by the reference (top-2 gap ≥ ${c.decidedGap})`],
        [STRIP_COLORS.undecided, 'undecided'],
      ] as const
    ).flatMap(([color, text]) => [el('span', { class: 'swatch', style: `background: ${color}` }), ` ${text} `]),
  );
  const root = el('div', { class: 'strip-wrap' }, canvas, readout, legend);
  const n = c.strip.length;
  let cursor: number | undefined;
  let width = 0;
  const paint = () => {
    width = Math.max(480, root.clientWidth || 1000);
    const L = stripLayout(n, width);
    const ctx = sizeCanvas(canvas, width, L.height);
    if (ctx) drawStrip(ctx, c.strip, L, 0, 0, cursor);
  };
  const say = (i: number) => {
    const r = c.a.rows[i];
    const b = c.b.rows[i];
    const s = c.strip[i];
    return `position ${fmtInt(i)} · corpus token ${fmtTokenId(r.target)} · reference top-1 ${fmtTokenId(r.ids[0])} (${fmtSci(r.logits[0])}), gap ${fmtSci(r.logits[0] - r.logits[1])} ${s.decided ? '(decided)' : '(undecided)'} · candidate top-1 ${fmtTokenId(b.ids[0])} (${fmtSci(b.logits[0])}) · ${s.agree ? 'top-1 kept' : 'TOP-1 DIFFERS'}`;
  };
  const show = (i: number) => {
    cursor = Math.min(n - 1, Math.max(0, i));
    readout.textContent = say(cursor);
    paint();
  };
  canvas.addEventListener('mousemove', (e) => {
    const i = stripIndexAt(stripLayout(n, width), n, e.clientX - canvas.getBoundingClientRect().left);
    if (i >= 0 && i !== cursor) show(i);
  });
  canvas.addEventListener('keydown', (e) => {
    const step = e.key === 'ArrowLeft' ? -1 : e.key === 'ArrowRight' ? 1 : 0;
    if (step) {
      e.preventDefault();
      show((cursor ?? 0) + step);
    } else if (e.key === 'Home') {
      e.preventDefault();
      const first = c.strip.findIndex((x) => !x.agree);
      show(Math.max(first, 0));
    }
  });
  canvas.setAttribute(
    'aria-label',
    `${fmtInt(n)} positions; ${fmtInt(c.judgement.disagreements)} where the top-1 differs, ${fmtInt(c.judgement.decided)} decided`,
  );
  onWidthChange(root, paint);
  return root;
}

function renderTraces(c: TraceComparison): HTMLElement[] {
  const j = c.judgement;
  return [
    el(
      'div',
      { class: 'verdict-card', 'data-testid': 'compare-verdict', 'data-verdict': j.verdict },
      verdictHead(
        j.verdict === 'identical' ? 'equal' : j.verdict === 'decided' ? 'diverges' : 'undecided',
        VERDICT_WORDS[j.verdict].toUpperCase(),
        el('p', { class: 'summary', 'data-testid': 'compare-summary' }, judgementLine(c)),
        el('p', { class: 'consequence' }, VERDICT_TEXT[j.verdict]),
      ),
      el(
        'ul',
        { class: 'draws', 'data-testid': 'compare-sides' },
        el('li', {}, el('strong', {}, 'A, the reference: '), `${c.a.name}: ${c.a.about}`),
        el('li', {}, el('strong', {}, 'B, the candidate: '), `${c.b.name}: ${c.b.about}`),
      ),
    ),
    el('h3', {}, 'Every position'),
    stripView(c),
    el(
      'div',
      { class: 'two-col even' },
      el(
        'div',
        {},
        el('h3', {}, "Disagreements by the reference's top-2 gap"),
        el(
          'div',
          { class: 'table-wrap' },
          el(
            'table',
            { class: 'data', 'data-testid': 'compare-buckets' },
            el(
              'thead',
              {},
              el('tr', {}, ...['gap', 'positions', 'disagreed', 'share'].map((h) => el('th', { scope: 'col' }, h))),
            ),
            el(
              'tbody',
              {},
              ...j.buckets.map((b) =>
                el(
                  'tr',
                  { class: b.disagreed > 0 ? 'ne' : undefined },
                  el(
                    'td',
                    {},
                    `[${b.from}, ${b.to === null ? '∞' : b.to})`,
                    b.from >= c.decidedGap ? el('span', { class: 'muted' }, ' decided') : null,
                  ),
                  el('td', {}, fmtInt(b.positions)),
                  el('td', {}, fmtInt(b.disagreed)),
                  el('td', {}, b.positions ? fmtPercent(b.disagreed, b.positions) : '—'),
                ),
              ),
            ),
          ),
        ),
      ),
      el(
        'div',
        { 'data-testid': 'compare-details' },
        el('h3', {}, 'Ranks, |Δ logit| and perplexity'),
        el(
          'p',
          { class: 'small', 'data-testid': 'compare-ranks' },
          ranksLine(c)
            ? `Where each disagreement put the reference's top-1 in the candidate's list: ${ranksLine(c)}.`
            : 'No disagreement: no ranks to show.',
        ),
        el('p', { class: 'small', 'data-testid': 'compare-delta' }, deltaLine(c)),
      ),
    ),
    el('h3', {}, 'A and B'),
    factsTable(c.facts),
  ];
}

function renderProbes(c: ProbeComparison): HTMLElement[] {
  const cell = (d: ProbeComparison['draws'][number]['a']) =>
    !d
      ? el('td', { class: 'left' }, 'absent')
      : el(
          'td',
          { class: 'left' },
          el('span', { class: `chip ${d.verdict}` }, d.verdict),
          ` ${d.text}`,
          d.firstDivergence ? el('div', { class: 'divergence small' }, d.firstDivergence.text) : null,
        );
  const maps = (['a', 'b'] as const).map((w) => {
    const m = reportHeatmap(c[w].report);
    const box = el(
      'div',
      {},
      el(
        'h3',
        {},
        `${w.toUpperCase()}: ${m ? `draw ${m.draw.index}, where the arms first differ` : 'nothing localized'}`,
      ),
    );
    if (m) {
      const view = createHeatmapView();
      // two maps side by side: ids of their own, so the report card's stay unique
      view.root.querySelector('[data-testid="heatmap"]')?.setAttribute('data-testid', `compare-heatmap-${w}`);
      view.root
        .querySelector('[data-testid="heatmap-readout"]')
        ?.setAttribute('data-testid', `compare-heatmap-readout-${w}`);
      box.appendChild(view.root);
      // painted once the box is in the page and has a width
      requestAnimationFrame(() => view.update(m.grid));
    } else
      append(
        box,
        el(
          'p',
          { class: 'small muted' },
          c[w].report.verdict === 'equal'
            ? 'Every draw equal: nothing to localize.'
            : 'No per-layer captures: the probe ran without "Localize".',
        ),
      );
    return box;
  });
  return [
    el(
      'div',
      { class: 'verdict-card', 'data-testid': 'compare-verdict', 'data-verdict': c.same ? 'same' : 'part' },
      verdictHead(
        c.same ? 'equal' : 'diverges',
        c.same ? 'SAME' : 'PART',
        el('p', { class: 'summary', 'data-testid': 'compare-summary' }, c.headline),
        el('p', { class: 'consequence' }, `A: ${c.a.report.summary}`),
        el('p', { class: 'consequence' }, `B: ${c.b.report.summary}`),
      ),
    ),
    el('h3', {}, 'Draws and first divergences'),
    el(
      'div',
      { class: 'table-wrap' },
      el(
        'table',
        { class: 'data compare-draws', 'data-testid': 'compare-draws' },
        el(
          'thead',
          {},
          el(
            'tr',
            {},
            ...['draw', `A · ${c.a.name}`, `B · ${c.b.name}`].map((h) => el('th', { scope: 'col', class: 'left' }, h)),
          ),
        ),
        el(
          'tbody',
          {},
          ...c.draws.map((d) =>
            el(
              'tr',
              { class: d.differs ? 'differs' : undefined, 'data-differs': d.differs ? 'yes' : 'no' },
              el('td', {}, d.differs ? `≠ ${d.index}` : String(d.index)),
              cell(d.a),
              cell(d.b),
            ),
          ),
        ),
      ),
    ),
    el('div', { class: 'two-col even compare-maps' }, ...maps),
    el('h3', {}, 'Provenance'),
    factsTable(c.facts),
  ];
}

function gapField() {
  const gap = el('input', {
    type: 'number',
    min: 0,
    step: 0.5,
    size: 4,
    value: DECIDED_GAP,
    'data-testid': 'compare-gap',
  });

  // the decided gap is the trace judgement's: a probe comparison has none
  const gapLabel = el('label', { class: 'small', hidden: true }, 'Decided from a reference top-2 gap of ', gap);
  return { gap, gapLabel };
}

function acceptDrops(root: HTMLElement, sides: Partial<Record<Which, Side>>, setFile: SlotHandlers['setFile']): void {
  // Two files dropped at once are A and B; one file fills A, or B once A holds something.
  root.addEventListener('dragover', (e) => {
    e.preventDefault();
    root.classList.add('drag');
  });
  root.addEventListener('dragleave', () => root.classList.remove('drag'));
  root.addEventListener('drop', async (e) => {
    e.preventDefault();
    root.classList.remove('drag');
    const files = [...(e.dataTransfer?.files ?? [])];
    if (files.length >= 2) {
      await setFile('a', files[0]);
      await setFile('b', files[1]);
    } else if (files.length === 1) await setFile(sides.a ? 'b' : 'a', files[0]);
  });
}

export function createCompareView(store: RunStore): {
  root: HTMLElement;
  /** Shows the card with these two runs. */
  compareRuns(a: RunEntry, b: RunEntry): void;
  /** Shows the card with the inputs of a comparison document (a file or a link). */
  open(input: CompareInput, source: string): void;
  /** Shows the card as it is (to pick or drop). */
  reveal(): void;
} {
  const sides: Partial<Record<Which, Side>> = {};
  let arms: Record<Which, TraceArm> = { a: 'chain', b: 'block' };
  let current: { input: CompareInput; comparison: Comparison; createdAt: string } | undefined;

  const badge = el('span', { class: 'badge', 'data-testid': 'compare-source' });
  const share = createShareBar(
    () =>
      current && {
        raw: comparisonDocument(current.input, current.comparison, current.createdAt),
        stem: comparisonFileStem(current.comparison),
        png: () => comparisonPng(current!.comparison, current!.createdAt),
        markdown: (link) => comparisonMarkdown(current!.comparison, link),
      },
    { testPrefix: 'compare-' },
  );
  const problem = el('div', { 'data-testid': 'compare-problem' });
  const body = el('div', { class: 'report-body', 'data-testid': 'compare-body' });
  const { gap, gapLabel } = gapField();

  const handlers: SlotHandlers = { setSide, setFile, setArm };
  const slots = { a: compareSlot('a', store, handlers), b: compareSlot('b', store, handlers) };

  const root = el(
    'section',
    {
      class: 'card report',
      id: 'compare-card',
      'aria-labelledby': 'compare-title',
      hidden: true,
      'data-testid': 'compare-card',
    },
    el('div', { class: 'card-head report-head' }, el('h2', { id: 'compare-title' }, 'Compare'), badge, share.buttons),
    share.output,
    el(
      'p',
      { class: 'small muted' },
      "Two traces (mlxcel's logit-trace TSVs from its examples/logit_trace, or Ringside trace reports) or two probe reports: pick runs of this visit, choose files, or drop two files on this card.",
    ),
    el('div', { class: 'compare-inputs' }, slots.a.root, slots.b.root),
    gapLabel,
    problem,
    body,
  );

  const fillSelects = () => fillRunSelects(slots, store, sides);
  store.subscribe(fillSelects);

  function setSide(w: Which, side: Side): void {
    sides[w] = side;
    fillSelects();
    recompute();
  }

  function setArm(w: Which, arm: TraceArm): void {
    arms = { ...arms, [w]: arm };
    recompute();
  }

  async function setFile(w: Which, f: File): Promise<void> {
    try {
      setSide(w, { source: fileSource(f.name, await f.text()) });
    } catch (e) {
      showProblem((e as Error).message);
    }
  }

  function showProblem(message: string): void {
    clear(problem);
    append(problem, el('p', { class: 'error', role: 'alert', 'data-testid': 'compare-error' }, message));
  }

  function recompute(): void {
    clear(problem);
    clear(body);
    share.reset();
    current = undefined;
    share.buttons.hidden = true;
    showSides(slots, sides, arms);
    const { a, b } = sides;
    const isTrace = (x: Side | undefined) => x !== undefined && ['tsv', 'trace'].includes(sourceKind(x.source));
    gapLabel.hidden = !(isTrace(a) || isTrace(b));
    if (!a || !b) return;
    const g = Number(gap.value);
    if (!(gap.value.trim() !== '' && Number.isFinite(g) && g >= 0)) {
      showProblem(`The decided gap must be a number >= 0 (not ${JSON.stringify(gap.value)}).`);
      return;
    }
    const input: CompareInput = { a: a.source, b: b.source, arms, decidedGap: g };
    let comparison: Comparison;
    try {
      comparison = compare(input);
    } catch (e) {
      showProblem((e as Error).message);
      return;
    }
    current = { input, comparison, createdAt: new Date().toISOString() };
    share.buttons.hidden = false;
    root.setAttribute('data-kind', comparison.kind);
    append(body, ...(comparison.kind === 'traces' ? renderTraces(comparison) : renderProbes(comparison)));
  }
  gap.addEventListener('change', recompute);

  acceptDrops(root, sides, setFile);

  const reveal = () => {
    root.hidden = false;
    fillSelects();
  };

  return {
    root,
    reveal() {
      reveal();
      badge.textContent = '';
    },
    compareRuns(a, b) {
      sides.a = { source: runSource(a), runId: a.id };
      sides.b = { source: runSource(b), runId: b.id };
      arms = { a: 'chain', b: 'block' };
      badge.textContent = 'runs of this visit';
      reveal();
      recompute();
    },
    open(input, source) {
      sides.a = { source: input.a };
      sides.b = { source: input.b };
      arms = input.arms ?? { a: 'chain', b: 'block' };
      gap.value = String(input.decidedGap ?? DECIDED_GAP);
      badge.textContent = source;
      reveal();
      recompute();
    },
  };
}
