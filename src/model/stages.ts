/**
 * The stage vocabulary: what an engine captures per layer for localization, in execution order, and the capture
 * names it stores them under. The engines (this folder) produce the stages; parity/ compares and reports them.
 */
/**
 * Stages in execution order within a layer, then the two final stages. LAYER_STAGES are an attention layer's
 * (Gemma 4's sliding and full layers, Qwen3.5's gated full attention); LINEAR_STAGES a Qwen3.5 Gated DeltaNet
 * layer's (projections, conv, recurrence, gated norm, out_proj output, then the MLP and the layer output).
 */
export const LAYER_STAGES = ['q', 'k', 'v', 'attn', 'mlp', 'layer'] as const;
export const LINEAR_STAGES = ['proj', 'conv', 'recurrence', 'gated_norm', 'out', 'mlp', 'layer'] as const;
export const FINAL_STAGES = ['final_norm', 'logits'] as const;
/** A Gemma 4 MoE layer's own stages (26B-A4B, moe-target.ts): between the MLP and the layer output. */
export const MOE_STAGES = ['router', 'experts'] as const;
/**
 * A Gemma 4 E-series layer's own stage (E2B / E4B, src/model/gemma4/e-series/e-target.ts): the per-layer input's contribution,
 * between the MLP and the layer output.
 */
export const PLE_STAGES = ['ple'] as const;
export type LayerStage = (typeof LAYER_STAGES)[number];
export type LinearStage = (typeof LINEAR_STAGES)[number];
export type FinalStage = (typeof FINAL_STAGES)[number];
export type MoeStage = (typeof MOE_STAGES)[number];
export type PleStage = (typeof PLE_STAGES)[number];
export type Stage = LayerStage | LinearStage | MoeStage | PleStage | FinalStage;
/** A layer's kind in a report: Gemma's sliding / full, Qwen3.5's full and linear (Gated DeltaNet). */
export type LayerKind = 'sliding' | 'full' | 'linear';

/** One localization stage: where it sits (layer, kind, stage) and the capture that holds its rows. */
export interface StageStep {
  layer: number | null;
  layerKind: LayerKind | null;
  stage: Stage;
  capture: string;
}

export function captureName(layer: number | null, stage: Stage): string {
  return layer === null ? stage : `${stage}.${layer}`;
}

/** The two final stages (final norm, LM head logits), shared by every family. */
export function finalStages(): StageStep[] {
  return FINAL_STAGES.map((stage) => ({ layer: null, layerKind: null, stage, capture: stage }));
}

/** The dense Gemma 4 target's stage order (TargetModel.stageOrder): every layer's LAYER_STAGES, then the final stages. */
export function denseStageOrder(layers: readonly { type: 'sliding' | 'full' }[]): StageStep[] {
  const out: StageStep[] = [];
  layers.forEach((l, i) =>
    LAYER_STAGES.forEach((stage) => out.push({ layer: i, layerKind: l.type, stage, capture: captureName(i, stage) })),
  );
  return [...out, ...finalStages()];
}
