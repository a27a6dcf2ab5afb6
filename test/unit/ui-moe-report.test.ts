/**
 * The page's report view of Gemma 4 MoE stages in Node: a report's router / experts stages and its first divergence on
 * an experts stage survive the report reader (not dropped as unknown stages), the heatmap gets the MoE
 * rows in execution order (router and experts between the MLP and the layer output) and names them in the readout,
 * and reports without MoE stages keep their rows.
 */
import { describe, expect, it } from 'vitest';
import { equalReport } from '../e2e/sample-report.ts';
import { readReport } from '../../src/ui/report/report-model.ts';
import {
  buildHeatmap,
  HEAT_STAGES,
  HYBRID_HEAT_STAGES,
  MOE_HEAT_STAGES,
  heatStagesOf,
} from '../../src/ui/report/heatmap-model.ts';
import { describeCell } from '../../src/ui/report/heatmap.ts';
import type { RowDiff, StageDiff } from '../../src/parity/report.ts';

const row = (position: number, bytesDiffering: number): RowDiff => ({
  position,
  bytesDiffering,
  bytesTotal: 2048,
  maxAbs: bytesDiffering ? 2.3e-10 : 0,
  maxUlp: bytesDiffering ? 32 : 0,
  nmse: bytesDiffering ? 4e-15 : 0,
});

/** One MoE layer's stages (MoETargetModel.stageOrder), differing from the experts on, then the final stages. */
function moeStages(): StageDiff[] {
  const layer = (['q', 'k', 'v', 'attn', 'mlp', 'router', 'experts', 'layer'] as const).map((stage, i) => ({
    layer: 0,
    layerKind: 'sliding' as const,
    stage,
    rows: [row(0, i >= 6 ? 66 : 0)],
  }));
  const head = (['final_norm', 'logits'] as const).map((stage) => ({
    layer: null,
    layerKind: null,
    stage,
    rows: [row(0, 500)],
  }));
  return [...layer, ...head];
}

describe('MoE stages in the report view', () => {
  it('the reader keeps router / experts stages and a first divergence on experts', () => {
    const r = equalReport();
    const d = r.draws[0];
    // A draw diverges where a logits row differs, and the report with it (validateReport derives both).
    d.rows[0] = { ...d.rows[0], bytesDiffering: 500, maxAbs: 1e-3, maxUlp: 9, nmse: 1e-9 };
    Object.assign(d, { verdict: 'diverges', position: 0, bytesDiffering: 500 });
    r.verdict = 'diverges';
    d.stages = moeStages();
    d.firstDivergence = {
      layer: 0,
      layerKind: 'sliding',
      stage: 'experts',
      position: 0,
      text: 'layer 0 (sliding) experts output (weighted sum, before post_feedforward_layernorm_2) at position 0',
    };
    const read = readReport(JSON.parse(JSON.stringify(r)));
    if (!read.ok) throw new Error(read.problems.join('; '));
    const got = read.report.draws[0];
    expect(got.stages!.map((s) => s.stage)).toEqual([
      'q',
      'k',
      'v',
      'attn',
      'mlp',
      'router',
      'experts',
      'layer',
      'final_norm',
      'logits',
    ]);
    expect(got.firstDivergence?.stage).toBe('experts');
  });

  it('the heatmap has the MoE rows in execution order and names them', () => {
    expect(MOE_HEAT_STAGES).toEqual([
      'q',
      'k',
      'v',
      'attn',
      'mlp',
      'router',
      'experts',
      'layer',
      'final_norm',
      'logits',
    ]);
    const first = { layer: 0, layerKind: 'sliding' as const, stage: 'experts' as const, position: 0, text: '' };
    const grid = buildHeatmap(moeStages(), 'all', 'bytes', first);
    expect(grid.stages).toBe(MOE_HEAT_STAGES);
    expect(grid.cells).toHaveLength(10);
    const router = grid.cells.find((c) => c.stage === 'router')!;
    const experts = grid.cells.find((c) => c.stage === 'experts')!;
    expect([router.row, experts.row]).toEqual([5, 6]);
    expect(router.level).toBe(0);
    expect(experts.level).toBeGreaterThan(0);
    expect(experts.first).toBe(true);
    expect(describeCell(grid, router.col, router.row, router)).toBe(
      'layer 0 (sliding) · router scores (router.proj) over all positions: equal (2,048 bytes)',
    );
    expect(describeCell(grid, experts.col, experts.row, experts)).toMatch(
      /^layer 0 \(sliding\) · experts output \(weighted sum, before post_feedforward_layernorm_2\) over all positions: 66 of 2,048 bytes differ .* — first divergence$/,
    );
  });

  it('reports without MoE stages keep their rows', () => {
    const dense = moeStages().filter((s) => s.stage !== 'router' && s.stage !== 'experts');
    expect(heatStagesOf(dense)).toBe(HEAT_STAGES);
    expect(heatStagesOf([{ stage: 'recurrence', layerKind: 'linear' }])).toBe(HYBRID_HEAT_STAGES);
    expect(buildHeatmap(dense, 'all', 'bytes', null).cells).toHaveLength(8);
  });
});
