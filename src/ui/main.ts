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
import { readAnyReport } from './report/read-report.ts';
import { decodeShareFragment } from './share/share-codec.ts';
import { fetchDemo } from './intake/demo.ts';
import { createGenerationView } from './generation/generation-view.ts';

const { engine } = startEngineWorker();
// ?limits=safari|safari-subgroups|chrome-mac caps the device to that browser's limits (src/gpu/limit-profiles.ts):
// named before any other call, so the device is made under it.
const limitSetting = new URLSearchParams(location.search).get('limits');
if (limitSetting !== null) void engine.useLimitProfile(limitSetting);
const main = byId('app');

// The report card (probe or trace, with its share bar) and the generation card.
const view = createReportShell();
byId('report-slot').appendChild(view.root);
const generation = createGenerationView();
byId('generation-slot').appendChild(generation.root);
const problemBox = byId('report-problem');

/** Shows a report from any source; untrusted input is validated and its problems shown, never rendered. */
function showReport(x: unknown, source: string, origin: 'live' | 'shared'): boolean {
  clear(problemBox);
  const r = readAnyReport(x);
  if (!r.ok) {
    append(
      problemBox,
      el(
        'div',
        { class: 'card problem', role: 'alert', 'data-testid': 'report-error' },
        el('strong', {}, `This report (${source}) cannot be shown:`),
        el('ul', {}, ...r.problems.slice(0, 20).map((p) => el('li', {}, p))),
      ),
    );
    // the box sits above the report card: a report already on screen would hide that this one was refused
    problemBox.scrollIntoView({ block: 'start' });
    return false;
  }
  view.show(r, source, x);
  // A report opened from a link or file comes first: it is what the visitor came for.
  main.classList.toggle('viewing', origin === 'shared');
  return true;
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
    if (x !== undefined && showReport(x, 'shared link', 'shared')) view.root.scrollIntoView({ block: 'start' });
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

// Checkpoints and the runs.
const refresh = () => {
  const { target, assistant } = intake.loaded();
  run.refresh({ target, assistant, loading: intake.busy() });
};
const intake = createIntake(engine, () => refresh());
byId('intake').appendChild(intake.root);
const liveReport = (report: unknown) => {
  if (showReport(report, `live run, ${new Date().toLocaleTimeString()}`, 'live')) {
    // The URL must not keep an older shared report that a reload would show instead of this run.
    if (location.hash) history.replaceState(null, '', location.pathname + location.search);
    view.root.scrollIntoView({ block: 'start', behavior: 'smooth' });
  }
};
const run = createRunPanel(engine, {
  probe: liveReport,
  trace: liveReport,
  generation: (g) => {
    generation.show(g, `live run, ${new Date().toLocaleTimeString()}`);
    generation.root.scrollIntoView({ block: 'start', behavior: 'smooth' });
  },
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
      demoStatus.textContent = `Demo model loaded${about ? ` (${about})` : ''}: try the probe or the trace with the policies "exact" and "ring-chronological", or a generation${prompt ? ' of the text prompt it suggests' : ''}.`;
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
