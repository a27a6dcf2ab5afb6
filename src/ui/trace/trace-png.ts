/** The shareable picture of a trace report: verdict, the disagreement metrics, the |Δ logit| chart, provenance. */
import type { TraceReport } from '../../parity/trace.ts';
import { familyName } from '../../parity/report.ts';
import { fmtInt, fmtMs, fmtSci, shortDigest } from '../common/format.ts';
import { adapterLine, canvasPng, PngPainter, renderCanvas } from '../share/png-export.ts';
import { drawTraceChart, traceChartLayout } from './trace-chart.ts';
import { bucketLabel, DECIDED_GAP, traceConsequence, traceSetup } from './trace-model.ts';

function paint(ctx: CanvasRenderingContext2D, r: TraceReport): number {
  const p = r.provenance;
  const m = r.metrics;
  const P = new PngPainter(ctx);
  P.header(`◎ Ringside · ${familyName(p.target.modelType)} teacher-forced trace (chain vs block)`, p.createdAt);
  P.banner(r.verdict === 'diverges' ? 'DIVERGES' : 'EQUAL', r.verdict === 'diverges', r.summary, traceConsequence(r));
  P.text(traceSetup(r), 15, '#1b1f24');
  P.text(
    `rows byte-equal ${fmtInt(m.rowsByteEqual)} of ${fmtInt(m.positions)} · top-1 disagreements ${fmtInt(m.top1Disagreements)} of ${fmtInt(m.positions)} · ` +
      `decided (gap ≥ ${DECIDED_GAP.toFixed(1)}) ${fmtInt(m.decidedDisagreements)} of ${fmtInt(m.decidedPositions)}`,
    15,
    m.top1Disagreements > 0 ? '#c0362c' : '#1b1f24',
    '600',
  );
  P.text(
    `|Δ logit| p50 ${fmtSci(m.deltaLogit.p50)} · p90 ${fmtSci(m.deltaLogit.p90)} · p99 ${fmtSci(m.deltaLogit.p99)} · max ${fmtSci(m.deltaLogit.max)} · ` +
      `perplexity chain ${fmtSci(m.perplexity.chain)}, block ${fmtSci(m.perplexity.block)}`,
    14,
    '#1b1f24',
  );
  P.text(
    `disagreements by chain gap: ${m.buckets.map((b) => `${bucketLabel(b)} ${fmtInt(b.disagreements)}/${fmtInt(b.positions)}`).join(' · ')}`,
    14,
    '#5b6470',
  );
  P.y += 8;
  if (r.positions.length) {
    P.text("|Δ logit| of the chain's top-1 per traced position (log scale)", 15, '#1b1f24', '600');
    const L = traceChartLayout(r.positions, P.inner);
    drawTraceChart(ctx, r.positions, L, P.pad, P.y + 4);
    P.y += L.height + 12;
  }
  P.footer([
    adapterLine(p),
    `policy ${p.policy} · ${p.precision} activations · K = ${fmtInt(p.block)} · prefix ${fmtInt(p.prefix)} · traced ${fmtInt(p.traced)} · prefill chunk ${fmtInt(p.prefillChunk)} · total ${fmtMs(r.timings.totalMs)}`,
    `target ${p.target.modelType} ${fmtInt(p.target.layers)} layers, ${p.target.quantization} · digest ${shortDigest(p.target.digest)} · ringside ${p.app.version}`,
  ]);
  return P.end();
}

export const renderTraceCanvas = (r: TraceReport): HTMLCanvasElement => renderCanvas((ctx) => paint(ctx, r));
export const tracePng = (r: TraceReport): Promise<Blob> => canvasPng(renderTraceCanvas(r));
