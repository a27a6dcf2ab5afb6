/**
 * The probe settings, the Run button, per-phase progress with elapsed times, and Cancel. The probe runs
 * in the engine Worker; this panel only gathers options, shows progress and hands the report on.
 */
import { Comlink, type EngineProxy } from './engine-client.ts';
import type { ProbeOptions } from '../parity/probe.ts';
import type { ProbeReport } from '../parity/report.ts';
import type { Progress } from '../util/cancel.ts';
import { append, clear, el } from './dom.ts';
import { fmtMs, parseLengths } from './format.ts';
import { loadSettings, saveSettings, type RunSettings } from './recent.ts';

export interface RunPanel {
  root: HTMLElement;
  /** Re-evaluates whether Run is allowed (called when checkpoints load or unload). */
  refresh(canRun: boolean, why: string): void;
  busy(): boolean;
}

let jobCounter = 0;

export function createRunPanel(engine: EngineProxy, onReport: (r: ProbeReport) => void): RunPanel {
  const lengths = el('input', { type: 'text', inputmode: 'numeric', placeholder: '8, 8, 8 + long draw', size: 16, 'data-testid': 'lengths', 'aria-describedby': 'lengths-hint' });
  const block = el('select', { 'data-testid': 'block' }, ...[2, 3, 4, 5, 6, 7, 8].map((k) => el('option', { value: k, selected: k === 4 }, String(k))));
  const policy = el('select', { 'data-testid': 'policy' }, el('option', { value: 'exact' }, 'exact'));
  const policyHelp = el('p', { class: 'small muted policy-help', 'data-testid': 'policy-help' });
  const precF32 = el('input', { type: 'radio', name: 'precision', value: 'f32', checked: true, 'data-testid': 'precision-f32' });
  const precBf16 = el('input', { type: 'radio', name: 'precision', value: 'bf16', 'data-testid': 'precision-bf16' });
  const localize = el('input', { type: 'checkbox', checked: true, 'data-testid': 'localize' });
  const run = el('button', { type: 'button', 'data-testid': 'run-probe', disabled: true }, 'Run probe');
  const cancel = el('button', { type: 'button', class: 'secondary', 'data-testid': 'probe-cancel', hidden: true }, 'Cancel');
  const why = el('span', { class: 'small muted', 'data-testid': 'run-why' });
  const elapsed = el('span', { class: 'small', 'data-testid': 'probe-elapsed', 'aria-live': 'off' });
  const phases = el('ol', { class: 'phases', 'data-testid': 'probe-progress', 'aria-live': 'polite' });
  const message = el('div', {});
  const descriptions = new Map<string, string>();

  const root = el('section', { class: 'card', id: 'run-card', 'aria-labelledby': 'run-title' },
    el('h2', { id: 'run-title' }, 'Block-versus-chain probe'),
    el('div', { class: 'settings' },
      el('label', {}, 'Draw lengths ', lengths),
      el('label', {}, 'Block width K ', block),
      el('label', {}, 'Policy ', policy),
      el('fieldset', { class: 'inline' }, el('legend', {}, 'Precision'),
        el('label', {}, precF32, ' f32'), el('label', {}, precBf16, ' bf16')),
      el('label', {}, localize, ' Localize the first divergence')),
    el('p', { class: 'small muted', id: 'lengths-hint' }, 'Empty draw lengths run mlxcel\'s draws: 8, 8, 8 and a long draw of min(W + 32, 1536) tokens that wraps the ring.'),
    policyHelp,
    el('div', { class: 'row' }, run, cancel, elapsed, why),
    phases,
    message);

  let running = false;
  let canRun = false;

  const showPolicyHelp = () => (policyHelp.textContent = descriptions.get(policy.value) ?? '');
  policy.addEventListener('change', showPolicyHelp);

  void (async () => {
    try {
      const list = await engine.policies();
      clear(policy);
      for (const p of list) {
        descriptions.set(p.name, p.description);
        append(policy, el('option', { value: p.name }, p.name));
      }
    } catch (e) {
      append(message, el('p', { class: 'error', role: 'alert' }, `Could not list the policies: ${(e as Error).message}`));
    }
    const s = await loadSettings();
    if (s) {
      lengths.value = s.lengths;
      block.value = String(s.block);
      if (descriptions.has(s.policy)) policy.value = s.policy;
      (s.precision === 'bf16' ? precBf16 : precF32).checked = true;
      localize.checked = s.localize;
    }
    showPolicyHelp();
  })();

  const setRunning = (on: boolean) => {
    running = on;
    run.disabled = on || !canRun;
    cancel.hidden = !on;
    cancel.disabled = false;
    for (const c of [lengths, block, policy, precF32, precBf16, localize]) c.disabled = on;
  };

  run.addEventListener('click', async () => {
    clear(message);
    let parsed: number[] | undefined;
    try {
      parsed = parseLengths(lengths.value);
    } catch (e) {
      append(message, el('p', { class: 'error', role: 'alert', 'data-testid': 'probe-error' }, (e as Error).message));
      lengths.focus();
      return;
    }
    const settings: RunSettings = { lengths: lengths.value, block: Number(block.value), policy: policy.value, precision: precBf16.checked ? 'bf16' : 'f32', localize: localize.checked };
    void saveSettings(settings);
    const opts: ProbeOptions = { block: settings.block, policy: settings.policy, precision: settings.precision, localize: settings.localize, ...(parsed ? { lengths: parsed } : {}) };
    const jobId = `probe-${++jobCounter}`;
    const t0 = performance.now();
    let current: { name: string; li: HTMLElement; time: HTMLElement; t: number } | undefined;
    clear(phases);
    setRunning(true);
    const tick = setInterval(() => {
      elapsed.textContent = `Elapsed ${fmtMs(performance.now() - t0)}`;
      if (current) current.time.textContent = fmtMs(performance.now() - current.t);
    }, 250);
    cancel.onclick = () => {
      cancel.disabled = true;
      void engine.cancel(jobId);
    };
    const finishPhase = () => {
      if (!current) return;
      current.li.classList.remove('active');
      current.li.classList.add('done');
      current.time.textContent = fmtMs(performance.now() - current.t);
    };
    try {
      const report = await engine.runProbe(opts, jobId, Comlink.proxy((p: Progress) => {
        // A phase is "draw n: name"; a new one closes the previous line with its duration.
        const name = p.detail ?? p.phase;
        if (current?.name !== name) {
          finishPhase();
          const time = el('span', { class: 'muted phase-time' });
          const li = el('li', { class: 'active' }, el('span', { class: 'phase-name' }, name), el('progress', { max: Math.max(1, p.total), value: p.done, 'aria-label': 'probe progress' }), time);
          append(phases, li);
          current = { name, li, time, t: performance.now() };
        }
      }));
      finishPhase();
      elapsed.textContent = `Done in ${fmtMs(performance.now() - t0)}`;
      onReport(report);
    } catch (e) {
      finishPhase();
      const m = (e as Error)?.message ?? String(e);
      if ((e as Error)?.name === 'CancelledError' || m === 'Cancelled by the user.') {
        elapsed.textContent = `Cancelled after ${fmtMs(performance.now() - t0)}`;
      } else {
        append(message, el('p', { class: 'error', role: 'alert', 'data-testid': 'probe-error' }, m));
      }
    } finally {
      clearInterval(tick);
      setRunning(false);
    }
  });

  return {
    root,
    refresh(ok, reason) {
      canRun = ok;
      run.disabled = running || !ok;
      why.textContent = ok ? '' : reason;
    },
    busy: () => running,
  };
}
