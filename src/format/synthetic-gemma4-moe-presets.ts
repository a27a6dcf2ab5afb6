/**
 * The synthetic presets of the Gemma 4 MoE target (26B-A4B) with its dense assistant: geometry only (plain data, so
 * src/format/synthetic.ts can list them without a module cycle). The MoE tensors and config fields are planned in
 * synthetic-gemma4-moe.ts; everything else is the dense presets' layout (src/format/synthetic.ts).
 *
 * Sources of the real geometry (found with the lab's search tool):
 * - Target: transformers `convert_gemma4_weights.py` `_VARIANTS[_VARIANT_GEMMA_4_26B_A4B]` (the converter that writes
 *   the released config.json; the version with the assistant variants, search index id 66047557815):
 *   hidden_size 2816, hidden_size_per_layer_input 0, intermediate_size 2112 ("Shared expert FFW", the dense MLP
 *   beside the experts), num_hidden_layers 30, layer_types `_DEFAULT_LAYER_TYPES * 5` (5 sliding, 1 full),
 *   num_attention_heads 16, num_key_value_heads 8, num_global_key_value_heads 2, attention_k_eq_v True,
 *   num_kv_shared_layers 0, enable_moe_block True, num_experts 128, moe_intermediate_size 704, top_k_experts 8,
 *   sliding_window 1024, final_logit_softcapping 30.0, `_ROPE_PARAMS` (1e4 sliding, 1e6 proportional 0.25 full).
 *   The fields left at their Gemma4TextConfig defaults (head_dim 256, global_head_dim 512, vocab_size 262144) are
 *   checked against config.json copies of gemma-4-26B-A4B in three unrelated projects' config-parsing tests (ids
 *   58004776520, 52485720201, 66640043689): hidden_size 2816, 30 layers (ids 58004776520, 52485720201), 16 / 8 heads,
 *   num_global_key_value_heads 2, head_dim 256, global_head_dim 512, intermediate_size 2112, num_experts 128,
 *   top_k_experts 8, moe_intermediate_size 704, vocab_size 262144, sliding_window 1024, attention_k_eq_v true,
 *   final_logit_softcapping 30.0, the same layer_types and rope_parameters.
 * - Assistant: the same converter's `_VARIANTS[_VARIANT_GEMMA_4_26B_A4B_ASSISTANT]`: backbone_hidden_size 2816,
 *   hidden_size 1024, intermediate_size 8192, 4 layers (3 sliding, 1 full), num_attention_heads 16,
 *   num_key_value_heads 8, num_global_key_value_heads 2, attention_k_eq_v True, num_kv_shared_layers 4,
 *   sliding_window 1024, no per-layer inputs; use_ordered_embeddings left False (a tied dense head, as mlx-vlm's
 *   drafter README says of the 26B-A4B and 31B assistants). bf16 as the 31b preset's assistant.
 * - Quantization: mlx_lm.convert's default 4 bits, group 64 for every Linear, Embedding and SwitchLinear (the stacked
 *   experts) whose input is a multiple of the group; `router.proj` at 8 bits through mlx-lm gemma4_text.py
 *   `Model.quant_predicate` (docs/GEMMA4-FAMILY.md section 3), written as per-module overrides in config.json.
 * - 26b-a4b-tiny: 26B-A4B's structure (5 : 1 layers ending on a full layer, k_eq_v full layers, a dense MLP beside
 *   top-k of E experts, the 8-bit router, a dense 4-layer assistant) at test/fixtures/gemma4-moe-tiny's sizes.
 */
import type { AffineBits } from './quantization.ts';
import type { DenseSynthGeometry } from './synthetic-geometry.ts';

/** What a MoE geometry adds to a dense one (src/format/synthetic.ts SynthGeometry.moe). */
export interface MoeSynth {
  /** num_experts E. */
  experts: number;
  /** top_k_experts. */
  topK: number;
  /** moe_intermediate_size: each expert's MLP width. */
  expertIntermediate: number;
  /** router.proj's affine bits (mlx-lm's quant_predicate: 8); used when the target is quantized. */
  routerBits: AffineBits;
}

/** A MoE preset: the dense geometry (intermediate: the dense MLP beside the experts) and what MoE adds. */
export interface MoePresetGeometry extends DenseSynthGeometry {
  modelType: 'gemma4';
  moe: MoeSynth;
}

export type MoeSynthPreset = '26b-a4b' | '26b-a4b-tiny';

export const MOE_SYNTH_PRESETS: Readonly<Record<MoeSynthPreset, MoePresetGeometry>> = {
  '26b-a4b': {
    modelType: 'gemma4',
    vocab: 262144,
    hidden: 2816,
    intermediate: 2112,
    layers: 30,
    heads: 16,
    kvHeads: 8,
    headDim: 256,
    globalKvHeads: 2,
    globalHeadDim: 512,
    window: 1024,
    softcap: 30,
    bits: 4,
    groupSize: 64,
    mlpBits: null,
    assistant: { hidden: 1024, intermediate: 8192, heads: 16, bits: null },
    moe: { experts: 128, topK: 8, expertIntermediate: 704, routerBits: 8 },
  },
  '26b-a4b-tiny': {
    modelType: 'gemma4',
    vocab: 512,
    hidden: 128,
    intermediate: 192,
    layers: 6,
    heads: 4,
    kvHeads: 2,
    headDim: 64,
    globalKvHeads: 2,
    globalHeadDim: 128,
    window: 16,
    softcap: 30,
    bits: 4,
    groupSize: 64,
    mlpBits: null,
    assistant: { hidden: 64, intermediate: 128, heads: 4, bits: 4 },
    moe: { experts: 8, topK: 4, expertIntermediate: 64, routerBits: 8 },
  },
};

export function isMoeSynthPreset(name: string): name is MoeSynthPreset {
  return Object.hasOwn(MOE_SYNTH_PRESETS, name);
}
