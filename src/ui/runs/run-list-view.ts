/**
 * The list of the visit's runs (run-store.ts): one row per run with its kind, verdict, settings, target and where it
 * came from; Open shows it in its card (with every export), JSON saves it at once, and two ticked runs of one kind
 * (two probe reports, or two traces) open side by side in the Compare view. Test ids: runs-card, runs-list,
 * run-open-<id>, run-json-<id>, run-pick-<id>, runs-compare.
 */
import { append, clear, el } from '../common/dom.ts';
import { comparableKind, summarizeRun, type RunEntry, type RunStore } from './run-store.ts';

export interface RunListHandlers {
  open(entry: RunEntry): void;
  download(entry: RunEntry): void;
  compare(a: RunEntry, b: RunEntry): void;
}

export function createRunListView(
  store: RunStore,
  on: RunListHandlers,
): {
  root: HTMLElement;
  /** Marks the run on screen (undefined: none, e.g. the Compare view is). */
  setOpen(id: number | undefined): void;
} {
  const count = el('span', { class: 'small muted', 'data-testid': 'runs-count' });
  const compare = el(
    'button',
    { type: 'button', class: 'secondary', 'data-testid': 'runs-compare', disabled: true },
    'Compare the two ticked',
  );
  const why = el('span', { class: 'small muted', 'data-testid': 'runs-compare-why' });
  const body = el('tbody', {});
  const root = el(
    'section',
    { class: 'card', id: 'runs-card', 'aria-labelledby': 'runs-title', hidden: true, 'data-testid': 'runs-card' },
    el('div', { class: 'card-head' }, el('h2', { id: 'runs-title' }, 'Runs of this visit'), count),
    el(
      'p',
      { class: 'small muted' },
      'Every probe, trace and generation of this visit and every report opened stays here: open one to read and export it, or tick two probe reports or two traces to compare them.',
    ),
    el(
      'div',
      { class: 'table-wrap' },
      el(
        'table',
        { class: 'data runs', 'data-testid': 'runs-list' },
        el(
          'thead',
          {},
          el(
            'tr',
            {},
            ...['compare', 'run', 'verdict', 'settings', 'target', 'from', ''].map((h) =>
              el('th', { scope: 'col', class: h === 'compare' ? '' : 'left' }, h),
            ),
          ),
        ),
        body,
      ),
    ),
    el('div', { class: 'row' }, compare, why),
  );
  let openId: number | undefined;
  const picked = new Set<number>();

  const pickedEntries = () => [...picked].map((id) => store.get(id)).filter((e): e is RunEntry => e !== undefined);
  const syncCompare = () => {
    const p = pickedEntries();
    const kinds = new Set(p.map((e) => comparableKind(e.doc)));
    const ok = p.length === 2 && kinds.size === 1;
    compare.disabled = !ok;
    why.textContent =
      p.length < 2
        ? `Tick ${p.length === 0 ? 'two runs' : 'one more run'} of one kind.`
        : p.length > 2
          ? 'Tick only two.'
          : ok
            ? ''
            : 'A probe report and a trace cannot be compared: tick two of one kind.';
  };

  const render = () => {
    const runs = store.list();
    root.hidden = runs.length === 0;
    count.textContent = `${runs.length} run${runs.length === 1 ? '' : 's'}`;
    clear(body);
    for (const e of [...runs].reverse()) {
      const s = summarizeRun(e.doc);
      const pick = el('input', {
        type: 'checkbox',
        'data-testid': `run-pick-${e.id}`,
        'aria-label': `Compare ${s.kind} from ${e.source}`,
        checked: picked.has(e.id),
        disabled: comparableKind(e.doc) === undefined,
        title: comparableKind(e.doc) === undefined ? 'Generation runs are not compared' : undefined,
      });
      pick.addEventListener('change', () => {
        if (pick.checked) picked.add(e.id);
        else picked.delete(e.id);
        syncCompare();
      });
      const openButton = el(
        'button',
        { type: 'button', class: 'secondary small-btn', 'data-testid': `run-open-${e.id}` },
        e.id === openId ? 'Shown' : 'Open',
      );
      openButton.addEventListener('click', () => on.open(e));
      const json = el(
        'button',
        { type: 'button', class: 'secondary small-btn', 'data-testid': `run-json-${e.id}` },
        'JSON',
      );
      json.addEventListener('click', () => on.download(e));
      append(
        body,
        el(
          'tr',
          { 'data-run-id': e.id, 'data-kind': e.doc.kind, class: e.id === openId ? 'open' : undefined },
          el('td', {}, pick),
          el('td', { class: 'left' }, s.kind),
          el('td', { class: 'left' }, el('span', { class: `chip ${s.bad ? 'diverges' : 'equal'}` }, s.verdict)),
          el('td', { class: 'left' }, s.setup),
          el('td', { class: 'left' }, s.model),
          el('td', { class: 'left' }, e.source),
          el('td', { class: 'left nowrap' }, openButton, ' ', json),
        ),
      );
    }
    syncCompare();
  };
  store.subscribe(render);
  compare.addEventListener('click', () => {
    const [a, b] = pickedEntries().sort((x, y) => x.id - y.id);
    if (a && b) on.compare(a, b);
  });

  return {
    root,
    setOpen(id) {
      openId = id;
      render();
    },
  };
}
