/**
 * Hand-made trace reports (kind "trace", ringside-report/1) for rendering tests that need no model: a
 * diverging trace shaped like a 12B run on Metal (near-tie and decided disagreements), an equal one, and a
 * long one for the share-link size rules. Metrics come from the parity code's own traceMetrics.
 */
import { REPORT_SCHEMA } from '../../src/parity/report.ts';
import { traceMetrics, traceVerdict, type TracePosition, type TraceReport } from '../../src/parity/trace.ts';
import { equalReport } from './sample-report.ts';

/** A small deterministic generator (the same numbers on every run). */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x297a2d39) >>> 0;
    return s / 2 ** 32;
  };
}

export interface SampleTraceOptions {
  prefix?: number;
  traced?: number;
  policy?: string;
  /** Indices (0-based into the traced positions) whose top-1 differs: even ones near ties, odd ones decided. */
  disagreeAt?: number[];
  /** Every row byte-equal (exact policy). */
  equal?: boolean;
  topK?: number;
}

export function sampleTrace(o: SampleTraceOptions = {}): TraceReport {
  const prefix = o.prefix ?? 1536;
  const traced = o.traced ?? 256;
  const topK = o.topK ?? 5;
  const rand = rng(prefix * 7919 + traced);
  const dis = new Set(o.disagreeAt ?? []);
  const positions: TracePosition[] = Array.from({ length: traced }, (_, i) => {
    // Disagreements at even indices are near ties (gap < 0.1), at odd ones decided (gap 2 to 5).
    const gap = !dis.has(i) ? 10 ** (rand() * 2.3 - 1.5) : i % 2 === 0 ? 10 ** (-2 + rand()) : 2 + 3 * rand();
    const top = 20 + 5 * rand();
    const chainTop = Array.from({ length: topK }, (_, k) => ({
      id: (i * 131 + k * 17) % 262144,
      logit: k === 0 ? top : top - gap - k * 0.3,
    }));
    const agree = !dis.has(i);
    const delta = o.equal ? 0 : agree ? 10 ** (rand() * 3 - 6) : gap * (1.2 + rand());
    // The block arm's list: the chain's with the chosen logit moved by delta, or the chain's top-1 and top-2 ids
    // swapped (the logits stay in descending order, as every top-k list has them).
    const blockTop = agree
      ? chainTop.map((t, j) => ({ ...t, logit: t.logit + (j === 0 ? -delta : delta / 2) }))
      : chainTop.map((t, j) => ({ id: j === 0 ? chainTop[1].id : j === 1 ? chainTop[0].id : t.id, logit: t.logit }));
    const nllChain = 8 + 4 * rand();
    return {
      position: prefix + i,
      next: (i * 37 + 11) % 262144,
      chainTop,
      blockTop,
      nllChain,
      nllBlock: o.equal ? nllChain : nllChain + (rand() - 0.5) * 1e-3,
      gap,
      deltaChosen: delta,
      agree,
      bytesDiffering: o.equal ? 0 : 200_000 + Math.floor(rand() * 100_000),
    };
  });
  const metrics = traceMetrics(positions);
  const base = equalReport().provenance;
  return {
    schema: REPORT_SCHEMA,
    kind: 'trace',
    ...traceVerdict(metrics),
    provenance: {
      ...base,
      policy: o.policy ?? (o.equal ? 'exact' : 'mlx-metal'),
      drawLengths: [],
      draftPosition: undefined,
      assistant: undefined,
      prefix,
      traced,
    },
    metrics,
    positions,
    timings: { totalMs: 61_000, prefillMs: 4_100, chainMs: 41_000, blockMs: 15_900 },
  };
}

/** JSON round trip: what a file or a link delivers (undefined fields gone). */
export const asJson = <T>(x: T): T => JSON.parse(JSON.stringify(x)) as T;
