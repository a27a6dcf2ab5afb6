/**
 * Page entry: starts the engine Worker and wires the panels. The UI never touches GPU objects; a report
 * (from a run, a file or a share link) always goes through readReport before it is shown, and rendering
 * one needs no model and no GPU.
 */
import './style.css';
import { startEngineWorker } from './engine-client.ts';
import { append, byId, clear, el } from './dom.ts';
import { showAdapter, wireSelfTest } from './adapter-panel.ts';
import { createIntake } from './intake.ts';
import { createRunPanel } from './run-panel.ts';
import { createReportView } from './report-view.ts';
import { createShareBar } from './share.ts';
import { readReport } from './report-model.ts';
import { decodeShareFragment } from './share-codec.ts';
import { fetchDemo } from './demo.ts';

const { engine } = startEngineWorker();
const main = byId('app');

// Report view + share bar.
const view = createReportView();
view.root.querySelector('.share-slot')!.appendChild(createShareBar(() => view.selection()));
byId('report-slot').appendChild(view.root);
const problemBox = byId('report-problem');

/** Shows a report from any source; untrusted input is validated and its problems shown, never rendered. */
function showReport(x: unknown, source: string, origin: 'live' | 'shared'): boolean {
  clear(problemBox);
  const r = readReport(x);
  if (!r.ok) {
    append(problemBox, el('div', { class: 'card problem', role: 'alert', 'data-testid': 'report-error' },
      el('strong', {}, `This report (${source}) cannot be shown:`),
      el('ul', {}, ...r.problems.slice(0, 20).map((p) => el('li', {}, p)))));
    return false;
  }
  view.show(r.report, source, x);
  // A report opened from a link or file comes first: it is what the visitor came for.
  main.classList.toggle('viewing', origin === 'shared');
  return true;
}

function showProblem(source: string, message: string): void {
  clear(problemBox);
  append(problemBox, el('div', { class: 'card problem', role: 'alert', 'data-testid': 'report-error' }, el('strong', {}, `This report (${source}) cannot be shown: `), message));
}

function fromHash(): void {
  try {
    const x = decodeShareFragment(location.hash);
    if (x !== undefined && showReport(x, 'shared link', 'shared')) view.root.scrollIntoView({ block: 'start' });
  } catch (e) {
    showProblem('shared link', (e as Error).message);
  }
}
window.addEventListener('hashchange', fromHash);
fromHash();

// Opening a saved JSON report.
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
  if (showReport(x, `file ${f.name}`, 'shared')) {
    history.replaceState(null, '', location.pathname + location.search);
    view.root.scrollIntoView({ block: 'start' });
  }
});

// Checkpoints and the probe.
const refresh = () => {
  const target = intake.loaded().target;
  const busy = intake.busy();
  run.refresh(!!target && !busy, busy ? 'Waiting for the checkpoint load to finish.' : target ? '' : 'Load a target checkpoint first.');
  demoButton.disabled = busy || run.busy();
};
const intake = createIntake(engine, () => refresh());
byId('intake').appendChild(intake.root);
const run = createRunPanel(engine, (report) => {
  if (showReport(report, `live run, ${new Date().toLocaleTimeString()}`, 'live')) {
    // The URL must not keep an older shared report that a reload would show instead of this run.
    if (location.hash) history.replaceState(null, '', location.pathname + location.search);
    view.root.scrollIntoView({ block: 'start', behavior: 'smooth' });
  }
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
      demoStatus.textContent = 'Demo model loaded: try the policies "exact" and "ring-chronological".';
    }
  } catch (e) {
    demoStatus.textContent = `Could not fetch the demo model: ${(e as Error).message}`;
  } finally {
    refresh();
  }
});
refresh();

void showAdapter(engine).then((ok) => ok && wireSelfTest(engine));
