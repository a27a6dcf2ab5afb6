/**
 * The Compare card's two inputs, A and B: a slot each (a run of this visit or a file, and for a trace report its
 * arm), the runs its menu lists and what it says the side holds.
 */
import type { TraceArm } from '../../parity/trace-files.ts';
import { append, clear, el } from '../common/dom.ts';
import { comparableKind, summarizeRun, type RunEntry, type RunStore } from '../runs/run-store.ts';
import { sourceKind, type CompareSource } from './compare-model.ts';

export type Which = 'a' | 'b';

/** A side as picked: its source, and the run it came from (for the select), if any. */
export interface Side {
  source: CompareSource;
  runId?: number;
}

export const runSource = (e: RunEntry): CompareSource => {
  const s = summarizeRun(e.doc);
  return { name: `${s.kind.toLowerCase()}, ${e.source}`, report: e.raw };
};

/** What a side's slot does when its run, file or arm is picked. */
export interface SlotHandlers {
  setSide(w: Which, side: Side): void;
  setFile(w: Which, f: File): Promise<void>;
  setArm(w: Which, arm: TraceArm): void;
}

export function compareSlot(w: Which, store: RunStore, on: SlotHandlers) {
  const title = w === 'a' ? 'A, the reference' : 'B, the candidate';
  const select = el('select', { 'data-testid': `compare-${w}-run`, 'aria-label': `${title}: a run of this visit` });
  const file = el('input', {
    type: 'file',
    class: 'sr-only',
    tabindex: -1,
    accept: '.tsv,.txt,.json,text/tab-separated-values,application/json',
    'data-testid': `compare-${w}-file`,
    'aria-label': `${title}: a file`,
  });
  const choose = el('button', { type: 'button', class: 'secondary small-btn' }, 'a file…');
  choose.addEventListener('click', () => file.click());
  const arm = el(
    'select',
    { 'data-testid': `compare-${w}-arm`, 'aria-label': `${title}: which arm of the trace report` },
    el('option', { value: 'chain' }, 'chain arm'),
    el('option', { value: 'block' }, 'block arm'),
  );
  const armLabel = el('label', { hidden: true }, ' arm ', arm);
  const what = el('p', { class: 'small muted', 'data-testid': `compare-${w}-what` }, 'Nothing picked yet.');
  select.addEventListener('change', () => {
    const e = store.get(Number(select.value));
    if (e) on.setSide(w, { source: runSource(e), runId: e.id });
  });
  file.addEventListener('change', async () => {
    const f = file.files?.[0];
    file.value = '';
    if (f) await on.setFile(w, f);
  });
  arm.addEventListener('change', () => {
    on.setArm(w, arm.value === 'block' ? 'block' : 'chain');
  });
  const root = el(
    'fieldset',
    { class: 'compare-slot', 'data-testid': `compare-${w}` },
    el('legend', {}, title),
    el('div', { class: 'row tight' }, select, ' or ', choose, file, armLabel),
    what,
  );
  return { root, select, arm, armLabel, what };
}

export type Slot = ReturnType<typeof compareSlot>;

/** The select lists the visit's probe and trace runs, and the file a side holds. */
export function fillRunSelects(slots: Record<Which, Slot>, store: RunStore, sides: Partial<Record<Which, Side>>): void {
  for (const w of ['a', 'b'] as const) {
    const s = slots[w].select;
    clear(s);
    append(s, el('option', { value: '' }, 'a run of this visit…'));
    for (const e of store.list()) {
      if (!comparableKind(e.doc)) continue;
      const sum = summarizeRun(e.doc);
      append(s, el('option', { value: e.id }, `${sum.kind} · ${sum.verdict} · ${sum.setup} · ${e.source}`));
    }
    const side = sides[w];
    if (side && side.runId === undefined) append(s, el('option', { value: 'file' }, `file ${side.source.name}`));
    s.value = side ? (side.runId !== undefined ? String(side.runId) : 'file') : '';
  }
}

/** What each slot says its side holds, with the arm menu where the side is a trace report. */
export function showSides(
  slots: Record<Which, Slot>,
  sides: Partial<Record<Which, Side>>,
  arms: Record<Which, TraceArm>,
): void {
  for (const w of ['a', 'b'] as const) {
    const s = sides[w];
    const k = s ? sourceKind(s.source) : undefined;
    slots[w].armLabel.hidden = k !== 'trace';
    slots[w].arm.value = arms[w];
    slots[w].what.textContent = !s
      ? 'Nothing picked yet.'
      : `${s.source.name}: ${k === 'tsv' ? 'a logit-trace TSV (one arm)' : k === 'trace' ? `a trace report, its ${arms[w]} arm` : k === 'probe' ? 'a probe report' : 'not a report Ringside compares'}`;
  }
}
