/**
 * The run card: three tabs, one per kind of run (the block-versus-chain probe, the teacher-forced trace,
 * classic versus MTP generation), each with its settings, Run, per-phase progress with elapsed times and
 * Cancel. Runs happen in the engine Worker, one at a time; this panel gathers options, shows progress and
 * hands results on.
 */
import type { EngineProxy } from '../common/engine-client.ts';
import type { ProbeReport } from '../../parity/report.ts';
import type { TraceReport } from '../../parity/trace.ts';
import type { LoadedSummary } from '../../worker/engine.ts';
import { append, clear, el } from '../common/dom.ts';
import type { PolicyFamily } from '../../model/policy-registry.ts';
import { createJobRunner, type JobRunner } from './job-runner.ts';
import { createProbeForm } from './probe-form.ts';
import { createTraceForm } from './trace-form.ts';
import { createGenerateForm } from './generate-form.ts';
import type { GenerationRun } from '../generation/generation-model.ts';

export interface RunState {
  target?: LoadedSummary;
  assistant?: LoadedSummary;
  /** A checkpoint load is running. */
  loading: boolean;
}

export interface RunPanel {
  root: HTMLElement;
  /** Re-evaluates what may run (called when checkpoints load or unload). */
  refresh(s: RunState): void;
  busy(): boolean;
  /** A text prompt for the generation tab (the demo model's suggestion). */
  suggestPrompt(text: string, chat: boolean): void;
}

export interface RunHandlers {
  probe(r: ProbeReport): void;
  trace(r: TraceReport): void;
  generation(r: GenerationRun): void;
  /** A run started or ended. */
  busyChanged?(): void;
}

type TabId = 'probe' | 'trace' | 'generate';

/** The tab buttons and their panels: click or arrow keys select a tab, the first one selected to begin with. */
function tabStrip(tabs: { id: TabId; label: string; body: HTMLElement }[]) {
  const tabButtons = tabs.map((t) =>
    el(
      'button',
      {
        type: 'button',
        role: 'tab',
        id: `tab-${t.id}`,
        class: 'tab',
        'aria-controls': `panel-${t.id}`,
        'data-testid': `tab-${t.id}`,
      },
      t.label,
    ),
  );
  const panels = tabs.map((t) =>
    el(
      'div',
      {
        role: 'tabpanel',
        id: `panel-${t.id}`,
        'aria-labelledby': `tab-${t.id}`,
        class: 'tabpanel',
        'data-testid': `panel-${t.id}`,
      },
      t.body,
    ),
  );
  const select = (i: number, focus = false) => {
    tabButtons.forEach((b, j) => {
      b.setAttribute('aria-selected', String(i === j));
      b.tabIndex = i === j ? 0 : -1;
      panels[j].hidden = i !== j;
    });
    if (focus) tabButtons[i].focus();
  };
  tabButtons.forEach((b, i) => {
    b.addEventListener('click', () => select(i));
    b.addEventListener('keydown', (e) => {
      const to =
        e.key === 'ArrowRight'
          ? (i + 1) % tabs.length
          : e.key === 'ArrowLeft'
            ? (i + tabs.length - 1) % tabs.length
            : e.key === 'Home'
              ? 0
              : e.key === 'End'
                ? tabs.length - 1
                : -1;
      if (to >= 0) {
        e.preventDefault();
        select(to, true);
      }
    });
  });
  select(0);
  return { tabButtons, panels };
}

export function createRunPanel(engine: EngineProxy, on: RunHandlers): RunPanel {
  let state: RunState = { loading: false };
  const cancelJob = (jobId: string) => void engine.cancel(jobId);
  const runners: JobRunner[] = [];
  const runner = (prefix: string, label: string, runTestId: string, whyTestId: string) => {
    const r = createJobRunner({ prefix, label, runTestId, whyTestId, cancelJob, onBusy: () => apply() });
    runners.push(r);
    return r;
  };
  const probeJob = runner('probe', 'Run probe', 'run-probe', 'run-why');
  const traceJob = runner('trace', 'Run trace', 'run-trace', 'trace-why');
  const generateJob = runner('generate', 'Run generation', 'run-generate', 'generate-why');
  const probe = createProbeForm(engine, probeJob, on.probe);
  const trace = createTraceForm(engine, traceJob, on.trace);
  const generate = createGenerateForm(engine, generateJob, on.generation);

  const tabs: { id: TabId; label: string; body: HTMLElement }[] = [
    { id: 'probe', label: 'Block-versus-chain probe', body: probe.root },
    { id: 'trace', label: 'Teacher-forced trace', body: trace.root },
    { id: 'generate', label: 'Classic vs MTP generation', body: generate.root },
  ];
  const { tabButtons, panels } = tabStrip(tabs);

  const policyError = el('div', {});
  const root = el(
    'section',
    { class: 'card', id: 'run-card', 'aria-labelledby': 'run-title' },
    el('h2', { id: 'run-title', class: 'sr-only' }, 'Runs'),
    el('div', { class: 'tabs', role: 'tablist', 'aria-label': 'Kind of run' }, ...tabButtons),
    policyError,
    ...panels,
  );

  const busy = () => runners.some((r) => r.running());
  function apply() {
    const s = state;
    const other = busy() ? 'Another run is in progress.' : '';
    const needTarget = s.loading
      ? 'Waiting for the checkpoint load to finish.'
      : s.target
        ? ''
        : 'Load a target checkpoint first.';
    probeJob.allow(!other && !needTarget, other || needTarget);
    traceJob.allow(!other && !needTarget, other || needTarget);
    // A Qwen3.5 target drafts with its own MTP head, a split drafter or oracle drafts: it needs no assistant. A Gemma 4
    // target needs a Gemma 4 assistant (a split Qwen3.5 drafter on the assistant zone does not draft for it).
    const gemmaAssistant = s.assistant !== undefined && s.assistant.drafter === undefined;
    const needAssistant =
      needTarget ||
      (gemmaAssistant || s.target?.family === 'qwen3_5'
        ? ''
        : 'Load the MTP assistant too: generation drafts with it.');
    generateJob.allow(!other && !needAssistant, other || needAssistant);
    on.busyChanged?.();
  }

  // The policy menus list the loaded target's family's policies (Gemma 4's until a target is loaded; a Gemma 4 MoE
  // target's add moe-grouped); the latest request wins when targets of two families load in quick succession.
  let policyFamily: PolicyFamily | undefined;
  let policyRequest = 0;
  const listPolicies = async (family: PolicyFamily) => {
    const request = ++policyRequest;
    try {
      const list = await engine.policies(family);
      if (request !== policyRequest) return;
      clear(policyError);
      probe.policies(list);
      trace.policies(list);
      generate.policies(list);
    } catch (e) {
      append(
        policyError,
        el('p', { class: 'error', role: 'alert' }, `Could not list the policies: ${(e as Error).message}`),
      );
    }
  };
  const showPoliciesOf = (family: PolicyFamily) => {
    if (family === policyFamily) return;
    policyFamily = family;
    void listPolicies(family);
  };
  showPoliciesOf('gemma4');

  return {
    root,
    refresh(s) {
      state = s;
      showPoliciesOf(s.target?.experts ? 'gemma4-moe' : (s.target?.family ?? 'gemma4'));
      probe.setModel(s.target);
      trace.setModel(s.target);
      generate.setModels(s.target, s.assistant);
      apply();
    },
    busy,
    suggestPrompt: (text, chat) => generate.suggest(text, chat),
  };
}
