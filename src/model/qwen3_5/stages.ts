import type { Qwen35Description } from '../../format/qwen3_5/description.ts';
import { finalStages, type StageStep } from '../stages.ts';
import { LAYER_STAGES, type LinearStage } from '../stages.ts';

/** The capture holding each Gated DeltaNet stage's rows (names of src/model/qwen3_5/engine.ts). */
const LINEAR_CAPTURES: Record<LinearStage, (i: number) => string> = {
  proj: (i) => `gdn.proj.${i}`,
  conv: (i) => `gdn.conv.${i}`,
  recurrence: (i) => `gdn.recurrence.${i}`,
  gated_norm: (i) => `gdn.gated_norm.${i}`,
  out: (i) => `attn.${i}`, // out_proj's output, the token mixer's
  mlp: (i) => `mlp.${i}`,
  layer: (i) => `layer.${i}`,
};
const LINEAR_ORDER: LinearStage[] = ['proj', 'conv', 'recurrence', 'gated_norm', 'out', 'mlp', 'layer'];

/**
 * A Qwen3.5 target's localization stages in execution order: a Gated DeltaNet layer's projections (in_proj
 * qkv, z, b, a side by side), conv, recurrence, gated norm, out_proj output, MLP and layer output; a gated
 * full-attention layer's q, k (after the q/k norms and partial RoPE), v, attention (o_proj) output, MLP and
 * layer output; then the final norm and the logits.
 */
export function qwenStageOrder(desc: Qwen35Description): StageStep[] {
  const out: StageStep[] = [];
  desc.layers.forEach((l, i) => {
    if (l.type === 'linear')
      for (const stage of LINEAR_ORDER)
        out.push({ layer: i, layerKind: 'linear', stage, capture: LINEAR_CAPTURES[stage](i) });
    else for (const stage of LAYER_STAGES) out.push({ layer: i, layerKind: 'full', stage, capture: `${stage}.${i}` });
  });
  return [...out, ...finalStages()];
}
