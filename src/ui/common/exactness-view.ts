/**
 * The exactness self-test's line in a verdict card (probe, trace, generation), and its warning when it failed:
 * the self-test ran on this adapter before the run (src/parity/exactness-gate.ts), and a verdict made where it
 * failed is no reference. Reports made before the self-test existed carry none: nothing is shown for them.
 */
import type { ExactnessSelfTestSummary } from '../../parity/report.ts';
import { el } from './dom.ts';
import { fmtMs } from './format.ts';

/** The line in words: passed or failed, how many checks, which kernel classes, cached or run now. */
export function exactnessText(s: ExactnessSelfTestSummary): string {
  const classes = `${s.kernelClasses.join(' and ')} kernels`;
  const when = s.cached ? `result kept from an earlier run (${fmtMs(s.ms)})` : `ran in ${fmtMs(s.ms)}`;
  const fault = s.fault ? `; a fault was injected in ${s.fault} to test the test` : '';
  return s.ok
    ? `Exactness self-test passed on this adapter: ${s.checks} verify blocks (K = 8, 4, 2 across the ring's wrap, f32 and bf16, ${classes}) equal the single-token chain byte for byte; ${when}${fault}.`
    : `Exactness self-test FAILED on this adapter: ${s.failed} of ${s.checks} verify blocks differ from the single-token chain (${classes}), first in ${s.kernel ?? 'no single kernel'}; ${when}${fault}.`;
}

/** The nodes a verdict card shows for the report's self-test (none when it has no self-test). */
export function exactnessNodes(s: ExactnessSelfTestSummary | undefined): HTMLElement[] {
  if (!s) return [];
  const line = el(
    'p',
    {
      class: `small exactness ${s.ok ? 'pass' : 'fail'}`,
      'data-testid': 'exactness-selftest',
      'data-ok': String(s.ok),
    },
    exactnessText(s),
  );
  if (s.ok) return [line];
  return [
    el(
      'p',
      { class: 'error exactness-warning', role: 'alert', 'data-testid': 'exactness-warning' },
      s.warning ??
        'This shader compiler does not keep verify rows exact on this machine, so "exact" verdicts here are not a reference.',
    ),
    line,
  ];
}
