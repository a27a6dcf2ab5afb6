/**
 * The synthetic presets of the Gemma 4 E-series (E2B, E4B) with their centroid-head assistants: geometry only
 * (plain data, so src/format/synthetic.ts can list them without a module cycle). The tensors and config.json are
 * planned in synthetic-gemma4-family.ts.
 *
 * Sources of the real geometries (found with the lab's search tool; docs/GEMMA4-FAMILY.md section 1 has the
 * same table):
 * - Targets: transformers `convert_gemma4_weights.py` `_VARIANTS` (huggingface/transformers@ca5ff0b0,
 *   src/transformers/models/gemma4/convert_gemma4_weights.py), the converter that writes the released config.json:
 *   E2B hidden_size 1536, hidden_size_per_layer_input 256, intermediate_size 4 * 1536 = 6144, num_hidden_layers 35,
 *   layer_types (4 sliding, 1 full) x 7, num_attention_heads 8, num_key_value_heads 1,
 *   num_global_key_value_heads None, attention_k_eq_v False, num_kv_shared_layers 20, use_double_wide_mlp True,
 *   final_logit_softcapping 30; E4B hidden_size 2560, hidden_size_per_layer_input 256, intermediate_size
 *   4 * 2560 = 10240, num_hidden_layers 42, layer_types (5 sliding, 1 full) x 7, num_attention_heads 8,
 *   num_key_value_heads 2, global_head_dim 512, attention_k_eq_v False, num_kv_shared_layers 18 (no double-wide
 *   MLP); RoPE 1e4 (sliding) / 1e6 proportional 0.25 (full). The fields the converter leaves at their
 *   Gemma4TextConfig defaults (head_dim 256, global_head_dim 512, sliding_window 512, vocab_size and
 *   vocab_size_per_layer_input 262144, rms_norm_eps 1e-6) are checked against config.json copies: E2B's
 *   text_config "inline copy of the fields from the fetched E2B config.json" (search index id 59897965653: head_dim
 *   256, global_head_dim 512, sliding_window 512, vocab_size 262144, vocab_size_per_layer_input 262144, and every
 *   number above); E4B's "transcribed from google/gemma-4-E4B-it-qat-w4a16-ct's config.json" (id 57658815156) and
 *   a config.json test fixture (id 71611886309): head_dim 256, global_head_dim 512, sliding_window 512, vocab
 *   262144, vocab_size_per_layer_input 262144, use_double_wide_mlp false.
 * - Assistants: transformers `Gemma4AssistantConfig` (huggingface/transformers@bb7902f5,
 *   src/transformers/models/gemma4_assistant/configuration_gemma4_assistant.py) for num_centroids 2048 and
 *   centroid_intermediate_top_k 32 (its defaults); google/gemma-4-E2B-it-assistant's config.json as printed from
 *   a Hub snapshot (id 54570753366): backbone_hidden_size 1536, use_ordered_embeddings true, 2048 centroids, top
 *   32, text_config hidden_size 256, intermediate_size 2048, 4 layers (3 sliding, 1 full), 4 attention heads,
 *   num_key_value_heads 1, head_dim 256, global_head_dim 512, num_kv_shared_layers 4, sliding_window 512,
 *   vocab 262144; the E4B assistant's config.json in two config-parsing tests (ids 61441446652, 61553440113):
 *   backbone_hidden_size 2560, hidden 256, intermediate 2048, 4 layers, 4 heads, num_key_value_heads 2, head_dim
 *   256 / 512, 2048 centroids, top 32.
 * - Quantization: mlx_lm.convert's default 4 bits, group 64, every linear and embedding whose input is a multiple of
 *   the group (the per-layer table and projections included; docs/GEMMA4-FAMILY.md section 3). The assistants are
 *   bf16 as the ones mlx-vlm lists (its MaskedEmbedder gathers rows of an unquantized embedding).
 * - e2b-tiny: E2B's structure (4 : 1 layers, KV sharing from the first shared layer on with double-wide MLPs there,
 *   per-layer inputs, a centroid-head assistant) at test/fixtures/gemma4-e-tiny's sizes, 4-bit throughout as that
 *   fixture is.
 */
import type { DenseSynthGeometry } from './synthetic-geometry.ts';

/** What an E-series geometry adds to a dense one (src/format/synthetic.ts SynthGeometry.eSeries). */
export interface ESeriesSynth {
  /** Sliding layers per full layer: layer i is full iff (i + 1) % (slidingPerFull + 1) == 0 (E2B 4, E4B 5). */
  slidingPerFull: number;
  /** hidden_size_per_layer_input P. */
  perLayerInput: number;
  /** num_kv_shared_layers: the last N layers read their donors' K/V. */
  kvSharedLayers: number;
  /** use_double_wide_mlp: 2 x intermediate on the KV-shared layers. */
  doubleWideMlp: boolean;
  /** The assistant's centroid LM head (use_ordered_embeddings); null: a dense tied head. */
  centroids: { count: number; topK: number } | null;
}

/** An E-series preset: the dense geometry and what the E-series adds. */
export interface ESeriesPresetGeometry extends DenseSynthGeometry {
  modelType: 'gemma4';
  eSeries: ESeriesSynth;
}

export type ESynthPreset = 'e2b' | 'e4b' | 'e2b-tiny';

export const E_SYNTH_PRESETS: Readonly<Record<ESynthPreset, ESeriesPresetGeometry>> = {
  e2b: {
    modelType: 'gemma4',
    vocab: 262144,
    hidden: 1536,
    intermediate: 6144,
    layers: 35,
    heads: 8,
    kvHeads: 1,
    headDim: 256,
    globalKvHeads: 1,
    globalHeadDim: 512,
    window: 512,
    softcap: 30,
    bits: 4,
    groupSize: 64,
    mlpBits: null,
    assistant: { hidden: 256, intermediate: 2048, heads: 4, bits: null },
    eSeries: {
      slidingPerFull: 4,
      perLayerInput: 256,
      kvSharedLayers: 20,
      doubleWideMlp: true,
      centroids: { count: 2048, topK: 32 },
    },
  },
  e4b: {
    modelType: 'gemma4',
    vocab: 262144,
    hidden: 2560,
    intermediate: 10240,
    layers: 42,
    heads: 8,
    kvHeads: 2,
    headDim: 256,
    globalKvHeads: 2,
    globalHeadDim: 512,
    window: 512,
    softcap: 30,
    bits: 4,
    groupSize: 64,
    mlpBits: null,
    assistant: { hidden: 256, intermediate: 2048, heads: 4, bits: null },
    eSeries: {
      slidingPerFull: 5,
      perLayerInput: 256,
      kvSharedLayers: 18,
      doubleWideMlp: false,
      centroids: { count: 2048, topK: 32 },
    },
  },
  'e2b-tiny': {
    modelType: 'gemma4',
    vocab: 512,
    hidden: 128,
    intermediate: 128,
    layers: 10,
    heads: 4,
    kvHeads: 1,
    headDim: 64,
    globalKvHeads: 1,
    globalHeadDim: 128,
    window: 16,
    softcap: 30,
    bits: 4,
    groupSize: 64,
    mlpBits: null,
    assistant: { hidden: 64, intermediate: 128, heads: 4, bits: 4 },
    eSeries: {
      slidingPerFull: 4,
      perLayerInput: 64,
      kvSharedLayers: 4,
      doubleWideMlp: true,
      centroids: { count: 16, topK: 4 },
    },
  },
};

export function isESynthPreset(name: string): name is ESynthPreset {
  return Object.hasOwn(E_SYNTH_PRESETS, name);
}

/**
 * An E-series preset cut to `layers` layers (bench runs and H200 smoke tests at real widths, fewer layers): the
 * layer pattern is kept in whole periods of slidingPerFull sliding + 1 full layer, so the model still ends on a
 * full layer, and the KV-shared layers stay a suffix of whole periods in the preset's proportion (E2B 20 of 35 =
 * 4 of 7 periods, E4B 18 of 42 = 3 of 7), at least one period owned and one shared: every shared layer type then
 * has a donor of its type among the owners, and the shared layers include one sliding and one full layer. The
 * smallest cut is two periods (E2B 10 layers, 5 shared; E4B 12, 6 shared). The preset's own layer count returns
 * the preset unchanged.
 */
export function eSeriesTruncated(preset: ESynthPreset, layers: number): ESeriesPresetGeometry {
  const g = E_SYNTH_PRESETS[preset];
  if (layers === g.layers) return g;
  const period = g.eSeries.slidingPerFull + 1;
  if (!Number.isInteger(layers) || layers < 2 * period || layers % period !== 0)
    throw new Error(
      `${preset}: ${layers} layers do not keep the E-series structure; it is cut in whole periods of ${period} layers (${period - 1} sliding, 1 full) with at least one owning and one KV-shared period: ${2 * period}, ${3 * period}, ... or ${g.layers}`,
    );
  if (layers > g.layers) throw new Error(`${preset}: ${layers} layers exceed the preset's ${g.layers}`);
  const periods = layers / period;
  const sharedPeriods = Math.min(periods - 1, Math.max(1, Math.round((periods * g.eSeries.kvSharedLayers) / g.layers)));
  return { ...g, layers, eSeries: { ...g.eSeries, kvSharedLayers: sharedPeriods * period } };
}
