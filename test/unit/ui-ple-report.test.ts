/**
 * The page's report view of the E-series per-layer input stage (`ple`, ETargetModel.stageOrder) in Node: a report's
 * ple stages and a first divergence on one survive the report reader (unknown stages are dropped), the heatmap gets
 * a ple row between the MLP and the layer output (KV-shared layers included) and names it in the readout, and
 * reports without it keep their rows.
 */
import { describe, expect, it } from 'vitest';
import { equalReport } from '../e2e/sample-report.ts';
import { readReport } from '../../src/ui/report/report-model.ts';
import {
  buildHeatmap,
  HEAT_STAGES,
  MOE_HEAT_STAGES,
  PLE_HEAT_STAGES,
  heatStagesOf,
} from '../../src/ui/report/heatmap-model.ts';
import { describeCell } from '../../src/ui/report/heatmap.ts';
import type { LayerKind, RowDiff, Stage, StageDiff } from '../../src/parity/report.ts';

const row = (bytesDiffering: number): RowDiff => ({
  position: 0,
  bytesDiffering,
  bytesTotal: 2048,
  maxAbs: bytesDiffering ? 1.2e-9 : 0,
  maxUlp: bytesDiffering ? 4 : 0,
  nmse: bytesDiffering ? 3e-16 : 0,
});

const OWNER = ['q', 'k', 'v', 'attn', 'mlp', 'ple', 'layer'] as const;
const SHARED = ['q', 'attn', 'mlp', 'ple', 'layer'] as const;

/** An owner layer and a KV-shared layer differing from layer 1's per-layer input on, then the final stages. */
function eStages(): StageDiff[] {
  const layer = (index: number, kind: LayerKind, stages: readonly Stage[], from: number): StageDiff[] =>
    stages.map((stage, i) => ({ layer: index, layerKind: kind, stage, rows: [row(i >= from ? 40 : 0)] }));
  const head = (['final_norm', 'logits'] as const).map((stage) => ({
    layer: null,
    layerKind: null,
    stage,
    rows: [row(500)],
  }));
  return [...layer(0, 'sliding', OWNER, OWNER.length), ...layer(1, 'full', SHARED, 3), ...head];
}

const FIRST = { layer: 1, layerKind: 'full' as const, stage: 'ple' as const, position: 0 };

describe('the per-layer input stage in the report view', () => {
  it('the reader keeps ple stages and a first divergence on ple', () => {
    const r = equalReport();
    const d = r.draws[0];
    // A draw diverges where a logits row differs, and the report with it (validateReport derives both).
    d.rows[0] = { ...d.rows[0], bytesDiffering: 500, maxAbs: 1e-3, maxUlp: 9, nmse: 1e-9 };
    Object.assign(d, { verdict: 'diverges', position: 0, bytesDiffering: 500 });
    r.verdict = 'diverges';
    d.stages = eStages();
    d.firstDivergence = { ...FIRST, text: 'first divergence: layer 1 (full) per-layer input at position 0' };
    const read = readReport(JSON.parse(JSON.stringify(r)));
    if (!read.ok) throw new Error(read.problems.join('; '));
    const got = read.report.draws[0];
    expect(got.stages!.map((s) => `${s.layer}.${s.stage}`)).toEqual(eStages().map((s) => `${s.layer}.${s.stage}`));
    expect(got.firstDivergence?.stage).toBe('ple');
  });

  it('the heatmap has a ple row between the MLP and the layer output and names it', () => {
    expect(PLE_HEAT_STAGES).toEqual(['q', 'k', 'v', 'attn', 'mlp', 'ple', 'layer', 'final_norm', 'logits']);
    const grid = buildHeatmap(eStages(), 'all', 'bytes', { ...FIRST, text: '' });
    expect(grid.stages).toBe(PLE_HEAT_STAGES);
    expect(grid.cells).toHaveLength(OWNER.length + SHARED.length + 2);
    const [ple0, ple1] = [0, 1].map((l) => grid.cells.find((c) => c.stage === 'ple' && c.layer === l)!);
    expect([ple0.row, ple1.row]).toEqual([5, 5]);
    expect(ple0.level).toBe(0);
    expect(ple1.level).toBeGreaterThan(0);
    expect(ple1.first).toBe(true);
    // the shared layer is still marked as such: the ple row does not count as a k stage
    expect(grid.columns.map((c) => c.kvShared === true)).toEqual([false, true, false]);
    expect(describeCell(grid, ple0.col, ple0.row, ple0)).toBe(
      'layer 0 (sliding) · per-layer input (gate, GeLU product, projection, post_per_layer_input_norm; before layer_scalar) over all positions: equal (2,048 bytes)',
    );
    expect(describeCell(grid, ple1.col, ple1.row, ple1)).toMatch(
      /^layer 1 \(full\) · per-layer input .* over all positions: 40 of 2,048 bytes differ .* — first divergence$/,
    );
  });

  it('reports without a ple stage keep their rows; MoE reports keep theirs', () => {
    const noPle = eStages().filter((s) => s.stage !== 'ple');
    expect(heatStagesOf(noPle)).toBe(HEAT_STAGES);
    expect(heatStagesOf([{ stage: 'experts', layerKind: 'sliding' }])).toBe(MOE_HEAT_STAGES);
  });
});
