/** A trace judgement (src/parity/trace-judgement.ts) as the command line prints it: `trace` and `compare-traces`. */
import { type TraceJudgement, VERDICT_TEXT } from '../parity/trace-judgement.ts';

const pct = (a: number, b: number) => (b ? `${((100 * a) / b).toFixed(3)}%` : '—');
const signed = (v: number) => `${v >= 0 ? '+' : ''}${v.toFixed(3)}`;
const sci = (v: number | null) => (v === null ? '—' : v === 0 ? '0' : v.toExponential(3));

/** The judgement's lines: disagreement overall and on decided positions, the gap table, ranks, delta, perplexity, verdict. */
export function judgementLines(j: TraceJudgement, decidedGap: number): string[] {
  const n = j.positions;
  const out = [
    `${'top-1 disagreement'.padEnd(38)}${String(j.disagreements).padStart(7)} of ${String(n).padEnd(7)} ${pct(j.disagreements, n).padStart(8)}`,
    `${`  on decided positions (gap >= ${decidedGap})`.padEnd(38)}${String(j.decidedDisagreements).padStart(7)} of ${String(j.decided).padEnd(7)} ${pct(j.decidedDisagreements, j.decided).padStart(8)}   the gating metric`,
    '',
    `${'reference top-2 gap'.padEnd(22)}${'positions'.padStart(10)}${'disagreed'.padStart(11)}${'rate'.padStart(10)}`,
    ...j.buckets.map(
      (b) =>
        `${`  [${b.from}, ${b.to === null ? 'inf' : b.to})`.padEnd(22)}${String(b.positions).padStart(10)}${String(b.disagreed).padStart(11)}${pct(b.disagreed, b.positions).padStart(10)}`,
    ),
  ];
  const ranks = Object.entries(j.ranks).filter(([, v]) => v > 0);
  if (ranks.length) {
    out.push('', "where the reference's top-1 landed in the candidate's list");
    for (const [k, v] of ranks)
      out.push(`  rank ${k.padEnd(6)}${String(v).padStart(6)}  (${pct(v, j.disagreements)} of disagreements)`);
  }
  const d = j.delta;
  out.push(
    '',
    `|delta logit| of the reference's top-1 where the candidate lists it: p50 ${sci(d.p50)}  p90 ${sci(d.p90)}  p99 ${sci(d.p99)}  max ${sci(d.max)}`,
    `perplexity  reference ${j.perplexity.reference.toPrecision(8)}  candidate ${j.perplexity.candidate.toPrecision(8)}  ${signed((j.perplexity.candidate / j.perplexity.reference - 1) * 100)}% (higher is worse)`,
    '',
    `verdict: ${j.verdict} (${VERDICT_TEXT[j.verdict]})`,
  );
  return out;
}
