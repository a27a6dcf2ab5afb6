/**
 * The page's Qwen3.5 pieces in Node: the recurrent state view's facts and words, reading a report's state view
 * (and dropping a crafted one), Qwen3.5 stage labels in the heatmap readout, the family dispatch by model_type,
 * the family's policy menu, and the page's oracle drafts.
 */
import { describe, expect, it } from 'vitest';
import { equalReport } from '../e2e/sample-report.ts';
import { readReport, longState } from '../../src/ui/report/report-model.ts';
import { describeState, stateFacts } from '../../src/ui/report/state-view.ts';
import { buildHeatmap } from '../../src/ui/report/heatmap-model.ts';
import { describeCell } from '../../src/ui/report/heatmap.ts';
import { familyName, type RowDiff, type StageDiff, type StateView } from '../../src/parity/report.ts';
import { familyOfConfig } from '../../src/format/open-target.ts';
import { policyMenu } from '../../src/model/policy-registry.ts';
import { oracleWrong } from '../../src/model/generation-setup.ts';

const row = (position: number, bytesDiffering: number): RowDiff => ({
  position,
  bytesDiffering,
  bytesTotal: 16384,
  maxAbs: bytesDiffering ? 0.0039 : 0,
  maxUlp: bytesDiffering ? 65536 : 0,
  nmse: bytesDiffering ? 1e-6 : 0,
});

function state(diff: (layer: number, t: number) => number): StateView {
  return {
    blockStart: 96,
    valueHeads: 4,
    keyHeadDim: 32,
    valueHeadDim: 32,
    convKernel: 4,
    convChannels: 256,
    fullLayers: [2, 5],
    layers: [0, 1, 3, 4].map((layer) => ({
      layer,
      rows: [0, 1, 2, 3].map((t) => row(t, diff(layer, t))),
    })),
  };
}

describe('recurrent state view', () => {
  it('counts the states that differ and names the first, token by token', () => {
    expect(stateFacts(state(() => 0))).toEqual({ tokens: 4, differing: 0, total: 16, first: null });
    const s = state((layer, t) => (t >= 1 && layer >= 1 ? 100 : 0));
    expect(stateFacts(s)).toEqual({ tokens: 4, differing: 9, total: 16, first: { layer: 1, token: 1 } });
    expect(describeState(s)).toMatch(
      /^Each Gated DeltaNet layer carries a recurrent state S \(4 × 32 × 32 f32\) and a conv window \(the last 3 raw in_proj_qkv rows of 256 channels\)\. Full-attention layers \(2, 5\) keep a linear KV cache, one row per position: there is no ring\. .*9 of 16 states differ; the first is layer 1 after block token 1 \(position 97\)\.$/,
    );
  });

  it('survives the report reader; a crafted one without layers is dropped', () => {
    const r = equalReport();
    r.draws[3].state = state(() => 0);
    r.draws[2].state = { layers: 'no' } as unknown as StateView;
    const read = readReport(JSON.parse(JSON.stringify(r)));
    expect(read.ok).toBe(true);
    if (!read.ok) return;
    expect(read.report.draws[2].state).toBeUndefined();
    expect(read.report.draws[3].state).toEqual(state(() => 0));
    expect(longState(read.report)?.draw.index).toBe(3);
  });
});

describe('Qwen3.5 words', () => {
  it('the heatmap readout of a hybrid grid uses Qwen3.5 labels (v has no v_norm)', () => {
    const stages: StageDiff[] = [
      { layer: 0, layerKind: 'linear', stage: 'recurrence', rows: [row(0, 0), row(1, 8)] },
      { layer: 1, layerKind: 'full', stage: 'v', rows: [row(0, 0), row(1, 0)] },
    ];
    const grid = buildHeatmap(stages, 'all', 'bytes', null);
    const v = grid.cells.find((c) => c.stage === 'v')!;
    expect(describeCell(grid, v.col, v.row, v)).toMatch(/^layer 1 \(full\) · v \(v_proj output, no v_norm\) over all/);
    const gemma = buildHeatmap([{ ...stages[1], layerKind: 'sliding' }], 'all', 'bytes', null);
    expect(describeCell(gemma, 1, gemma.stages.indexOf('v'), gemma.cells[0])).toMatch(/v \(after v_norm\)/);
  });

  it('family by model_type; the policy menu in the family terms; a third of oracle drafts wrong', () => {
    for (const mt of ['qwen3_5', 'qwen3_5_text', 'qwen3_5_moe', 'qwen3_5_mtp'])
      expect(familyOfConfig({ model_type: mt })).toBe('qwen3_5');
    for (const x of [{ model_type: 'gemma4' }, { model_type: 'llama' }, {}, null, 'x'])
      expect(familyOfConfig(x)).toBe('gemma4');
    expect(familyName('qwen3_5_text')).toBe('Qwen3.5');
    expect(familyName('gemma4')).toBe('Gemma 4');
    const qwen = policyMenu('qwen3_5');
    expect(qwen.map((p) => p.name)).toContain('gdn-state-bf16');
    expect(qwen.find((p) => p.name === 'exact')!.description).not.toMatch(/ring/);
    expect(policyMenu('gemma4').find((p) => p.name === 'exact')!.description).toMatch(/ring/);
    const wrong = Array.from({ length: 3000 }, (_, i) => oracleWrong(i)).filter(Boolean).length;
    expect(wrong).toBeGreaterThan(900);
    expect(wrong).toBeLessThan(1100);
  });
});
