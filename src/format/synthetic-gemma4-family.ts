/**
 * Synthetic Gemma 4 E-series checkpoints (E2B / E4B: per-layer embeddings, KV sharing, double-wide MLPs) with their
 * centroid-head assistants, in MLX layout, planned on the dense presets' Planner and virtual files
 * (src/format/synthetic.ts): bytes are computed on read, so the real-shape presets open from their headers and
 * stream to disk in bounded memory. Geometries and their sources: synthetic-gemma4-family-presets.ts.
 *
 * Layout (docs/GEMMA4-FAMILY.md sections 3 to 5, as test/fixtures/gemma4-e-tiny): target tensors under
 * `language_model.model.` with `embed_tokens_per_layer` [V, L * P], `per_layer_model_projection` [L * P, H],
 * `per_layer_projection_norm` [P] and per layer `per_layer_input_gate` [P, H], `per_layer_projection` [H, P],
 * `post_per_layer_input_norm` [H]; the KV-shared layers carry no k/v projections or k_norm (mlx-lm's model has none
 * there); full layers have their own v_proj (attention_k_eq_v false). Assistant tensors under `model.` plus
 * `pre_projection`, `post_projection`, `masked_embedding.centroids` [C, h] and `masked_embedding.token_ordering`
 * (I32 [V], a permutation of the vocabulary, as mlx-vlm's sanitize casts it).
 *
 * Weight scales as the dense presets' (mean 0, std 1/sqrt(in)); the per-layer table is an embedding of width L * P,
 * so its rows are small and the sqrt(P) table scale brings them to O(0.1), beside the normalised projection.
 */
import type { ByteSource } from './bytesource.ts';
import type { ESeriesSynth } from './synthetic-gemma4-family-presets.ts';
import { DEFAULT_SHARD_BYTES, files, Planner, type PlannedTensor, type SynthOptions } from './synthetic-files.ts';
import type { SynthGeometry } from './synthetic-gemma4-geometry.ts';
import { syntheticTokenizerFiles } from './synthetic-tokenizer.ts';
import { planTowers, type TowerConfigs } from './synthetic-towers.ts';

export type ESeriesGeometry = SynthGeometry & { eSeries: ESeriesSynth };

export function isESeriesGeometry(g: SynthGeometry): g is ESeriesGeometry {
  return g.eSeries !== undefined;
}

/** Layer i is full iff (i + 1) % (slidingPerFull + 1) == 0 (transformers' `_GEMMA_4_E2B_LAYER_TYPES * 7` and kin). */
export function eSeriesLayerTypes(layers: number, slidingPerFull: number): ('sliding_attention' | 'full_attention')[] {
  return Array.from({ length: layers }, (_, i) =>
    (i + 1) % (slidingPerFull + 1) === 0 ? 'full_attention' : 'sliding_attention',
  );
}

/**
 * Refuses geometries that describe no loadable E-series model (e.g. `synth --layers` below the shared layers), naming
 * the preset field at fault.
 */
export function checkESeriesGeometry(g: ESeriesGeometry): void {
  const e = g.eSeries;
  const types = eSeriesLayerTypes(g.layers, e.slidingPerFull);
  const first = g.layers - e.kvSharedLayers;
  const fail = (why: string) => {
    throw new Error(`synthetic E-series geometry: ${why}`);
  };
  if (e.kvSharedLayers < 0 || first < 1)
    fail(`${e.kvSharedLayers} KV-shared layers of ${g.layers} leave no layer that owns a cache`);
  for (const t of ['sliding_attention', 'full_attention'])
    if (types.slice(first).includes(t as never) && !types.slice(0, first).includes(t as never))
      fail(`the shared ${t} layers have no ${t} donor among the first ${first} layers (layers ${g.layers})`);
  if ((g.layers * e.perLayerInput) % g.groupSize !== 0 && g.bits !== null)
    fail(
      `the per-layer table width ${g.layers} x ${e.perLayerInput} is not a multiple of the group size ${g.groupSize}`,
    );
  if (g.mlpBits !== null && g.mlpBits !== g.bits)
    fail('per-module MLP bits (--mlp-bits) are not planned for E-series presets');
  const c = e.centroids;
  if (c && g.assistant && (g.vocab % c.count !== 0 || c.topK > c.count))
    fail(`vocab ${g.vocab} must be a multiple of ${c.count} centroids, with top-${c.topK} at most that many`);
}

/** The files of the E-series target and (when the geometry has one) its assistant. */
export function syntheticESeries(
  g: ESeriesGeometry,
  opts: SynthOptions,
): { geometry: SynthGeometry; target: ByteSource[]; assistant: ByteSource[] | null } {
  checkESeriesGeometry(g);
  const seed = opts.seed ?? 0;
  const shard = opts.shardBytes ?? DEFAULT_SHARD_BYTES;
  const p = new Planner(seed);
  const towers = targetTensors(p, g);
  const target = files(targetConfig(g, towers), p.tensors, shard, syntheticTokenizerFiles('gemma4', g.vocab));
  const assistant = g.assistant
    ? files(assistantConfig(g), assistantTensors(new Planner(seed ^ 0x5a5a5a5a), g, seed), shard)
    : null;
  return { geometry: g, target, assistant };
}

// ---------------------------------------------------------------- config.json

/** transformers' `_ROPE_PARAMS` (convert_gemma4_weights.py), as every Gemma 4 config.json states it. */
const ROPE = {
  sliding_attention: { rope_type: 'default', rope_theta: 10000.0 },
  full_attention: { rope_type: 'proportional', partial_rotary_factor: 0.25, rope_theta: 1000000.0 },
};

function quantBlock(bits: SynthGeometry['bits'], groupSize: number) {
  if (bits === null) return {};
  const q = { group_size: groupSize, bits, mode: 'affine' };
  return { quantization: q, quantization_config: q };
}

function commonText(g: ESeriesGeometry) {
  return {
    vocab_size: g.vocab,
    num_key_value_heads: g.kvHeads,
    head_dim: g.headDim,
    global_head_dim: g.globalHeadDim,
    num_global_key_value_heads: null,
    attention_k_eq_v: false,
    sliding_window: g.window,
    rms_norm_eps: 1e-6,
    hidden_activation: 'gelu_pytorch_tanh',
    max_position_embeddings: 131072,
    tie_word_embeddings: true,
    rope_parameters: ROPE,
    enable_moe_block: false,
    model_type: 'gemma4_text',
  };
}

function targetConfig(g: ESeriesGeometry, towers: TowerConfigs): Record<string, unknown> {
  const e = g.eSeries;
  return {
    model_type: 'gemma4',
    architectures: ['Gemma4ForConditionalGeneration'],
    text_config: {
      ...commonText(g),
      hidden_size: g.hidden,
      intermediate_size: g.intermediate,
      num_hidden_layers: g.layers,
      num_attention_heads: g.heads,
      layer_types: eSeriesLayerTypes(g.layers, e.slidingPerFull),
      final_logit_softcapping: g.softcap,
      hidden_size_per_layer_input: e.perLayerInput,
      vocab_size_per_layer_input: g.vocab,
      num_kv_shared_layers: e.kvSharedLayers,
      use_double_wide_mlp: e.doubleWideMlp,
    },
    ...towers,
    eos_token_id: [1, 106],
    tie_word_embeddings: true,
    synthetic: true,
    ...quantBlock(g.bits, g.groupSize),
  };
}

function assistantConfig(g: ESeriesGeometry): Record<string, unknown> {
  const a = g.assistant!;
  const c = g.eSeries.centroids;
  return {
    model_type: 'gemma4_assistant',
    architectures: ['Gemma4AssistantForCausalLM'],
    backbone_hidden_size: g.hidden,
    use_ordered_embeddings: c !== null,
    ...(c ? { num_centroids: c.count, centroid_intermediate_top_k: c.topK } : {}),
    text_config: {
      ...commonText(g),
      hidden_size: a.hidden,
      intermediate_size: a.intermediate,
      num_hidden_layers: 4,
      num_attention_heads: a.heads,
      layer_types: ['sliding_attention', 'sliding_attention', 'sliding_attention', 'full_attention'],
      final_logit_softcapping: null,
      // transformers' Gemma4AssistantConfig.validate_architecture: no PLE, no double-wide MLP, all layers shared
      hidden_size_per_layer_input: 0,
      vocab_size_per_layer_input: 0,
      num_kv_shared_layers: 4,
      use_double_wide_mlp: false,
    },
    tie_word_embeddings: true,
    block_size: 4,
    synthetic: true,
    ...quantBlock(a.bits, g.groupSize),
  };
}

// ---------------------------------------------------------------- tensors

/** One decoder layer's tensors: a target layer (owner or KV-shared, with its per-layer input gate) or an assistant's. */
function layer(p: Planner, pre: string, i: number, g: ESeriesGeometry, asst: boolean): void {
  const e = g.eSeries;
  const full = asst ? i === 3 : eSeriesLayerTypes(g.layers, e.slidingPerFull)[i] === 'full_attention';
  const first = g.layers - e.kvSharedLayers;
  const shared = asst || i >= first;
  const H = asst ? g.assistant!.hidden : g.hidden;
  const wide = !asst && e.doubleWideMlp && i >= first && first > 0;
  const I = asst ? g.assistant!.intermediate : wide ? 2 * g.intermediate : g.intermediate;
  const heads = asst ? g.assistant!.heads : g.heads;
  const bits = asst ? g.assistant!.bits : g.bits;
  const hd = full ? g.globalHeadDim : g.headDim;
  const kv = (full ? g.globalKvHeads : g.kvHeads) * hd;
  const l = `${pre}layers.${i}`;
  const a = `${l}.self_attn`;
  p.vector(`${l}.input_layernorm.weight`, H, 1, 0.2);
  p.linear(`${a}.q_proj`, heads * hd, H, bits, g.groupSize);
  if (!shared) {
    p.linear(`${a}.k_proj`, kv, H, bits, g.groupSize);
    p.linear(`${a}.v_proj`, kv, H, bits, g.groupSize);
    p.vector(`${a}.k_norm.weight`, hd, 1, 0.2);
  }
  p.linear(`${a}.o_proj`, H, heads * hd, bits, g.groupSize);
  p.vector(`${a}.q_norm.weight`, hd, 1, 0.2);
  p.vector(`${l}.post_attention_layernorm.weight`, H, 1, 0.2);
  p.vector(`${l}.pre_feedforward_layernorm.weight`, H, 1, 0.2);
  p.linear(`${l}.mlp.gate_proj`, I, H, bits, g.groupSize);
  p.linear(`${l}.mlp.up_proj`, I, H, bits, g.groupSize);
  p.linear(`${l}.mlp.down_proj`, H, I, bits, g.groupSize);
  p.vector(`${l}.post_feedforward_layernorm.weight`, H, 1, 0.2);
  if (!asst) {
    const P = e.perLayerInput;
    p.linear(`${l}.per_layer_input_gate`, P, H, bits, g.groupSize);
    p.linear(`${l}.per_layer_projection`, H, P, bits, g.groupSize);
    p.vector(`${l}.post_per_layer_input_norm.weight`, H, 1, 0.2);
  }
  p.vector(`${l}.layer_scalar`, 1, 0.95, 0.1);
}

/** Plans the text model's tensors, then the vision and audio towers'; returns the towers' config blocks. */
function targetTensors(p: Planner, g: ESeriesGeometry): TowerConfigs {
  const pre = 'language_model.model.';
  const LP = g.layers * g.eSeries.perLayerInput;
  p.linear(`${pre}embed_tokens`, g.vocab, g.hidden, g.bits, g.groupSize);
  p.linear(`${pre}embed_tokens_per_layer`, g.vocab, LP, g.bits, g.groupSize);
  p.linear(`${pre}per_layer_model_projection`, LP, g.hidden, g.bits, g.groupSize);
  p.vector(`${pre}per_layer_projection_norm.weight`, g.eSeries.perLayerInput, 1, 0.2);
  for (let i = 0; i < g.layers; i++) layer(p, pre, i, g, false);
  p.vector(`${pre}norm.weight`, g.hidden, 1, 0.2);
  return planTowers(p, 'gemma4-e', { hidden: g.hidden, bits: g.bits, groupSize: g.groupSize });
}

function assistantTensors(p: Planner, g: ESeriesGeometry, seed: number): PlannedTensor[] {
  const a = g.assistant!;
  p.linear('model.embed_tokens', g.vocab, a.hidden, a.bits, g.groupSize);
  for (let i = 0; i < 4; i++) layer(p, 'model.', i, g, true);
  p.vector('model.norm.weight', a.hidden, 1, 0.2);
  p.linear('pre_projection', a.hidden, 2 * g.hidden, a.bits, g.groupSize);
  p.linear('post_projection', g.hidden, a.hidden, a.bits, g.groupSize);
  const c = g.eSeries.centroids;
  if (c) {
    p.linear('masked_embedding.centroids', c.count, a.hidden, a.bits, g.groupSize);
    const data = tokenOrdering(g.vocab, seed);
    p.tensors.push({
      name: 'masked_embedding.token_ordering',
      dtype: 'I32',
      shape: [g.vocab],
      byteLength: 4 * g.vocab,
      gen: { kind: 'ints', data },
    });
  }
  return p.tensors;
}

/**
 * A pseudo-random permutation of [0, V): t(i) = (a i + b) mod V with gcd(a, V) = 1 (a bijection), a and b drawn
 * from the seed. Each centroid's V / C consecutive entries then hold tokens spread over the whole vocabulary.
 */
export function tokenOrdering(V: number, seed: number): Int32Array {
  const gcd = (x: number, y: number): number => (y === 0 ? x : gcd(y, x % y));
  let a = ((Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b) >>> 0) % V) | 1;
  while (gcd(a, V) !== 1) a = (a + 2) % V || 1;
  const b = (Math.imul(seed + 1, 0xc2b2ae35) >>> 0) % V;
  // a < V and i < V: a * i + b stays far below 2^53 for any vocabulary
  return Int32Array.from({ length: V }, (_, i) => (a * i + b) % V);
}
