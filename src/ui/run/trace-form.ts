/**
 * The teacher-forced trace's settings (prefix, traced positions, K, policy, precision) and its Run.
 * Prefix and traced default from the loaded target's sliding window: min(1536, 2.5 W) and min(256, 3 W),
 * which is 1,536 + 256 (docs/MODEL.md section 8) for real Gemma 4 windows, 80 + 96 for the demo model's W = 32 and
 * 40 + 48 for the tiny-a fixture's W = 16.
 */
import type { EngineProxy } from '../common/engine-client.ts';
import type { TraceOptions, TraceReport } from '../../parity/trace.ts';
import type { LoadedSummary } from '../../worker/engine.ts';
import { el } from '../common/dom.ts';
import { fmtInt } from '../common/format.ts';
import { blockSelect, policyField, precisionField, wholeNumber, type PolicyInfo } from './form-fields.ts';
import type { JobRunner } from './job-runner.ts';
import { tracePhases } from './phase-times.ts';
import { loadFormSettings, saveFormSettings, type TraceSettings } from '../common/recent.ts';

export function traceDefaults(window: number): { prefix: number; traced: number } {
  const w = Number.isFinite(window) && window >= 1 ? window : 512;
  return { prefix: Math.min(1536, Math.ceil(2.5 * w)), traced: Math.min(256, 3 * w) };
}

/**
 * A loaded target's defaults: from its sliding window (Gemma 4), or docs/MODEL.md section 8's 1,536 + 256 for a
 * Qwen3.5 target, which has no window to scale them by.
 */
function defaultsFor(target: LoadedSummary | undefined): { prefix: number; traced: number } {
  return target?.family === 'qwen3_5' ? { prefix: 1536, traced: 256 } : traceDefaults(target?.window ?? NaN);
}

export function createTraceForm(
  engine: EngineProxy,
  job: JobRunner,
  onReport: (r: TraceReport) => void,
): {
  root: HTMLElement;
  policies(list: PolicyInfo[]): void;
  setModel(target: LoadedSummary | undefined): void;
} {
  const prefix = el('input', {
    type: 'number',
    min: 1,
    max: 65536,
    step: 1,
    size: 6,
    'data-testid': 'trace-prefix',
    'aria-describedby': 'trace-hint',
  });
  const traced = el('input', {
    type: 'number',
    min: 1,
    max: 8192,
    step: 1,
    size: 5,
    'data-testid': 'trace-traced',
    'aria-describedby': 'trace-hint',
  });
  const block = blockSelect('trace-block');
  const policy = policyField('trace-policy');
  const precision = precisionField('trace-precision', 'trace-precision');
  const hint = el('p', { class: 'small muted', id: 'trace-hint', 'data-testid': 'trace-hint' });
  const root = el(
    'div',
    {},
    el(
      'div',
      { class: 'settings' },
      el('label', {}, 'Prefix ', prefix, ' tokens'),
      el('label', {}, 'Traced ', traced, ' positions'),
      el('label', {}, 'Block width K ', block),
      el('label', {}, 'Policy ', policy.select),
      precision.root,
    ),
    hint,
    policy.help,
    policy.chips,
    job.controls,
    job.phases,
    job.message,
  );

  const setHint = (target: LoadedSummary | undefined) => {
    const w = target?.window;
    const d = defaultsFor(target);
    hint.textContent =
      `A fixed pseudo-random token stream: the prefix is prefilled untraced, then every traced position runs as a one-token chain and in blocks of K, and their logits are compared. ` +
      (target?.family === 'qwen3_5'
        ? `This Qwen3.5 target has no sliding window (its Gated DeltaNet layers carry a recurrent state, its full layers a linear KV cache): defaults prefix ${fmtInt(d.prefix)}, traced ${fmtInt(d.traced)}.`
        : w
          ? `Defaults for this target's ${fmtInt(w)}-slot window: prefix ${fmtInt(d.prefix)}, traced ${fmtInt(d.traced)} (2.5 W, at most 1,536, and 3 W, at most 256).`
          : "Prefix and traced default from the target's window once one is loaded.");
  };
  setHint(undefined);
  let modelDigest: string | undefined;
  let saved: Partial<TraceSettings> | undefined;
  const restored = loadFormSettings<TraceSettings>('trace').then((s) => {
    saved = s;
    if (!s) return;
    if (typeof s.block === 'number') block.value = String(s.block);
    precision.set(s.precision);
    policy.set(s.policy);
  });

  job.run.addEventListener('click', async () => {
    let opts: TraceOptions;
    try {
      opts = {
        prefix: wholeNumber(prefix.value, 'The prefix', 1, 65536),
        traced: wholeNumber(traced.value, 'The traced positions', 1, 8192),
        block: Number(block.value),
        policy: policy.select.value,
        precision: precision.value(),
      };
    } catch (e) {
      job.message.replaceChildren();
      job.error((e as Error).message);
      return;
    }
    void saveFormSettings<TraceSettings>('trace', {
      block: opts.block,
      policy: opts.policy,
      precision: opts.precision,
    });
    const report = await job.start(
      (jobId, onProgress) => engine.runTrace(opts, jobId, onProgress),
      [prefix, traced, block, policy.select, precision.f32, precision.bf16],
      tracePhases,
    );
    if (report) onReport(report);
  });

  return {
    root,
    policies(list) {
      policy.fill(list);
      void restored.then(() => policy.set(saved?.policy));
    },
    setModel(target) {
      // New defaults only when another target arrives: edits to the fields survive unrelated refreshes.
      if (target?.digest === modelDigest) return;
      modelDigest = target?.digest;
      setHint(target);
      if (!target) return;
      const d = defaultsFor(target);
      prefix.value = String(d.prefix);
      traced.value = String(d.traced);
    },
  };
}
