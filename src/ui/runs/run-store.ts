/**
 * Every run of the visit: the probe, trace and generation results this page produced, and the reports opened from
 * files and links, in the order they came, each kept with the document it came as (what its exports pass on) and
 * its typed reading (what the views render). The page opens, exports and compares them from this list; nothing is
 * replaced when the next run ends. Pure: no DOM; kept in memory for the visit (a reload starts an empty list).
 */
import type { ProbeReport } from '../../parity/report.ts';
import { fmtInt, fmtList } from '../common/format.ts';
import type { GenerationRun } from '../generation/generation-model.ts';
import { generationVerdict } from '../generation/generation-model.ts';
import type { TraceView } from '../trace/trace-model.ts';

/** A run's typed reading, by kind. */
export type RunDocument =
  | { kind: 'probe'; report: ProbeReport }
  | { kind: 'trace'; report: TraceView }
  | { kind: 'generation'; run: GenerationRun };

export type RunOrigin = 'live' | 'file' | 'link';

export interface RunEntry {
  /** 1, 2, 3 ... in the order the runs came. */
  id: number;
  origin: RunOrigin;
  /** Where it came from, as the card's badge says it: "live run, 03:53:31", "file probe.json", "shared link". */
  source: string;
  /** The document as received (validated): what JSON export and share links pass on. */
  raw: unknown;
  doc: RunDocument;
}

/** One line of the run list: what kind of run, its verdict, its settings and its model. */
export interface RunSummary {
  kind: string;
  verdict: string;
  /** The verdict says the two arms differ. */
  bad: boolean;
  setup: string;
  model: string;
  createdAt: string;
}

export const KIND_NAMES: Record<RunDocument['kind'], string> = {
  probe: 'Block-versus-chain probe',
  trace: 'Teacher-forced trace',
  generation: 'Classic vs MTP generation',
};

export function summarizeRun(doc: RunDocument): RunSummary {
  if (doc.kind === 'generation') {
    const { options: o, result: r } = doc.run;
    const v = generationVerdict(r).verdict;
    return {
      kind: KIND_NAMES.generation,
      verdict: v,
      bad: v !== 'identical',
      setup: `${o.policy} · ${o.precision} · K = ${fmtInt(o.block)} · ${fmtInt(r.classic.tokens.length)} tokens`,
      model: r.provenance?.target.label ?? '—',
      createdAt: doc.run.createdAt,
    };
  }
  const p = doc.report.provenance;
  const common = `${p.policy} · ${p.precision} · K = ${fmtInt(p.block)}`;
  return {
    kind: KIND_NAMES[doc.kind],
    verdict: doc.report.verdict,
    bad: doc.report.verdict !== 'equal',
    setup:
      doc.kind === 'probe'
        ? `${common} · draws ${fmtList(p.drawLengths)}`
        : `${common} · prefix ${fmtInt(doc.report.provenance.prefix)}, traced ${fmtInt(doc.report.provenance.traced)}`,
    model: p.target.label || p.target.modelType,
    createdAt: p.createdAt,
  };
}

/** What a comparison takes: two probe reports, or two traces (a trace report is one; a TSV is the other kind). */
export function comparableKind(doc: RunDocument): 'probe' | 'trace' | undefined {
  return doc.kind === 'generation' ? undefined : doc.kind;
}

export interface RunStore {
  add(run: Omit<RunEntry, 'id'>): RunEntry;
  list(): readonly RunEntry[];
  get(id: number): RunEntry | undefined;
  /** Called after every add. */
  subscribe(listener: () => void): void;
}

export function createRunStore(): RunStore {
  const runs: RunEntry[] = [];
  const listeners: (() => void)[] = [];
  return {
    add(run) {
      // The same document opened twice (a file chosen again, a link reloaded) is one run.
      const same = runs.find((r) => r.raw === run.raw);
      if (same) return same;
      const entry = { ...run, id: runs.length + 1 };
      runs.push(entry);
      for (const l of listeners) l();
      return entry;
    },
    list: () => runs,
    get: (id) => runs.find((r) => r.id === id),
    subscribe(listener) {
      listeners.push(listener);
    },
  };
}
