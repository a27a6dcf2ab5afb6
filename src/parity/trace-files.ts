/**
 * A teacher-forced trace's rows in and out of files: one arm of a Ringside trace report as mlxcel's logit-trace TSV
 * (src/format/logit-trace-tsv.ts), and the rows the judgement reads (trace-judgement.ts) from either kind of file, told
 * apart by their content. Pure text in and out: the CLI reads and writes the files.
 */
import {
  formatLogitTraceTsv,
  LOGIT_TRACE_COLUMNS,
  type LogitTraceMeta,
  metaValue,
  parseLogitTraceTsv,
} from '../format/logit-trace-tsv.ts';
import { type TracePosition, type TraceReport, validateReport } from './report.ts';
import type { TraceRow } from './trace-judgement.ts';

export type TraceArm = 'chain' | 'block';

/** One arm of a trace report's positions as the judgement's rows (the arm's top-k list and nll). */
export function armRows(positions: readonly TracePosition[], arm: TraceArm): TraceRow[] {
  return positions.map((p) => {
    const top = arm === 'chain' ? p.chainTop : p.blockTop;
    return {
      target: p.next,
      nll: arm === 'chain' ? p.nllChain : p.nllBlock,
      ids: top.map((t) => t.id),
      logits: top.map((t) => t.logit),
    };
  });
}

/** Where the traced stream came from, for the TSV's `#corpus` line. */
export interface TraceCorpus {
  /** The text file's name, "pseudo-random" or the --stream file's name. */
  name: string;
  /** Tokens of the whole stream (BOS included). */
  tokens: number;
  /** The BOS id put first, when the stream is a tokenized text. */
  bos?: number | null;
}

/**
 * One arm of a trace report as mlxcel's logit trace: metadata naming the checkpoint, arm, policy, precision, adapter
 * and stream, then one row per traced position, chunk = the verify block it belongs to (width K), pos = its row in
 * that block. mlxcel's rows are the same in both arms, so a chain trace from here and one from mlxcel line up.
 */
export function reportArmTsv(r: TraceReport, arm: TraceArm, corpus?: TraceCorpus): string {
  const p = r.provenance;
  const K = p.block;
  const a = p.adapter;
  const adapter =
    [a.vendor, a.architecture, a.device, a.description].filter((s) => typeof s === 'string' && s).join(' ') ||
    'unknown adapter';
  const meta: LogitTraceMeta[] = [
    { key: 'model', values: [p.target.label] },
    { key: 'checkpoint', values: [p.target.label, 'type', p.target.modelType, 'digest', p.target.digest] },
    { key: 'arm', values: [arm] },
    { key: 'policy', values: [p.policy] },
    { key: 'precision', values: [p.precision] },
    { key: 'adapter', values: [adapter, 'platform', p.platform] },
    { key: 'app', values: [p.app.name, p.app.version, 'created', p.createdAt] },
  ];
  if (corpus) {
    meta.push({ key: 'corpus', values: [corpus.name, 'tokens', String(corpus.tokens)] });
    if (corpus.bos !== undefined)
      meta.push({ key: 'bos', values: [corpus.bos === null ? 'none' : String(corpus.bos)] });
  }
  const topk = r.positions[0]?.chainTop.length ?? 0;
  meta.push(
    {
      key: 'chunks',
      values: [
        String(Math.ceil(r.positions.length / K)),
        'chunk_tokens',
        String(K),
        'topk',
        String(topk),
        // mlxcel's count: the untraced tokens after the BOS (its PREFILL), the option `trace --prefix` took
        'prefill',
        String(p.prefix - (corpus?.bos != null ? 1 : 0)),
      ],
    },
    { key: 'columns', values: [...LOGIT_TRACE_COLUMNS] },
  );
  const rows = armRows(r.positions, arm).map((x, i) => ({
    chunk: Math.floor(i / K),
    pos: i % K,
    target: x.target,
    nll: x.nll,
    ids: [...x.ids],
    logits: [...x.logits],
  }));
  return formatLogitTraceTsv({ meta, rows });
}

/** A trace read for judging: its rows, and words for the summary. */
export interface ReadTrace {
  /** The file (and arm, for a report), for messages. */
  name: string;
  /** "logit-trace TSV" or "Ringside trace report". */
  kind: 'tsv' | 'report';
  rows: TraceRow[];
  /** One line naming model, policy, precision and adapter where the file says them. */
  about: string;
}

/**
 * The rows of a trace file, whichever kind: a JSON object is read as a Ringside trace report (validated; `arm` picks
 * its chain or block rows), anything else as mlxcel's logit-trace TSV. Errors name `file`.
 */
export function readTraceText(text: string, file: string, arm: TraceArm): ReadTrace {
  if (text.trimStart().startsWith('{')) {
    let x: unknown;
    try {
      x = JSON.parse(text);
    } catch (e) {
      throw new Error(`${file}: starts like JSON but is not valid JSON (${(e as Error).message})`);
    }
    const errs = validateReport(x);
    if (errs.length) throw new Error(`${file}: not a valid Ringside report: ${errs.slice(0, 3).join('; ')}`);
    const r = x as TraceReport & { linkCompacted?: boolean };
    if (r.kind !== 'trace')
      throw new Error(`${file}: a ${r.kind} report; compare-traces reads trace reports and logit-trace TSVs`);
    if (r.linkCompacted)
      throw new Error(
        `${file}: a trace compacted for a share link (its top-k lists were cut to fit); judge the report's JSON file instead`,
      );
    const p = r.provenance;
    return {
      name: `${file} (${arm} arm)`,
      kind: 'report',
      rows: armRows(r.positions, arm),
      about: `${p.target.label}, ${arm} arm, policy ${p.policy}, ${p.precision}, K = ${p.block}, ${p.adapter.description || p.adapter.vendor || 'unknown adapter'}`,
    };
  }
  const t = parseLogitTraceTsv(text, file);
  const about = (['model', 'arm', 'policy', 'precision', 'adapter'] as const)
    .map((k) => {
      const v = metaValue(t, k);
      return v === undefined ? undefined : k === 'model' ? v : `${k} ${v}`;
    })
    .filter(Boolean)
    .join(', ');
  return { name: file, kind: 'tsv', rows: t.rows, about: about || 'no metadata' };
}
