/**
 * The one door for reports into the page: validateReport (its problems are what the user sees), then the
 * deep, typed copy of the report's kind. A file, a share link and a live run all come through here.
 */
import { validateReport, type ProbeReport } from '../../parity/report.ts';
import { normalizeReport } from './report-model.ts';
import { normalizeTrace, type TraceView } from '../trace/trace-model.ts';

export type AnyReport = { kind: 'probe'; report: ProbeReport } | { kind: 'trace'; report: TraceView };
export type ReadAnyResult = ({ ok: true } & AnyReport) | { ok: false; problems: string[] };

export function readAnyReport(x: unknown): ReadAnyResult {
  const problems = validateReport(x);
  if (problems.length) return { ok: false, problems };
  const o = x as Record<string, unknown>;
  return o.kind === 'trace'
    ? { ok: true, kind: 'trace', report: normalizeTrace(o) }
    : { ok: true, kind: 'probe', report: normalizeReport(o) };
}
