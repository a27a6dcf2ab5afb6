/**
 * The probe's settings (draw lengths, K, policy, precision, localize) and its Run; the probe runs in the
 * engine Worker and the report goes to `onReport`.
 */
import type { EngineProxy } from '../common/engine-client.ts';
import type { ProbeOptions } from '../../parity/probe.ts';
import type { ProbeReport } from '../../parity/report.ts';
import { el } from '../common/dom.ts';
import type { LoadedSummary } from '../../worker/engine.ts';
import { QWEN_DRAW_LENGTHS } from '../../parity/draws.ts';
import { parseLengths } from '../common/format.ts';
import { blockSelect, policyField, precisionField, type PolicyInfo } from './form-fields.ts';
import type { JobRunner } from './job-runner.ts';
import { probePhases } from './phase-times.ts';
import { loadSettings, saveSettings, type RunSettings } from '../common/recent.ts';

const GEMMA_HINT =
  "Empty draw lengths run mlxcel's draws: 8, 8, 8 and a long draw of W + 32 tokens (at most 1,536) that wraps the ring.";

export function createProbeForm(
  engine: EngineProxy,
  job: JobRunner,
  onReport: (r: ProbeReport) => void,
): { root: HTMLElement; policies(list: PolicyInfo[]): void; setModel(target: LoadedSummary | undefined): void } {
  const lengths = el('input', {
    type: 'text',
    inputmode: 'numeric',
    placeholder: '8, 8, 8 + long draw',
    size: 16,
    'data-testid': 'lengths',
    'aria-describedby': 'lengths-hint',
  });
  const block = blockSelect('block');
  const policy = policyField('policy');
  const precision = precisionField('precision', 'precision');
  const localize = el('input', { type: 'checkbox', checked: true, 'data-testid': 'localize' });
  const hint = el('p', { class: 'small muted', id: 'lengths-hint', 'data-testid': 'lengths-hint' }, GEMMA_HINT);
  const root = el(
    'div',
    {},
    el(
      'div',
      { class: 'settings' },
      el('label', {}, 'Draw lengths ', lengths),
      el('label', {}, 'Block width K ', block),
      el('label', {}, 'Policy ', policy.select),
      precision.root,
      el('label', {}, localize, ' Localize the first divergence'),
    ),
    hint,
    policy.help,
    policy.chips,
    job.controls,
    job.phases,
    job.message,
  );

  let saved: RunSettings | undefined;
  const restored = loadSettings().then((s) => {
    saved = s;
    if (!s) return;
    lengths.value = s.lengths;
    block.value = String(s.block);
    precision.set(s.precision);
    localize.checked = s.localize;
    policy.set(s.policy);
  });

  job.run.addEventListener('click', async () => {
    let parsed: number[] | undefined;
    try {
      parsed = parseLengths(lengths.value);
    } catch (e) {
      job.message.replaceChildren();
      job.error((e as Error).message);
      lengths.focus();
      return;
    }
    const settings: RunSettings = {
      lengths: lengths.value,
      block: Number(block.value),
      policy: policy.select.value,
      precision: precision.value(),
      localize: localize.checked,
    };
    void saveSettings(settings);
    const opts: ProbeOptions = {
      block: settings.block,
      policy: settings.policy,
      precision: settings.precision,
      localize: settings.localize,
      ...(parsed ? { lengths: parsed } : {}),
    };
    const report = await job.start(
      (jobId, onProgress) => engine.runProbe(opts, jobId, onProgress),
      [lengths, block, policy.select, precision.f32, precision.bf16, localize],
      probePhases,
    );
    if (report) onReport(report);
  });

  return {
    root,
    setModel(target) {
      // A Qwen3.5 target has no ring to wrap: its default draws are fixed (src/parity/draws.ts).
      const qwen = target?.family === 'qwen3_5';
      hint.textContent = qwen
        ? `Empty draw lengths run ${QWEN_DRAW_LENGTHS.join(', ')}: Qwen3.5 has no sliding ring; the long draw passes the conv window many times and reads the full-attention keys in two segments.`
        : GEMMA_HINT;
      lengths.placeholder = qwen ? QWEN_DRAW_LENGTHS.join(', ') : '8, 8, 8 + long draw';
    },
    policies(list) {
      policy.fill(list);
      void restored.then(() => policy.set(saved?.policy));
    },
  };
}
