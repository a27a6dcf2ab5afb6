/**
 * Page entry: starts the engine Worker and wires the panels. The UI never touches GPU objects; a report
 * (from a run, a file or a share link) always goes through readReport before it is shown, and rendering
 * one needs no model and no GPU.
 */
import './style.css';
import { startEngineWorker } from './common/engine-client.ts';
import { append, byId, clear, el } from './common/dom.ts';
import { showAdapter, wireSelfTest } from './adapter/adapter-panel.ts';
import { wireBench } from './adapter/performance-view.ts';
import { createIntake } from './intake/intake.ts';
import { createRunPanel } from './run/run-panel.ts';
import { createReportShell } from './report/report-shell.ts';
import { readDocument } from './runs/read-document.ts';
import { createRunStore, type RunEntry, type RunOrigin } from './runs/run-store.ts';
import { createRunListView } from './runs/run-list-view.ts';
import { downloadJson, runFileStem } from './runs/run-files.ts';
import { generationJson } from './generation/generation-model.ts';
import { createCompareView } from './compare/compare-view.ts';
import { isComparisonDocument, readComparisonDocument, type CompareInput } from './compare/compare-model.ts';
import { decodeShareFragment } from './share/share-codec.ts';
import { fetchDemo } from './intake/demo.ts';
import { createGenerationView } from './generation/generation-view.ts';

const { engine } = startEngineWorker();
// ?limits=safari|safari-subgroups|chrome-mac caps the device to that browser's limits (src/gpu/limit-profiles.ts):
// named before any other call, so the device is made under it.
const limitSetting = new URLSearchParams(location.search).get('limits');
if (limitSetting !== null) void engine.useLimitProfile(limitSetting);
const main = byId('app');

// The visit's runs, and the cards that show one of them: the report card (probe or trace, with its share bar) or the
// generation card. Opening a run shows its card and hides the other.
const store = createRunStore();
const view = createReportShell();
byId('report-slot').appendChild(view.root);
const generation = createGenerationView();
byId('generation-slot').appendChild(generation.root);
const problemBox = byId('report-problem');

// The Compare card: two runs of the visit or two files side by side; it takes the place of the run cards.
const compareView = createCompareView(store);
byId('compare-slot').appendChild(compareView.root);
const showCompare = (): HTMLElement => {
  view.root.hidden = true;
  generation.root.hidden = true;
  runList.setOpen(undefined);
  return compareView.root;
};
byId('open-compare').addEventListener('click', () => {
  compareView.reveal();
  showCompare().scrollIntoView({ block: 'start', behavior: 'smooth' });
});

function openRun(entry: RunEntry): HTMLElement {
  compareView.root.hidden = true;
  const d = entry.doc;
  if (d.kind === 'generation') generation.show(d.run, entry.source, entry.raw);
  else
    view.show(
      d.kind === 'probe' ? { kind: 'probe', report: d.report } : { kind: 'trace', report: d.report },
      entry.source,
      entry.raw,
    );
  view.root.hidden = d.kind === 'generation';
  generation.root.hidden = d.kind !== 'generation';
  runList.setOpen(entry.id);
  return d.kind === 'generation' ? generation.root : view.root;
}

const runList = createRunListView(store, {
  open: (entry) => openRun(entry).scrollIntoView({ block: 'start', behavior: 'smooth' }),
  download: (entry) => downloadJson(entry.raw, runFileStem(entry.doc)),
  compare: (a, b) => {
    compareView.compareRuns(a, b);
    showCompare().scrollIntoView({ block: 'start', behavior: 'smooth' });
  },
});
byId('runs-slot').appendChild(runList.root);

function showProblems(source: string, problems: string[]): void {
  clear(problemBox);
  append(
    problemBox,
    el(
      'div',
      { class: 'card problem', role: 'alert', 'data-testid': 'report-error' },
      el('strong', {}, `This report (${source}) cannot be shown:`),
      el('ul', {}, ...problems.slice(0, 20).map((p) => el('li', {}, p))),
    ),
  );
  // the box sits above the report card: a report already on screen would hide that this one was refused
  problemBox.scrollIntoView({ block: 'start' });
}

/**
 * Adds a document from any source to the visit's runs and shows it; untrusted input is validated and its problems
 * shown, never rendered. Returns the card it is shown in, or undefined when it was refused.
 */
function showDocument(x: unknown, source: string, origin: RunOrigin): HTMLElement | undefined {
  clear(problemBox);
  // a comparison is no run: it opens in the Compare card, compared afresh from the inputs it carries
  if (isComparisonDocument(x)) {
    let input: CompareInput;
    try {
      input = readComparisonDocument(x);
    } catch (e) {
      showProblems(source, [(e as Error).message]);
      return undefined;
    }
    compareView.open(input, source);
    main.classList.toggle('viewing', origin !== 'live');
    return showCompare();
  }
  const r = readDocument(x);
  if (!r.ok) {
    showProblems(source, r.problems);
    return undefined;
  }
  const card = openRun(store.add({ origin, source, raw: x, doc: r.doc }));
  // A report opened from a link or file comes first: it is what the visitor came for.
  main.classList.toggle('viewing', origin !== 'live');
  return card;
}

function showProblem(source: string, message: string): void {
  clear(problemBox);
  append(
    problemBox,
    el(
      'div',
      { class: 'card problem', role: 'alert', 'data-testid': 'report-error' },
      el('strong', {}, `This report (${source}) cannot be shown: `),
      message,
    ),
  );
  problemBox.scrollIntoView({ block: 'start' });
}

function fromHash(): void {
  try {
    const x = decodeShareFragment(location.hash);
    if (x !== undefined) showDocument(x, 'shared link', 'link')?.scrollIntoView({ block: 'start' });
  } catch (e) {
    showProblem('shared link', (e as Error).message);
  }
}
window.addEventListener('hashchange', fromHash);
fromHash();

// A test hook: `?selftest-fault=matmul` (or attention) injects that kernel fault into the exactness self-test
// (src/gpu/kernel-fault.ts), so that a test sees the warning a failed self-test puts where the verdict is.
const selfTestFault = new URLSearchParams(location.search).get('selftest-fault');
if (selfTestFault !== null)
  engine
    .setSelfTestFault(selfTestFault)
    .catch((e: Error) =>
      append(problemBox, el('p', { class: 'card problem error', role: 'alert' }, `Page address: ${e.message}`)),
    );

// Opening a saved JSON document (a report or a generation run).
const openInput = byId<HTMLInputElement>('open-report');
byId('open-report-button').addEventListener('click', () => openInput.click());
openInput.addEventListener('change', async () => {
  const f = openInput.files?.[0];
  openInput.value = '';
  if (!f) return;
  let x: unknown;
  try {
    x = JSON.parse(await f.text());
  } catch (e) {
    return showProblem(f.name, `it is not JSON (${(e as Error).message})`);
  }
  const card = showDocument(x, `file ${f.name}`, 'file');
  if (card) {
    history.replaceState(null, '', location.pathname + location.search);
    card.scrollIntoView({ block: 'start' });
  }
});

// Checkpoints and the runs.
const refresh = () => {
  const { target, assistant } = intake.loaded();
  run.refresh({ target, assistant, loading: intake.busy() });
};
const intake = createIntake(engine, () => refresh());
byId('intake').appendChild(intake.root);
const liveRun = (raw: unknown) => {
  const card = showDocument(raw, `live run, ${new Date().toLocaleTimeString()}`, 'live');
  if (card) {
    // The URL must not keep an older shared report that a reload would show instead of this run.
    if (location.hash) history.replaceState(null, '', location.pathname + location.search);
    card.scrollIntoView({ block: 'start', behavior: 'smooth' });
  }
};
const run = createRunPanel(engine, {
  probe: liveRun,
  trace: liveRun,
  // a live generation goes in the list as the document its JSON export writes (and a link carries)
  generation: (g) => liveRun(generationJson(g)),
  // Neither the demo model nor a folder may replace the checkpoints under a running job.
  busyChanged: () => {
    demoButton.disabled = intake.busy() || run.busy();
    intake.lock(
      run.busy() ? 'A run is in progress: wait for it to finish or cancel it, then load the checkpoint.' : undefined,
    );
  },
});
byId('run-slot').appendChild(run.root);

const demoButton = byId<HTMLButtonElement>('demo');
const demoStatus = byId('demo-status');
demoButton.addEventListener('click', async () => {
  demoButton.disabled = true;
  demoStatus.textContent = 'Fetching the demo checkpoint…';
  try {
    const demo = await fetchDemo();
    demoStatus.textContent = '';
    if ((await intake.load('target', demo.target)) && (await intake.load('assistant', demo.assistant))) {
      const { about, prompt } = demo.manifest;
      if (prompt) run.suggestPrompt(prompt.text, prompt.chat);
      // One short line; what the model is (the manifest's paragraph) waits behind a disclosure.
      demoStatus.textContent = 'Demo model loaded: try a probe, a trace or a generation.';
      byId('demo-about-text').textContent = about ? `${about[0].toUpperCase()}${about.slice(1)}.` : '';
      byId('demo-about').hidden = !about;
    }
  } catch (e) {
    demoStatus.textContent = `Could not fetch the demo model: ${(e as Error).message}`;
  } finally {
    refresh();
  }
});
refresh();

void showAdapter(engine).then((ok) => {
  if (!ok) return;
  wireSelfTest(engine);
  wireBench(engine);
});
