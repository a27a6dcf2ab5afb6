/**
 * The one door for every document the page opens (a file, a share link, a live run): a probe or trace report
 * (read-report.ts), or a generation run (read-generation.ts), told apart by their schema. Untrusted input comes back
 * as its typed reading or the problems a person can act on.
 */
import { readAnyReport } from '../report/read-report.ts';
import { isGenerationDocument, readGeneration } from '../generation/read-generation.ts';
import type { RunDocument } from './run-store.ts';

export type ReadDocumentResult = { ok: true; doc: RunDocument } | { ok: false; problems: string[] };

export function readDocument(x: unknown): ReadDocumentResult {
  if (isGenerationDocument(x)) {
    const g = readGeneration(x);
    return g.ok ? { ok: true, doc: { kind: 'generation', run: g.run } } : g;
  }
  const r = readAnyReport(x);
  if (!r.ok) return r;
  return {
    ok: true,
    doc: r.kind === 'probe' ? { kind: 'probe', report: r.report } : { kind: 'trace', report: r.report },
  };
}
