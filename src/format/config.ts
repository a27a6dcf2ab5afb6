import { FormatError } from './errors.ts';
import { parseQuantization, type QuantizationConfig } from './quantization.ts';

export const TARGET_MODEL_TYPES = ['gemma4', 'gemma4_unified', 'gemma4_text', 'gemma4_unified_text'] as const;
export const ASSISTANT_MODEL_TYPES = ['gemma4_assistant', 'gemma4_unified_assistant'] as const;
export type TargetModelType = (typeof TARGET_MODEL_TYPES)[number];
export type AssistantModelType = (typeof ASSISTANT_MODEL_TYPES)[number];
export type ModelType = TargetModelType | AssistantModelType;

export type LayerType = 'sliding' | 'full';

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
}

/** GEMMA4.md section 9: <eos> and <turn|>. */
export const DEFAULT_EOS_IDS = [1, 106];

type Obj = Record<string, unknown>;
const isObj = (x: unknown): x is Obj => typeof x === 'object' && x !== null && !Array.isArray(x);

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
  const eps = typeof tc.rms_norm_eps === 'number' ? tc.rms_norm_eps : 1e-6;

  const types = layerTypes(ctx, tc, numLayers);
  const rope = ropeSpecs(ctx, tc);
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
    if (json.use_ordered_embeddings === true) {
      throw new FormatError(
        `${file}: assistants with use_ordered_embeddings (centroid-masked LM head) are not supported yet`,
        file,
        'use_ordered_embeddings',
      );
    }
  }
  const tie = (tc.tie_word_embeddings ?? json.tie_word_embeddings ?? true) === true;
  const quantization = parseQuantization(json.quantization ?? json.quantization_config, file);
  const eosIds = parseEos(json.eos_token_id) ??
    parseEos(tc.eos_token_id) ??
    (isObj(generationConfig) ? parseEos(generationConfig.eos_token_id) : undefined) ?? [...DEFAULT_EOS_IDS];

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
  };
}

interface Ctx {
  file: string;
  where: string;
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
  if (positive('hidden_size_per_layer_input'))
    refuse('hidden_size_per_layer_input', 'per-layer embeddings (Gemma 4 E2B/E4B style)');
  // The assistant legitimately shares all its layers' K/V with the target; a target must not.
  if (role === 'target' && positive('num_kv_shared_layers')) refuse('num_kv_shared_layers', 'KV-shared layers');
  if (tc.enable_moe_block === true) refuse('enable_moe_block', 'mixture-of-experts blocks');
  for (const k of [
    'num_experts',
    'num_local_experts',
    'top_k_experts',
    'moe_intermediate_size',
    'num_experts_per_tok',
  ]) {
    if (positive(k)) refuse(k, 'mixture-of-experts blocks');
  }
  if (tc.use_double_wide_mlp === true) refuse('use_double_wide_mlp', 'double-wide MLP');
  if (tc.attention_bias === true) refuse('attention_bias', 'attention projections with bias');
  if (tc.use_bidirectional_attention === 'all') refuse('use_bidirectional_attention', 'bidirectional attention');
  const act = tc.hidden_activation ?? tc.hidden_act;
  if (act !== undefined && act !== 'gelu_pytorch_tanh' && act !== 'gelu_tanh')
    refuse(
      tc.hidden_activation !== undefined ? 'hidden_activation' : 'hidden_act',
      'an activation other than gelu_pytorch_tanh',
    );
}

function posInt(ctx: Ctx, o: Obj, key: string): number {
  const v = o[key];
  if (!Number.isSafeInteger(v) || (v as number) <= 0) {
    throw new FormatError(
      `${ctx.file}: ${ctx.where}${key} must be a positive integer, found ${v === undefined ? 'nothing' : JSON.stringify(v)}`,
      ctx.file,
      ctx.where + key,
    );
  }
  return v as number;
}

function optPosInt(ctx: Ctx, o: Obj, key: string): number | undefined {
  return o[key] === undefined || o[key] === null ? undefined : posInt(ctx, o, key);
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

function parseEos(v: unknown): number[] | undefined {
  if (Number.isSafeInteger(v)) return [v as number];
  if (Array.isArray(v) && v.length > 0 && v.every((x) => Number.isSafeInteger(x))) return [...new Set(v as number[])];
  return undefined;
}
