/**
 * The part every run form shares: its Run button, Cancel, the elapsed time, per-phase progress lines with
 * their durations, and the error line. A job runs in the engine Worker under a job id (for Cancel); the
 * runner only shows what the engine reports. `<prefix>-cancel`, `-elapsed`, `-progress`, `-error` are the
 * test ids.
 */
import { settledProgress } from '../common/engine-client.ts';
import type { Progress, ProgressFn } from '../../util/cancel.ts';
import { append, clear, el } from '../common/dom.ts';
import { fmtMs } from '../common/format.ts';
import type { SettledRun } from './phase-times.ts';

type Field = HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement | HTMLButtonElement;

export interface JobRunner {
  run: HTMLButtonElement;
  /** Run, Cancel, elapsed time and the reason Run is disabled, on one row. */
  controls: HTMLElement;
  phases: HTMLElement;
  message: HTMLElement;
  running(): boolean;
  /** Whether Run may be pressed (besides not running), and why not. */
  allow(ok: boolean, why: string): void;
  error(text: string): void;
  /**
   * Runs `call` with a fresh job id and a progress proxy; undefined when it failed (shown) or was cancelled. `settle`
   * reads the finished run's own timings (phase-times.ts): they replace the live lines' times and the total, so the
   * list says what the result says.
   */
  start<T>(
    call: (jobId: string, onProgress: ProgressFn) => Promise<T>,
    fields: Field[],
    settle?: (result: T) => SettledRun,
  ): Promise<T | undefined>;
  /** The last finished run's time as "Done in" says it. */
  elapsedMs(): number;
}

let jobCounter = 0;

export function createJobRunner(o: {
  prefix: string;
  label: string;
  runTestId: string;
  whyTestId: string;
  cancelJob: (jobId: string) => void;
  onBusy: () => void;
}): JobRunner {
  const run = el('button', { type: 'button', 'data-testid': o.runTestId, disabled: true }, o.label);
  const cancel = el(
    'button',
    { type: 'button', class: 'secondary', 'data-testid': `${o.prefix}-cancel`, hidden: true },
    'Cancel',
  );
  const why = el('span', { class: 'small muted', 'data-testid': o.whyTestId });
  const elapsed = el('span', { class: 'small', 'data-testid': `${o.prefix}-elapsed`, 'aria-live': 'off' });
  const phases = el('ol', { class: 'phases', 'data-testid': `${o.prefix}-progress`, 'aria-live': 'polite' });
  const message = el('div', {});
  let busy = false;
  let ok = false;
  let lastElapsed = NaN;

  const error = (text: string) =>
    append(message, el('p', { class: 'error', role: 'alert', 'data-testid': `${o.prefix}-error` }, text));

  return {
    run,
    controls: el('div', { class: 'row' }, run, cancel, elapsed, why),
    phases,
    message,
    running: () => busy,
    allow(can, reason) {
      ok = can;
      run.disabled = busy || !can;
      why.textContent = can || busy ? '' : reason;
    },
    error,
    elapsedMs: () => lastElapsed,
    async start(call, fields, settle) {
      clear(message);
      clear(phases);
      const jobId = `${o.prefix}-${++jobCounter}`;
      const t0 = performance.now();
      let current:
        | { name: string; li: HTMLElement; bar: HTMLProgressElement; time: HTMLElement; t: number }
        | undefined;
      const setBusy = (on: boolean) => {
        busy = on;
        run.disabled = on || !ok;
        cancel.hidden = !on;
        cancel.disabled = false;
        for (const f of fields) f.disabled = on;
        o.onBusy();
      };
      setBusy(true);
      const tick = setInterval(() => {
        elapsed.textContent = `Elapsed ${fmtMs(performance.now() - t0)}`;
        if (current) current.time.textContent = fmtMs(performance.now() - current.t);
      }, 250);
      cancel.onclick = () => {
        cancel.disabled = true;
        o.cancelJob(jobId);
      };
      const finishPhase = () => {
        if (!current) return;
        current.li.classList.remove('active');
        current.li.classList.add('done');
        current.time.textContent = fmtMs(performance.now() - current.t);
      };
      try {
        const progress = settledProgress((p: Progress) => {
          // A new phase name closes the previous line with its duration; the same name moves its bar.
          const name = p.detail ?? p.phase;
          if (current?.name !== name) {
            finishPhase();
            const time = el('span', { class: 'muted phase-time' });
            const bar = el('progress', {
              max: Math.max(1, p.total),
              value: p.done,
              'aria-label': `${o.label} progress`,
            });
            const li = el('li', { class: 'active' }, el('span', { class: 'phase-name' }, name), bar, time);
            append(phases, li);
            current = { name, li, bar, time, t: performance.now() };
          } else {
            current.bar.max = Math.max(1, p.total);
            current.bar.value = p.done;
          }
        });
        const result = await call(jobId, progress.callback).finally(progress.close);
        finishPhase();
        lastElapsed = performance.now() - t0;
        if (settle) {
          const s = settle(result);
          clear(phases);
          for (const p of s.phases)
            append(
              phases,
              el(
                'li',
                { class: 'done' },
                el('span', { class: 'phase-name' }, p.name),
                el('progress', { max: 1, value: 1, 'aria-label': `${o.label} progress` }),
                el('span', { class: 'muted phase-time' }, fmtMs(p.ms)),
              ),
            );
          if (s.totalMs !== undefined && Number.isFinite(s.totalMs)) lastElapsed = s.totalMs;
        }
        elapsed.textContent = `Done in ${fmtMs(lastElapsed)}`;
        return result;
      } catch (e) {
        finishPhase();
        const m = (e as Error)?.message ?? String(e);
        if ((e as Error)?.name === 'CancelledError' || m === 'Cancelled by the user.')
          elapsed.textContent = `Cancelled after ${fmtMs(performance.now() - t0)}`;
        else {
          elapsed.textContent = `Failed after ${fmtMs(performance.now() - t0)}`;
          error(m);
        }
        return undefined;
      } finally {
        clearInterval(tick);
        setBusy(false);
      }
    },
  };
}
