import { type Ctx, isObj, type Obj, optEosIds, optPosInt, optPosNumber, posInt } from './config-fields.ts';
import { FormatError } from './errors.ts';
import { kvDonors } from './kv-sharing.ts';
import type { LayerType } from './layer-type.ts';
import { readQuantization, type QuantizationConfig } from './quantization.ts';

export const TARGET_MODEL_TYPES = ['gemma4', 'gemma4_unified', 'gemma4_text', 'gemma4_unified_text'] as const;
export const ASSISTANT_MODEL_TYPES = ['gemma4_assistant', 'gemma4_unified_assistant'] as const;
export type TargetModelType = (typeof TARGET_MODEL_TYPES)[number];
export type AssistantModelType = (typeof ASSISTANT_MODEL_TYPES)[number];
export type ModelType = TargetModelType | AssistantModelType;

export interface RopeSpec {
  /** "default" (all of head dim rotates) or "proportional" (only the first partialRotary*d/2 frequencies are non-zero). */
  ropeType: 'default' | 'proportional';
  theta: number;
  /** Fraction of frequencies that rotate; 1 for "default". */
  partialRotary: number;
}

/** Attention geometry of one decoder layer, derived from config (never from constants). */
export interface LayerGeometry {
  type: LayerType;
  headDim: number;
  numHeads: number;
  numKvHeads: number;
  /** Full layers with attention_k_eq_v: no v_proj, V is the raw K projection. */
  kEqV: boolean;
  rope: RopeSpec;
  /**
   * KV-shared target layers (E2B / E4B): the index of the earlier layer whose K/V this layer reads (the last
   * cache owner of its type, src/format/kv-sharing.ts). Absent on layers that own their cache, and on assistant
   * layers (they all read the target's K/V).
   */
  kvDonor?: number;
}

/** Per-layer embeddings of Gemma 4 E2B / E4B (docs/GEMMA4-FAMILY.md section 4). */
export interface PerLayerInputConfig {
  /** hidden_size_per_layer_input P: width of each layer's slice. */
  width: number;
  /** vocab_size_per_layer_input: rows of embed_tokens_per_layer. */
  vocab: number;
}

/** The mixture-of-experts block of Gemma 4 26B-A4B (enable_moe_block; GEMMA4-FAMILY.md section 6). */
export interface MoeConfig {
  /** num_experts E. */
  numExperts: number;
  /** top_k_experts: experts per token. */
  topK: number;
  /** moe_intermediate_size: each expert's MLP width. */
  intermediate: number;
}

/** The centroid-masked LM head of the E-series assistants (use_ordered_embeddings; GEMMA4-FAMILY.md section 7). */
export interface CentroidHeadConfig {
  /** num_centroids C (2048 in the real assistants); vocab / C tokens per centroid. */
  numCentroids: number;
  /** centroid_intermediate_top_k (32): clusters whose tokens are scored. */
  topK: number;
}

/** The parts of config.json the engine uses, validated. */
export interface ModelConfig {
  role: 'target' | 'assistant';
  modelType: ModelType;
  hidden: number;
  intermediate: number;
  numLayers: number;
  vocab: number;
  /** Sliding window W (keys per query, including itself). */
  window: number;
  eps: number;
  /** Final logit softcap (30 for Gemma 4 targets); null = none (assistants). */
  finalSoftcap: number | null;
  tieWordEmbeddings: boolean;
  layers: LayerGeometry[];
  /** Stop tokens. */
  eosIds: number[];
  /** Assistants: hidden size of the target they draft for; null for targets. */
  backboneHidden: number | null;
  quantization: QuantizationConfig | null;
  /** Targets with per-layer embeddings (E2B / E4B); null otherwise (always null for assistants). */
  perLayerInput: PerLayerInputConfig | null;
  /**
   * Targets: num_kv_shared_layers N, the last N layers read an earlier layer's K/V (LayerGeometry.kvDonor).
   * Assistants: 0; every assistant layer reads the target's K/V, which is their design, not this field.
   */
  kvSharedLayers: number;
  /** use_double_wide_mlp: 2 x intermediate on KV-shared layers (targets with kvSharedLayers > 0 only). */
  doubleWideMlp: boolean;
  /** Assistants with use_ordered_embeddings; null otherwise. */
  centroidHead: CentroidHeadConfig | null;
  /** Targets with enable_moe_block (every layer has the block); null otherwise. */
  moe: MoeConfig | null;
  /** max_position_embeddings: the positions the model declares it was built for; null when config.json omits it. */
  maxPositions: number | null;
}

/** docs/MODEL.md section 9: <eos> and <turn|>. */
export const DEFAULT_EOS_IDS = [1, 106];

/**
 * Parses and validates config.json. `generationConfig` (generation_config.json, optional) is only consulted
 * for eos_token_id. Refuses, with a message saying why, every Gemma 4 variant this project cannot run exactly.
 */
export function parseConfig(json: unknown, file = 'config.json', generationConfig?: unknown): ModelConfig {
  if (!isObj(json)) throw new FormatError(`${file}: must be a JSON object`, file);
  const mt = json.model_type;
  const isTarget = (TARGET_MODEL_TYPES as readonly unknown[]).includes(mt);
  const isAssistant = (ASSISTANT_MODEL_TYPES as readonly unknown[]).includes(mt);
  if (!isTarget && !isAssistant) {
    throw new FormatError(
      `${file}: model_type ${JSON.stringify(mt)} is not supported (expected a Gemma 4 text model: ${TARGET_MODEL_TYPES.join(', ')}; or an MTP assistant: ${ASSISTANT_MODEL_TYPES.join(', ')})`,
      file,
      'model_type',
    );
  }
  const modelType = mt as ModelType;
  const nested = modelType === 'gemma4' || modelType === 'gemma4_unified' || isAssistant;
  let tc: Obj = json;
  let where = '';
  if (nested) {
    if (isObj(json.text_config)) {
      tc = json.text_config;
      where = 'text_config.';
    } else if (!isAssistant)
      throw new FormatError(`${file}: model_type "${modelType}" needs a "text_config" object`, file, 'text_config');
  }
  const role = isTarget ? 'target' : 'assistant';
  const ctx = { file, where };

  refuseUnsupported(ctx, tc, role);

  const hidden = posInt(ctx, tc, 'hidden_size');
  const intermediate = posInt(ctx, tc, 'intermediate_size');
  const numLayers = posInt(ctx, tc, 'num_hidden_layers');
  const numHeads = posInt(ctx, tc, 'num_attention_heads');
  const kvHeads = posInt(ctx, tc, 'num_key_value_heads');
  const headDim = posInt(ctx, tc, 'head_dim');
  const vocab = posInt(ctx, tc, 'vocab_size');
  const window = posInt(ctx, tc, 'sliding_window');
  const kEqV = tc.attention_k_eq_v === true;
  const globalHeadDim = optPosInt(ctx, tc, 'global_head_dim') ?? headDim;
  // As in transformers: num_global_key_value_heads only applies to full layers when attention_k_eq_v is set.
  const globalKv = (kEqV ? optPosInt(ctx, tc, 'num_global_key_value_heads') : undefined) ?? kvHeads;
  const eps = optPosNumber(ctx, tc, 'rms_norm_eps', 1e-6);
  // The engine plans the context the user asks for; the CLI refuses a run whose positions go past this.
  const maxPositions = optPosInt(ctx, tc, 'max_position_embeddings') ?? null;

  const types = layerTypes(ctx, tc, numLayers);
  const rope = ropeSpecs(ctx, tc);
  const family = role === 'target' ? targetFamilyFields(ctx, tc, types) : assistantFamilyFields(ctx, tc, json, vocab);
  const layers: LayerGeometry[] = types.map((type, i) => {
    const g: LayerGeometry =
      type === 'sliding'
        ? { type, headDim, numHeads, numKvHeads: kvHeads, kEqV: false, rope: rope.sliding }
        : { type, headDim: globalHeadDim, numHeads, numKvHeads: globalKv, kEqV, rope: rope.full };
    if (g.numHeads % g.numKvHeads !== 0) {
      throw new FormatError(
        `${file}: layer ${i} (${type}) has ${g.numHeads} query heads, not a multiple of its ${g.numKvHeads} KV heads`,
        file,
        `${where}layer_types`,
      );
    }
    // Attention reads heads as vec4 (shaders/attention.wgsl); every Gemma head dim is a multiple of 64.
    if (g.headDim % 4 !== 0)
      throw new FormatError(
        `${file}: layer ${i} (${type}) head dim ${g.headDim} is not a multiple of 4, which this engine's attention kernels need; this geometry is not supported`,
        file,
        `${where}${type === 'full' && tc.global_head_dim !== undefined ? 'global_head_dim' : 'head_dim'}`,
      );
    const donor = family.donors?.[i];
    if (donor !== undefined && donor !== i) g.kvDonor = donor;
    return g;
  });

  let finalSoftcap: number | null = null;
  const sc = tc.final_logit_softcapping;
  if (typeof sc === 'number' && sc > 0) finalSoftcap = sc;
  else if (sc !== undefined && sc !== null && sc !== 0) {
    throw new FormatError(
      `${file}: ${where}final_logit_softcapping must be a number or null, found ${JSON.stringify(sc)}`,
      file,
    );
  }

  let backboneHidden: number | null = null;
  if (role === 'assistant') {
    backboneHidden = posInt({ file, where: '' }, json, 'backbone_hidden_size');
  }
  const tie = (tc.tie_word_embeddings ?? json.tie_word_embeddings ?? true) === true;
  const quantization = readQuantization(json, tc !== json ? tc : null, file);
  // Every source present is checked (a malformed one is a broken file even where another wins); the first wins.
  const rootEos = optEosIds({ file, where: '' }, json, 'eos_token_id');
  const textEos = tc !== json ? optEosIds(ctx, tc, 'eos_token_id') : undefined;
  const genEos = isObj(generationConfig)
    ? optEosIds({ file: 'generation_config.json', where: '' }, generationConfig, 'eos_token_id')
    : undefined;
  const eosIds = rootEos ?? textEos ?? genEos ?? [...DEFAULT_EOS_IDS];

  return {
    role,
    modelType,
    hidden,
    intermediate,
    numLayers,
    vocab,
    window,
    eps,
    finalSoftcap,
    tieWordEmbeddings: tie,
    layers,
    eosIds,
    backboneHidden,
    quantization,
    perLayerInput: family.perLayerInput,
    kvSharedLayers: family.kvSharedLayers,
    doubleWideMlp: family.doubleWideMlp,
    centroidHead: family.centroidHead,
    moe: role === 'target' ? moeConfig(ctx, tc) : null,
    maxPositions,
  };
}

function refuseUnsupported(ctx: Ctx, tc: Obj, role: 'target' | 'assistant'): void {
  const { file, where } = ctx;
  const refuse = (key: string, why: string): never => {
    throw new FormatError(
      `${file}: ${why} (${where}${key} = ${JSON.stringify(tc[key])}); this variant is not supported yet`,
      file,
      where + key,
    );
  };
  const positive = (k: string) => typeof tc[k] === 'number' && (tc[k] as number) > 0;
  // transformers' Gemma4AssistantConfig.validate_architecture: an assistant has no per-layer inputs.
  if (role === 'assistant' && positive('hidden_size_per_layer_input'))
    refuse('hidden_size_per_layer_input', 'an assistant with per-layer embeddings');
  if (role === 'assistant' && tc.enable_moe_block === true)
    refuse('enable_moe_block', 'an assistant with mixture-of-experts blocks');
  // Gemma 4's MoE is enable_moe_block with num_experts / top_k_experts (moeConfig); these keys belong to other schemes.
  for (const k of ['num_local_experts', 'num_experts_per_tok']) {
    if (positive(k)) refuse(k, "mixture-of-experts blocks of another scheme than Gemma 4's enable_moe_block");
  }
  if (tc.attention_bias === true) refuse('attention_bias', 'attention projections with bias');
  if (tc.use_bidirectional_attention === 'all') refuse('use_bidirectional_attention', 'bidirectional attention');
  const act = tc.hidden_activation ?? tc.hidden_act;
  if (act !== undefined && act !== 'gelu_pytorch_tanh' && act !== 'gelu_tanh')
    refuse(
      tc.hidden_activation !== undefined ? 'hidden_activation' : 'hidden_act',
      'an activation other than gelu_pytorch_tanh',
    );
}

interface FamilyFields {
  perLayerInput: PerLayerInputConfig | null;
  kvSharedLayers: number;
  doubleWideMlp: boolean;
  centroidHead: CentroidHeadConfig | null;
  /** Per layer, the layer whose K/V it reads (targets with KV sharing only). */
  donors?: number[];
}

/**
 * The E-series fields of a target. Where transformers and mlx-lm default a field differently (docs/GEMMA4-FAMILY.md
 * section 2: num_kv_shared_layers 0 vs 20, use_double_wide_mlp false vs true), a model that uses the feature must
 * state the field: it is never guessed. A dense config without them stays dense; its tensors confirm it (a layer
 * without k_proj is refused with a hint at num_kv_shared_layers, see describe.ts).
 */
function targetFamilyFields(ctx: Ctx, tc: Obj, types: readonly LayerType[]): FamilyFields {
  const L = types.length;
  const ple = optNonNegInt(ctx, tc, 'hidden_size_per_layer_input') ?? 0;
  const shared = optNonNegInt(ctx, tc, 'num_kv_shared_layers');
  const why = (key: string, defaults: string, user: string) =>
    `${ctx.file}: ${ctx.where}${key} is required for ${user}, and it is missing: transformers and mlx-lm default it differently (${defaults}), so it cannot be guessed`;
  if (ple > 0 && shared === undefined)
    throw new FormatError(
      why(
        'num_kv_shared_layers',
        'transformers 0, mlx-lm 20',
        `a model with per-layer embeddings (hidden_size_per_layer_input = ${ple})`,
      ),
      ctx.file,
      `${ctx.where}num_kv_shared_layers`,
    );
  const kvSharedLayers = shared ?? 0;
  if (kvSharedLayers > L)
    throw new FormatError(
      `${ctx.file}: ${ctx.where}num_kv_shared_layers is ${kvSharedLayers}, more than the ${L} layers (num_hidden_layers)`,
      ctx.file,
      `${ctx.where}num_kv_shared_layers`,
    );
  const dw = tc.use_double_wide_mlp;
  if (dw !== undefined && dw !== null && typeof dw !== 'boolean')
    throw new FormatError(
      `${ctx.file}: ${ctx.where}use_double_wide_mlp must be true or false, found ${JSON.stringify(dw)}`,
      ctx.file,
      `${ctx.where}use_double_wide_mlp`,
    );
  if (kvSharedLayers > 0 && typeof dw !== 'boolean')
    throw new FormatError(
      why(
        'use_double_wide_mlp',
        'transformers false, mlx-lm true',
        `a model with KV-shared layers (num_kv_shared_layers = ${kvSharedLayers})`,
      ),
      ctx.file,
      `${ctx.where}use_double_wide_mlp`,
    );
  let donors: number[] | undefined;
  if (kvSharedLayers > 0) {
    if (kvSharedLayers === L)
      throw new FormatError(
        `${ctx.file}: ${ctx.where}num_kv_shared_layers = ${L} makes every layer of a target KV-shared, so no layer computes K/V`,
        ctx.file,
        `${ctx.where}num_kv_shared_layers`,
      );
    try {
      donors = kvDonors(types, kvSharedLayers);
    } catch (e) {
      throw new FormatError(
        `${ctx.file}: ${ctx.where}layer_types / num_kv_shared_layers = ${kvSharedLayers}: ${(e as Error).message}`,
        ctx.file,
        `${ctx.where}num_kv_shared_layers`,
      );
    }
  }
  let perLayerInput: PerLayerInputConfig | null = null;
  if (ple > 0) {
    const vocab = optNonNegInt(ctx, tc, 'vocab_size_per_layer_input');
    if (!vocab)
      throw new FormatError(
        `${ctx.file}: ${ctx.where}vocab_size_per_layer_input must be a positive integer for a model with per-layer embeddings (hidden_size_per_layer_input = ${ple}), found ${JSON.stringify(tc.vocab_size_per_layer_input ?? null)}`,
        ctx.file,
        `${ctx.where}vocab_size_per_layer_input`,
      );
    perLayerInput = { width: ple, vocab };
  }
  return {
    perLayerInput,
    kvSharedLayers,
    doubleWideMlp: dw === true && kvSharedLayers > 0,
    centroidHead: null,
    donors,
  };
}

/** The assistant's centroid head (use_ordered_embeddings); num_centroids and its top-k must be stated. */
function assistantFamilyFields(ctx: Ctx, tc: Obj, json: Obj, vocab: number): FamilyFields {
  if (tc.use_double_wide_mlp === true)
    throw new FormatError(
      `${ctx.file}: ${ctx.where}use_double_wide_mlp is true; an assistant's MLP is single-wide (transformers' Gemma4AssistantConfig requires false)`,
      ctx.file,
      `${ctx.where}use_double_wide_mlp`,
    );
  const base: FamilyFields = { perLayerInput: null, kvSharedLayers: 0, doubleWideMlp: false, centroidHead: null };
  const ordered = json.use_ordered_embeddings;
  if (ordered === undefined || ordered === null || ordered === false) return base;
  if (ordered !== true)
    throw new FormatError(
      `${ctx.file}: use_ordered_embeddings must be true or false, found ${JSON.stringify(ordered)}`,
      ctx.file,
      'use_ordered_embeddings',
    );
  const top = { file: ctx.file, where: '' };
  const need = (key: string) => {
    if (json[key] === undefined)
      throw new FormatError(
        `${ctx.file}: ${key} is required with use_ordered_embeddings (the centroid LM head) and is missing`,
        ctx.file,
        key,
      );
    return posInt(top, json, key);
  };
  const numCentroids = need('num_centroids');
  const topK = need('centroid_intermediate_top_k');
  if (vocab % numCentroids !== 0)
    throw new FormatError(
      `${ctx.file}: vocab_size ${vocab} is not a multiple of num_centroids ${numCentroids} (each centroid owns vocab / num_centroids tokens)`,
      ctx.file,
      'num_centroids',
    );
  if (topK > numCentroids)
    throw new FormatError(
      `${ctx.file}: centroid_intermediate_top_k ${topK} is more than num_centroids ${numCentroids}`,
      ctx.file,
      'centroid_intermediate_top_k',
    );
  return { ...base, centroidHead: { numCentroids, topK } };
}

/**
 * The MoE block of a target: with enable_moe_block, num_experts, top_k_experts and moe_intermediate_size are required
 * (transformers and mlx-lm both default them to None). Without it, they must not describe experts.
 */
function moeConfig(ctx: Ctx, tc: Obj): MoeConfig | null {
  const keys = ['num_experts', 'top_k_experts', 'moe_intermediate_size'] as const;
  const flag = tc.enable_moe_block;
  if (flag !== undefined && flag !== null && typeof flag !== 'boolean')
    throw new FormatError(
      `${ctx.file}: ${ctx.where}enable_moe_block must be true or false, found ${JSON.stringify(flag)}`,
      ctx.file,
      `${ctx.where}enable_moe_block`,
    );
  if (flag !== true) {
    for (const k of keys)
      if (typeof tc[k] === 'number' && (tc[k] as number) > 0)
        throw new FormatError(
          `${ctx.file}: ${ctx.where}${k} = ${tc[k]} but enable_moe_block is not true: the experts would be ignored; set enable_moe_block or remove ${k}`,
          ctx.file,
          `${ctx.where}${k}`,
        );
    return null;
  }
  for (const k of keys)
    if (tc[k] === undefined || tc[k] === null)
      throw new FormatError(
        `${ctx.file}: ${ctx.where}${k} is required with enable_moe_block and is missing`,
        ctx.file,
        `${ctx.where}${k}`,
      );
  const moe = {
    numExperts: posInt(ctx, tc, 'num_experts'),
    topK: posInt(ctx, tc, 'top_k_experts'),
    intermediate: posInt(ctx, tc, 'moe_intermediate_size'),
  };
  if (moe.topK > moe.numExperts)
    throw new FormatError(
      `${ctx.file}: ${ctx.where}top_k_experts ${moe.topK} is more than num_experts ${moe.numExperts}`,
      ctx.file,
      `${ctx.where}top_k_experts`,
    );
  return moe;
}

function optNonNegInt(ctx: Ctx, o: Obj, key: string): number | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (!Number.isSafeInteger(v) || (v as number) < 0)
    throw new FormatError(
      `${ctx.file}: ${ctx.where}${key} must be a non-negative integer, found ${JSON.stringify(v)}`,
      ctx.file,
      ctx.where + key,
    );
  return v as number;
}

function layerTypes(ctx: Ctx, tc: Obj, numLayers: number): LayerType[] {
  const lt = tc.layer_types;
  if (lt === undefined || lt === null) {
    // transformers' default: five sliding then one full, last layer full
    return Array.from({ length: numLayers }, (_, i) => (i === numLayers - 1 || (i + 1) % 6 === 0 ? 'full' : 'sliding'));
  }
  if (!Array.isArray(lt) || lt.length !== numLayers) {
    throw new FormatError(
      `${ctx.file}: ${ctx.where}layer_types must list ${numLayers} layer types (num_hidden_layers), found ${Array.isArray(lt) ? `${lt.length} entries` : JSON.stringify(lt)}`,
      ctx.file,
      `${ctx.where}layer_types`,
    );
  }
  return lt.map((t, i) => {
    if (t === 'sliding_attention') return 'sliding';
    if (t === 'full_attention') return 'full';
    throw new FormatError(
      `${ctx.file}: ${ctx.where}layer_types[${i}] is ${JSON.stringify(t)} (expected "sliding_attention" or "full_attention")`,
      ctx.file,
      `${ctx.where}layer_types`,
    );
  });
}

function ropeSpecs(ctx: Ctx, tc: Obj): { sliding: RopeSpec; full: RopeSpec } {
  const rp = isObj(tc.rope_parameters) ? tc.rope_parameters : {};
  const one = (
    key: 'sliding_attention' | 'full_attention',
    defTheta: number,
    defType: 'default' | 'proportional',
    defPartial: number,
  ): RopeSpec => {
    // Absent entry: transformers' Gemma 4 defaults. Present entry: partial_rotary_factor defaults to 1.
    const absent = rp[key] === undefined;
    const p = isObj(rp[key]) ? (rp[key] as Obj) : absent ? {} : null;
    if (p === null)
      throw new FormatError(`${ctx.file}: ${ctx.where}rope_parameters.${key} must be an object`, ctx.file);
    const ropeType = p.rope_type ?? defType;
    if (ropeType !== 'default' && ropeType !== 'proportional') {
      throw new FormatError(
        `${ctx.file}: ${ctx.where}rope_parameters.${key}.rope_type ${JSON.stringify(ropeType)} is not supported yet (expected "default" or "proportional")`,
        ctx.file,
      );
    }
    if (p.factor !== undefined && p.factor !== 1) {
      throw new FormatError(
        `${ctx.file}: ${ctx.where}rope_parameters.${key}.factor ${JSON.stringify(p.factor)} (scaled RoPE) is not supported yet`,
        ctx.file,
      );
    }
    const theta = p.rope_theta ?? defTheta;
    const partial = p.partial_rotary_factor ?? (absent ? defPartial : 1);
    if (typeof theta !== 'number' || !(theta > 0))
      throw new FormatError(
        `${ctx.file}: ${ctx.where}rope_parameters.${key}.rope_theta must be a positive number`,
        ctx.file,
      );
    if (typeof partial !== 'number' || !(partial > 0 && partial <= 1))
      throw new FormatError(
        `${ctx.file}: ${ctx.where}rope_parameters.${key}.partial_rotary_factor must be in (0, 1]`,
        ctx.file,
      );
    if (ropeType === 'default' && partial !== 1) {
      // transformers' default RoPE with a partial factor rotates a prefix of dims: a different layout, not implemented.
      throw new FormatError(
        `${ctx.file}: ${ctx.where}rope_parameters.${key}: rope_type "default" with partial_rotary_factor ${partial} is not supported yet`,
        ctx.file,
      );
    }
    return { ropeType, theta, partialRotary: partial };
  };
  return {
    sliding: one('sliding_attention', 10000, 'default', 1),
    full: one('full_attention', 1e6, 'proportional', 0.25),
  };
}
