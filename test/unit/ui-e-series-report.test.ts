/**
 * The page's heatmap for a Gemma 4 E-series report in Node: the KV-shared layers (q, attn, mlp, layer stages and no
 * k / v, ETargetModel's stage order) are marked as such, and their k / v cells read as "none" by construction rather
 * than "not captured"; dense Gemma reports and Qwen3.5 reports (whose linear layers have no q either) mark nothing.
 */
import { describe, expect, it } from 'vitest';
import { buildHeatmap } from '../../src/ui/report/heatmap-model.ts';
import { describeCell } from '../../src/ui/report/heatmap.ts';
import type { LayerKind, RowDiff, Stage, StageDiff } from '../../src/parity/report.ts';

const row = (bytesDiffering: number): RowDiff => ({
  position: 0,
  bytesDiffering,
  bytesTotal: 2048,
  maxAbs: bytesDiffering ? 1e-7 : 0,
  maxUlp: bytesDiffering ? 8 : 0,
  nmse: bytesDiffering ? 1e-15 : 0,
});

const layer = (index: number, kind: LayerKind, stages: readonly Stage[]): StageDiff[] =>
  stages.map((stage) => ({ layer: index, layerKind: kind, stage, rows: [row(0)] }));

const OWNER = ['q', 'k', 'v', 'attn', 'mlp', 'layer'] as const;
const SHARED = ['q', 'attn', 'mlp', 'layer'] as const;

describe('KV-shared layers in the heatmap', () => {
  it('marks layers with q and no k / v, and reads their k / v cells as none', () => {
    const stages = [
      ...layer(0, 'sliding', OWNER),
      ...layer(1, 'full', OWNER),
      ...layer(2, 'sliding', SHARED),
      ...layer(3, 'full', SHARED),
    ];
    const grid = buildHeatmap(stages, 0, 'bytes', null);
    expect(grid.columns.map((c) => c.kvShared === true)).toEqual([false, false, true, true]);
    const k = grid.stages.indexOf('k');
    expect(grid.at(2, k)).toBeUndefined();
    expect(describeCell(grid, 2, k, undefined)).toMatch(
      /^layer 2 \(sliding\) · .*: none \(a KV-shared layer has no k_proj \/ v_proj; it attends to an earlier layer's K\/V\)$/,
    );
    // An owner's uncaptured cell stays "not captured"; the shared layer's q cell is an ordinary cell.
    expect(describeCell(grid, 0, k, undefined)).toMatch(/: not captured$/);
    expect(describeCell(grid, 2, grid.stages.indexOf('q'), grid.at(2, grid.stages.indexOf('q')))).toMatch(
      /: equal \(2,048 bytes\)$/,
    );
  });

  it('marks nothing in a dense Gemma report, a partial capture without k anywhere, or a Qwen3.5 report', () => {
    const dense = buildHeatmap([...layer(0, 'sliding', OWNER), ...layer(1, 'full', OWNER)], 0, 'bytes', null);
    expect(dense.columns.some((c) => c.kvShared)).toBe(false);
    const qOnly = buildHeatmap([...layer(0, 'sliding', ['q', 'attn']), ...layer(1, 'full', ['q'])], 0, 'bytes', null);
    expect(qOnly.columns.some((c) => c.kvShared)).toBe(false);
    const qwen = buildHeatmap(
      [...layer(0, 'linear', ['proj', 'conv', 'recurrence', 'mlp', 'layer']), ...layer(1, 'full', OWNER)],
      0,
      'bytes',
      null,
    );
    expect(qwen.columns.some((c) => c.kvShared)).toBe(false);
  });
});
