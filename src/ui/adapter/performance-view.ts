/**
 * "Measure this GPU": the benchmark's short form run in the Worker, shown in the adapter card and
 * attached to the probe reports that follow (their "Performance of this GPU" section), so a report
 * from a user's Mac carries that Mac's own figures.
 */
import type { PerformanceSummary } from '../../parity/report.ts';
import type { EngineProxy } from '../common/engine-client.ts';
import { settledProgress } from '../common/engine-client.ts';
import { append, byId, clear, el } from '../common/dom.ts';
import { num, str } from '../common/format.ts';

const fix = (v: number | undefined, digits: number, unit = '') =>
  v === undefined || !Number.isFinite(v) ? '—' : `${v.toFixed(digits)}${unit}`;

/** Definition list of the figures (also used by the report view). */
export function performanceList(p: PerformanceSummary): HTMLElement {
  const row = (k: string, v: string) => [el('dt', {}, k), el('dd', {}, v)];
  return el(
    'dl',
    { class: 'kv compact', 'data-testid': 'performance' },
    ...row('Copy bandwidth', fix(p.copyGBps, 2, ' GB/s')),
    ...row(
      'FMA f32',
      fix(p.fmaF32Gflops, 1, ' GFLOP/s') +
        (p.fmaF16Gflops !== undefined ? ` · f16 ${fix(p.fmaF16Gflops, 1, ' GFLOP/s')}` : ''),
    ),
    ...row('4-bit matvec (12B MLP, M = 1)', `${fix(p.matvec4bitBwRatio, 3)} × copy bandwidth`),
    // the matvec alone (a row of the report's "where a token goes" is the whole step's)
    ...row('4-bit matvec, 4 rows vs 1 row (a verify block of K = 4)', `${fix(p.k4VsM1, 2)} ×`),
    ...(p.gateUp4bitBwRatio !== undefined
      ? row('MLP gate + up + GeGLU (M = 1)', `${fix(p.gateUp4bitBwRatio, 3)} × copy bandwidth`)
      : []),
    ...row('Prefill matmul', `${fix(p.prefillFlopRatio, 3)} × FMA${p.prefillRows ? ` (M = ${p.prefillRows})` : ''}`),
    ...(p.msPerChainToken !== undefined
      ? row(
          'Chain token end to end',
          `${fix(p.msPerChainToken, 1, ' ms')} = ${fix(p.chainTokensPerSecond, 1, ' tokens/s')}${p.e2eModel ? ` (${p.e2eModel})` : ''}${p.warmupFmaRatio !== undefined ? `; after a warm-up whose last FMA rate was ${fix(p.warmupFmaRatio, 2)} × the yardstick (a GPU lowers its clocks when idle)` : ''}`,
        )
      : []),
    ...(p.breakdown
      ? row(
          'Where a token goes',
          `recording ${fix(p.breakdown.encodeMs, 2, ' ms')} · submit ${fix(p.breakdown.submitMs, 2, ' ms')} · waiting for the GPU ${fix(p.breakdown.waitMs, 2, ' ms')}${p.breakdown.gpuMs !== undefined ? ` · GPU kernels ${fix(p.breakdown.gpuMs, 2, ' ms')} (timed in a separate run with a timestamp around every dispatch, which on some adapters costs more than the token itself${p.breakdown.blockGpuMs !== undefined ? `; a verify block of K = 4: ${fix(p.breakdown.blockGpuMs, 2, ' ms')}` : ''})` : ''}${p.dispatchesPerToken !== undefined ? ` · ${fix(p.dispatchesPerToken, 0)} dispatches` : ''}`,
        )
      : []),
    ...row('Timing', p.timing),
  );
}

/** A typed copy of an untrusted report's performance block (numbers coerced, strings cut). */
export function normalizePerformance(x: unknown): PerformanceSummary | undefined {
  if (typeof x !== 'object' || x === null) return undefined;
  const o = x as Record<string, unknown>;
  const opt = (v: unknown) => (v === undefined ? undefined : num(v));
  return {
    timing: str(o.timing, 40),
    copyGBps: num(o.copyGBps),
    fmaF32Gflops: num(o.fmaF32Gflops),
    fmaF16Gflops: opt(o.fmaF16Gflops),
    matvec4bitBwRatio: opt(o.matvec4bitBwRatio),
    k4VsM1: opt(o.k4VsM1),
    gateUp4bitBwRatio: opt(o.gateUp4bitBwRatio),
    prefillFlopRatio: opt(o.prefillFlopRatio),
    prefillRows: opt(o.prefillRows),
    e2eModel: o.e2eModel === undefined ? undefined : str(o.e2eModel, 120),
    msPerChainToken: opt(o.msPerChainToken),
    chainTokensPerSecond: opt(o.chainTokensPerSecond),
    dispatchesPerToken: opt(o.dispatchesPerToken),
    warmupFmaRatio: opt(o.warmupFmaRatio),
    breakdown: normalizeBreakdown(o.breakdown),
  };
}

function normalizeBreakdown(x: unknown): PerformanceSummary['breakdown'] {
  if (typeof x !== 'object' || x === null) return undefined;
  const o = x as Record<string, unknown>;
  return {
    encodeMs: num(o.encodeMs),
    submitMs: num(o.submitMs),
    waitMs: num(o.waitMs),
    gpuMs: o.gpuMs === undefined ? undefined : num(o.gpuMs),
    blockGpuMs: o.blockGpuMs === undefined ? undefined : num(o.blockGpuMs),
  };
}

export function wireBench(engine: EngineProxy): void {
  const button = byId<HTMLButtonElement>('run-bench');
  const status = byId('bench-status');
  const out = byId('bench-result');
  button.disabled = false;
  button.addEventListener('click', async () => {
    button.disabled = true;
    status.dataset.state = 'running';
    status.textContent = 'Measuring (about a minute)…';
    clear(out);
    const t0 = performance.now();
    const progress = settledProgress((p: { detail?: string }) => {
      status.textContent = `Measuring… ${((performance.now() - t0) / 1000).toFixed(0)} s${p.detail ? ` · ${p.detail.slice(0, 80)}` : ''}`;
    });
    try {
      const report = await engine.runBench(`bench-${Date.now()}`, progress.callback).finally(progress.close);
      const s = report.summary;
      append(out, performanceList({ timing: report.timing, ...s }));
      status.textContent = `Measured in ${report.seconds.toFixed(0)} s; attached to the next probe reports.`;
      status.dataset.state = 'pass';
    } catch (e) {
      status.textContent = `Measurement failed: ${(e as Error).message}`;
      status.dataset.state = 'fail';
    } finally {
      button.disabled = false;
    }
  });
}
