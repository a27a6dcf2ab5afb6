/**
 * The progress list of a finished run, from the run's own timings: one line per part the result times (each draw's
 * prefill, chain, block, state and localize; a trace's prefill, chain and block; each generation arm's prefill and
 * decode) and the total, so the list and the report read the same numbers. While a run goes, the list times its
 * phases by the page's clock from the engine's progress messages, which arrive only after a phase's first step;
 * once it is done, these replace them. The names are the live lines' names (the engine's progress phases).
 */
import { drawPhaseLabel } from '../../parity/draws.ts';
import { SELFTEST_PHASE } from '../../parity/exactness-gate.ts';
import type { ExactnessSelfTestSummary, ProbeReport } from '../../parity/report.ts';
import type { TraceReport } from '../../parity/trace.ts';
import type { GenerationResult } from '../generation/generation-model.ts';

export interface SettledPhase {
  name: string;
  ms: number;
}

export interface SettledRun {
  phases: SettledPhase[];
  /** The run's total as its result measured it; absent where the result has none (the page's clock stands). */
  totalMs?: number;
}

/**
 * The exactness self-test's line first when it ran in this run (not when its result was read from a cache), with
 * the time its summary records. The total stays the result's own ("Done in" reads as the report's Total), which
 * times the run after the self-test, as the report keeps the self-test's time apart (provenance).
 */
function afterSelfTest(run: SettledRun, s: ExactnessSelfTestSummary | undefined): SettledRun {
  if (!s || s.cached) return run;
  return { ...run, phases: [{ name: SELFTEST_PHASE, ms: s.ms }, ...run.phases] };
}

export function probePhases(r: ProbeReport): SettledRun {
  const phases: SettledPhase[] = [];
  for (const d of r.draws) {
    const name = (phase: string) => drawPhaseLabel(d.index, r.draws.length, d.promptLength, phase);
    const t = d.timings;
    phases.push(
      { name: name('prefill'), ms: t.prefillMs },
      { name: name('chain'), ms: t.chainMs },
      { name: name('block'), ms: t.blockMs },
    );
    if (t.stateMs !== undefined) phases.push({ name: name('state'), ms: t.stateMs });
    if (t.localizeMs !== undefined) phases.push({ name: name('localize'), ms: t.localizeMs });
  }
  return afterSelfTest({ phases, totalMs: r.timings.totalMs }, r.provenance.exactnessSelfTest);
}

export function tracePhases(r: TraceReport): SettledRun {
  const t = r.timings;
  return afterSelfTest(
    {
      phases: [
        { name: 'prefill', ms: t.prefillMs },
        { name: 'chain', ms: t.chainMs },
        { name: 'block', ms: t.blockMs },
      ],
      totalMs: t.totalMs,
    },
    r.provenance.exactnessSelfTest,
  );
}

export function generationPhases(r: GenerationResult): SettledRun {
  return afterSelfTest(
    {
      phases: [
        { name: 'classic prefill', ms: r.classic.timings.prefillMs },
        { name: 'classic decode', ms: r.classic.timings.decodeMs },
        { name: 'MTP prefill', ms: r.mtp.timings.prefillMs },
        { name: 'MTP decode', ms: r.mtp.timings.decodeMs },
      ],
    },
    r.provenance?.exactnessSelfTest,
  );
}
