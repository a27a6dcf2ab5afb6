/**
 * config.json of the Qwen3.5 / Qwen3.6 dense hybrid family (docs/QWEN35.md section 1): Gated DeltaNet ("linear
 * attention") layers with one gated full-attention layer every `full_attention_interval`, and an optional MTP
 * head. Accepts the MLX/HF multimodal layout (model_type "qwen3_5" with a "text_config") and the text-only one
 * ("qwen3_5_text" at the root), and refuses, with the key and the reason, what this lab cannot run exactly.
 */
import { type Ctx, isObj, type Obj, optEosIds, optPosInt, optPosNumber, posInt } from '../config-fields.ts';
import { FormatError } from '../errors.ts';
import { readQuantization, type QuantizationConfig } from '../quantization.ts';

export const QWEN35_MODEL_TYPES = ['qwen3_5', 'qwen3_5_text'] as const;
/** Model types a split MTP drafter folder may declare (its config repeats the target's text geometry). */
export const QWEN35_DRAFTER_MODEL_TYPES = ['qwen3_5', 'qwen3_5_text', 'qwen3_5_mtp'] as const;
export type Qwen35ModelType = (typeof QWEN35_MODEL_TYPES)[number] | 'qwen3_5_mtp';

/** 'linear': Gated DeltaNet token mixer; 'full': gated full attention. */
export type Qwen35LayerType = 'linear' | 'full';

/** Geometry of the gated full-attention layers (target and MTP head). */
export interface Qwen35AttentionGeometry {
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  /** q_proj yields [query, gate] per head: 2 * numHeads * headDim rows. */
  outputGate: true;
  rope: {
    theta: number;
    /** Fraction of the head dim that rotates (0.25 in every Qwen3.5). */
    partialRotary: number;
    /** int(headDim * partialRotary): the first rotaryDim dims rotate, rotate_half style (pairs i, i + rotaryDim/2). */
    rotaryDim: number;
  };
}

/** Geometry of the Gated DeltaNet layers. */
export interface Qwen35LinearGeometry {
  numKeyHeads: number;
  numValueHeads: number;
  keyHeadDim: number;
  valueHeadDim: number;
  /** Depthwise causal conv1d kernel size (linear_conv_kernel_dim, 4 in every release). */
  convKernel: number;
  /** numKeyHeads * keyHeadDim. */
  keyDim: number;
  /** numValueHeads * valueHeadDim. */
  valueDim: number;
  /** 2 * keyDim + valueDim: channels of in_proj_qkv, of the conv and of its state. */
  convDim: number;
}

export interface Qwen35Config {
  family: 'qwen3_5';
  role: 'target' | 'drafter';
  modelType: Qwen35ModelType;
  hidden: number;
  intermediate: number;
  /** 0 for a drafter. */
  numLayers: number;
  vocab: number;
  eps: number;
  layerTypes: Qwen35LayerType[];
  attention: Qwen35AttentionGeometry;
  /** Null for a drafter (it has no Gated DeltaNet layer). */
  linear: Qwen35LinearGeometry | null;
  tieWordEmbeddings: boolean;
  /** mtp_num_hidden_layers (0 when absent) and mtp_use_dedicated_embeddings. */
  mtp: { numLayers: number; dedicatedEmbeddings: boolean };
  eosIds: number[];
  quantization: QuantizationConfig | null;
  /** max_position_embeddings: the positions the model declares it was built for; null when config.json omits it. */
  maxPositions: number | null;
}

/** True when config.json declares a Qwen3.5 model (used to pick the family before parsing). */
export function isQwen35Config(json: unknown): boolean {
  return isObj(json) && (QWEN35_DRAFTER_MODEL_TYPES as readonly unknown[]).includes(json.model_type);
}

/**
 * Parses and validates a Qwen3.5 config.json. `role` 'drafter' reads a split MTP drafter folder's config: the
 * same text fields minus the Gated DeltaNet ones and the layer list.
 */
export function parseQwen35Config(
  json: unknown,
  file = 'config.json',
  role: 'target' | 'drafter' = 'target',
): Qwen35Config {
  if (!isObj(json)) throw new FormatError(`${file}: must be a JSON object`, file);
  const mt = json.model_type;
  const allowed: readonly unknown[] = role === 'target' ? QWEN35_MODEL_TYPES : QWEN35_DRAFTER_MODEL_TYPES;
  if (!allowed.includes(mt)) {
    if (mt === 'qwen3_5_moe' || mt === 'qwen3_5_moe_text')
      throw new FormatError(
        `${file}: model_type "${mt}" (Qwen3.5 mixture-of-experts) is not supported yet; only the dense qwen3_5 family is`,
        file,
        'model_type',
      );
    throw new FormatError(
      `${file}: model_type ${JSON.stringify(mt)} is not a Qwen3.5 ${role} (expected ${allowed.join(', ')})`,
      file,
      'model_type',
    );
  }
  let tc: Obj = json;
  let where = '';
  if (isObj(json.text_config)) {
    tc = json.text_config;
    where = 'text_config.';
  }
  const ctx: Ctx = { file, where };
  refuseUnsupported(ctx, tc);

  const hidden = posInt(ctx, tc, 'hidden_size');
  const intermediate = posInt(ctx, tc, 'intermediate_size');
  const vocab = posInt(ctx, tc, 'vocab_size');
  const numHeads = posInt(ctx, tc, 'num_attention_heads');
  const numKvHeads = posInt(ctx, tc, 'num_key_value_heads');
  const headDim = optPosInt(ctx, tc, 'head_dim') ?? hidden / numHeads;
  if (!Number.isInteger(headDim))
    throw new FormatError(
      `${file}: ${where}head_dim absent and hidden_size / num_attention_heads is not an integer`,
      file,
    );
  if (numHeads % numKvHeads !== 0)
    throw new FormatError(
      `${file}: ${where}num_attention_heads ${numHeads} is not a multiple of num_key_value_heads ${numKvHeads}`,
      file,
      `${where}num_key_value_heads`,
    );
  if (headDim % 4 !== 0)
    throw new FormatError(
      `${file}: ${where}head_dim ${headDim} is not a multiple of 4, which this engine's attention kernels need; not supported`,
      file,
      `${where}head_dim`,
    );
  const eps = optPosNumber(ctx, tc, 'rms_norm_eps', 1e-6);
  // The engine plans the context the user asks for; the CLI refuses a run whose positions go past this.
  const maxPositions = optPosInt(ctx, tc, 'max_position_embeddings') ?? null;
  const rope = ropeSpec(ctx, tc, headDim);

  let numLayers = 0;
  let layerTypes: Qwen35LayerType[] = [];
  let linear: Qwen35LinearGeometry | null = null;
  if (role === 'target') {
    numLayers = posInt(ctx, tc, 'num_hidden_layers');
    layerTypes = parseLayerTypes(ctx, tc, numLayers);
    linear = linearGeometry(ctx, tc);
  }
  const mtpLayers = tc.mtp_num_hidden_layers ?? 0;
  if (!Number.isSafeInteger(mtpLayers) || (mtpLayers as number) < 0)
    throw new FormatError(
      `${file}: ${where}mtp_num_hidden_layers must be a non-negative integer, found ${JSON.stringify(mtpLayers)}`,
      file,
      `${where}mtp_num_hidden_layers`,
    );
  const tie = (tc.tie_word_embeddings ?? json.tie_word_embeddings ?? false) === true;
  const quantization = readQuantization(json, tc !== json ? tc : null, file);
  // Both sources are checked when present (a malformed one is a broken file even where the other wins).
  const rootEos = optEosIds({ file, where: '' }, json, 'eos_token_id');
  const textEos = tc !== json ? optEosIds(ctx, tc, 'eos_token_id') : undefined;
  const eosIds = rootEos ?? textEos ?? [];
  return {
    family: 'qwen3_5',
    role,
    modelType: mt as Qwen35ModelType,
    hidden,
    intermediate,
    numLayers,
    vocab,
    eps,
    layerTypes,
    attention: { numHeads, numKvHeads, headDim, outputGate: true, rope },
    linear,
    tieWordEmbeddings: tie,
    mtp: { numLayers: mtpLayers as number, dedicatedEmbeddings: tc.mtp_use_dedicated_embeddings === true },
    eosIds,
    quantization,
    maxPositions,
  };
}

function refuseUnsupported(ctx: Ctx, tc: Obj): void {
  const refuse = (key: string, why: string): never => {
    throw new FormatError(
      `${ctx.file}: ${why} (${ctx.where}${key} = ${JSON.stringify(tc[key])}); this variant is not supported yet`,
      ctx.file,
      ctx.where + key,
    );
  };
  const positive = (k: string) => typeof tc[k] === 'number' && (tc[k] as number) > 0;
  for (const k of ['num_experts', 'num_experts_per_tok', 'moe_intermediate_size', 'shared_expert_intermediate_size'])
    if (positive(k)) refuse(k, 'mixture-of-experts blocks (qwen3_5_moe)');
  if (tc.attention_bias === true) refuse('attention_bias', 'attention projections with bias');
  if (tc.attn_output_gate === false) refuse('attn_output_gate', 'full attention without the sigmoid output gate');
  const act = tc.hidden_act;
  if (act !== undefined && act !== 'silu') refuse('hidden_act', 'an MLP activation other than silu');
}

function linearGeometry(ctx: Ctx, tc: Obj): Qwen35LinearGeometry {
  const numKeyHeads = posInt(ctx, tc, 'linear_num_key_heads');
  const numValueHeads = posInt(ctx, tc, 'linear_num_value_heads');
  const keyHeadDim = posInt(ctx, tc, 'linear_key_head_dim');
  const valueHeadDim = posInt(ctx, tc, 'linear_value_head_dim');
  const convKernel = optPosInt(ctx, tc, 'linear_conv_kernel_dim') ?? 4;
  if (numValueHeads % numKeyHeads !== 0)
    throw new FormatError(
      `${ctx.file}: ${ctx.where}linear_num_value_heads ${numValueHeads} is not a multiple of linear_num_key_heads ${numKeyHeads}`,
      ctx.file,
      `${ctx.where}linear_num_value_heads`,
    );
  if (convKernel > 16)
    throw new FormatError(
      `${ctx.file}: ${ctx.where}linear_conv_kernel_dim ${convKernel} is not supported (at most 16; every Qwen3.5 uses 4)`,
      ctx.file,
      `${ctx.where}linear_conv_kernel_dim`,
    );
  const keyDim = numKeyHeads * keyHeadDim;
  const valueDim = numValueHeads * valueHeadDim;
  return {
    numKeyHeads,
    numValueHeads,
    keyHeadDim,
    valueHeadDim,
    convKernel,
    keyDim,
    valueDim,
    convDim: 2 * keyDim + valueDim,
  };
}

function parseLayerTypes(ctx: Ctx, tc: Obj, numLayers: number): Qwen35LayerType[] {
  const lt = tc.layer_types;
  // Checked even beside layer_types: mlx-lm builds its layers from full_attention_interval alone (layer i is full
  // iff (i + 1) % interval == 0; 4 when absent) and transformers from layer_types, so an interval of 0 or one
  // that disagrees with layer_types is a config the two read as different models (mlx-lm cannot load it). Where
  // the interval is absent, layer_types (transformers' own field) is taken as written and not held to mlx-lm's
  // default of 4: the stored tensors are checked against it (describe), which is what the engine runs.
  const interval = optPosInt(ctx, tc, 'full_attention_interval');
  const byInterval = (i: number): Qwen35LayerType => ((i + 1) % (interval ?? 4) === 0 ? 'full' : 'linear');
  if (lt === undefined || lt === null) return Array.from({ length: numLayers }, (_, i) => byInterval(i));
  if (!Array.isArray(lt) || lt.length !== numLayers)
    throw new FormatError(
      `${ctx.file}: ${ctx.where}layer_types must list ${numLayers} layer types (num_hidden_layers), found ${Array.isArray(lt) ? `${lt.length} entries` : JSON.stringify(lt)}`,
      ctx.file,
      `${ctx.where}layer_types`,
    );
  const types = lt.map((t, i): Qwen35LayerType => {
    if (t === 'linear_attention') return 'linear';
    if (t === 'full_attention') return 'full';
    throw new FormatError(
      `${ctx.file}: ${ctx.where}layer_types[${i}] is ${JSON.stringify(t)}, an unknown layer type (expected "linear_attention" or "full_attention")`,
      ctx.file,
      `${ctx.where}layer_types`,
    );
  });
  const differs = interval === undefined ? -1 : types.findIndex((t, i) => t !== byInterval(i));
  if (differs >= 0)
    throw new FormatError(
      `${ctx.file}: ${ctx.where}layer_types[${differs}] is "${lt[differs]}" but full_attention_interval ${interval} makes layer ${differs} ${byInterval(differs)} attention (mlx-lm builds its layers from full_attention_interval, transformers from layer_types; the two must agree)`,
      ctx.file,
      `${ctx.where}full_attention_interval`,
    );
  return types;
}

function ropeSpec(ctx: Ctx, tc: Obj, headDim: number): Qwen35AttentionGeometry['rope'] {
  // transformers 5 nests rope in rope_parameters; older configs and mlx-lm accept rope_theta /
  // partial_rotary_factor / rope_scaling at the text-config root.
  const rp: Obj = isObj(tc.rope_parameters) ? tc.rope_parameters : isObj(tc.rope_scaling) ? tc.rope_scaling : {};
  const key = isObj(tc.rope_parameters) ? 'rope_parameters' : 'rope_scaling';
  const type = rp.rope_type ?? rp.type ?? 'default';
  if (type !== 'default' && type !== 'mrope')
    throw new FormatError(
      `${ctx.file}: ${ctx.where}${key}.rope_type ${JSON.stringify(type)} (scaled RoPE) is not supported yet (expected "default")`,
      ctx.file,
      `${ctx.where}${key}`,
    );
  if (rp.factor !== undefined && rp.factor !== 1)
    throw new FormatError(
      `${ctx.file}: ${ctx.where}${key}.factor ${JSON.stringify(rp.factor)} (scaled RoPE) is not supported yet`,
      ctx.file,
      `${ctx.where}${key}`,
    );
  const theta = rp.rope_theta ?? tc.rope_theta ?? 10000000;
  const partial = rp.partial_rotary_factor ?? tc.partial_rotary_factor ?? 0.25;
  if (typeof theta !== 'number' || !(theta > 0))
    throw new FormatError(`${ctx.file}: ${ctx.where}rope_theta must be a positive number`, ctx.file);
  if (typeof partial !== 'number' || !(partial > 0 && partial <= 1))
    throw new FormatError(`${ctx.file}: ${ctx.where}partial_rotary_factor must be in (0, 1]`, ctx.file);
  const rotaryDim = Math.trunc(headDim * partial);
  if (rotaryDim % 2 !== 0 || rotaryDim === 0)
    throw new FormatError(
      `${ctx.file}: head_dim ${headDim} x partial_rotary_factor ${partial} = ${headDim * partial} rotating dims; expected a positive even count`,
      ctx.file,
    );
  // Multimodal RoPE (mrope_section) reduces to this 1-D RoPE for text: all three position rows are equal.
  return { theta, partialRotary: partial, rotaryDim };
}
