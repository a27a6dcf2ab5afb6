/**
 * The typed description of a checkpoint that every consumer (GPU engine, CPU reference) builds on. Each shape
 * in it was derived from config.json and checked against the tensors present, so consumers can trust it.
 * Names in `name` fields are the normalised ones (e.g. "layers.3.self_attn.q_proj"); TensorRef.name keeps
 * the name as written in the file.
 */
import type { ModelConfig, LayerGeometry, ModelType } from './config.ts';
import type { AffineBits } from './quantization.ts';
import type { TensorRef } from './safetensors.ts';

export type { TensorRef } from './safetensors.ts';
export type { Dtype, FloatDtype } from './dtype.ts';

/** A linear map y = W x with W [outFeatures, inFeatures], stored MLX-affine-quantized or dense. */
export type Linear = AffineLinear | DenseLinear;

export interface AffineLinear {
  kind: 'affine';
  /** Normalised module path, e.g. "layers.0.mlp.gate_proj". */
  name: string;
  outFeatures: number;
  inFeatures: number;
  bits: AffineBits;
  groupSize: number;
  /** U32 [out, in*bits/32], codes packed LSB first. */
  weight: TensorRef;
  /** [out, in/groupSize], float (bf16 in Gemma 4 conversions). */
  scales: TensorRef;
  biases: TensorRef;
}

/** The tensors that store a linear: weight, scales, biases (affine) or weight (dense). */
export function linearTensors(l: Linear): TensorRef[] {
  return l.kind === 'affine' ? [l.weight, l.scales, l.biases] : [l.weight];
}

export interface DenseLinear {
  kind: 'dense';
  name: string;
  outFeatures: number;
  inFeatures: number;
  /** F32 | F16 | BF16 [out, in]. */
  weight: TensorRef;
}

/**
 * One decoder layer. Target layers have kProj (and vProj unless kEqV) and kNorm; assistant layers have
 * none of the three (they attend to the target's K/V), which is why they are nullable.
 */
export interface DecoderLayer extends LayerGeometry {
  index: number;
  inputNorm: TensorRef;
  qProj: Linear;
  kProj: Linear | null;
  vProj: Linear | null;
  oProj: Linear;
  /** [headDim] */
  qNorm: TensorRef;
  /** [headDim]; null on assistant layers. */
  kNorm: TensorRef | null;
  postAttnNorm: TensorRef;
  preFfNorm: TensorRef;
  gate: Linear;
  up: Linear;
  down: Linear;
  postFfNorm: TensorRef;
  /** [1]: multiplies the whole residual stream at the end of the layer. */
  layerScalar: TensorRef;
  /** E-series targets: this layer's gate into the residual of its per-layer input. */
  perLayerInput?: LayerPerLayerInput;
  /** 26B-A4B: the router and experts that run beside the dense MLP (gate/up/down above). */
  moe?: MoeBlock;
}

/**
 * E linears of one shape stored as one tensor each with a leading [E] (MLX SwitchLinear): `stacked` describes one
 * expert's shape and holds the whole 3-D tensors; src/format/experts.ts expertLinear(x, e) is expert e's Linear.
 */
export interface ExpertsLinear {
  numExperts: number;
  stacked: Linear;
}

/** One layer's MoE block (docs/GEMMA4-FAMILY.md section 6), MLX names under `layers.N.`. */
export interface MoeBlock {
  numExperts: number;
  topK: number;
  /** router.proj [E, hidden] (8-bit in MLX conversions: a quantization override). */
  routerProj: Linear;
  /** router.scale [hidden]. */
  routerScale: TensorRef;
  /** router.per_expert_scale [E]. */
  perExpertScale: TensorRef;
  /** experts.switch_glu.{gate,up}_proj [E, I_moe, hidden], down_proj [E, hidden, I_moe]. */
  gate: ExpertsLinear;
  up: ExpertsLinear;
  down: ExpertsLinear;
  /** pre_feedforward_layernorm_2 (experts input), post_feedforward_layernorm_1 (dense) / _2 (experts), [hidden]. */
  preFfNorm2: TensorRef;
  postFfNorm1: TensorRef;
  postFfNorm2: TensorRef;
}

/**
 * One layer's per-layer-input weights (docs/GEMMA4-FAMILY.md section 4): after the MLP's residual add,
 * h += postNorm(projection(gelu_tanh(gate(h)) * input_l)).
 */
export interface LayerPerLayerInput {
  /** per_layer_input_gate [P, hidden]. */
  gate: Linear;
  /** per_layer_projection [hidden, P]. */
  projection: Linear;
  /** post_per_layer_input_norm.weight [hidden]. */
  postNorm: TensorRef;
}

/** The model-level per-layer embedding weights of E2B / E4B (docs/GEMMA4-FAMILY.md section 4). */
export interface PerLayerEmbedding {
  /** P (hidden_size_per_layer_input). */
  width: number;
  /** embed_tokens_per_layer [vocab_size_per_layer_input, numLayers * P] (an embedding, quantized like one). */
  table: Linear;
  /** per_layer_model_projection [numLayers * P, hidden]: reads the scaled token embedding. */
  modelProjection: Linear;
  /** per_layer_projection_norm.weight [P]. */
  projectionNorm: TensorRef;
}

/** The centroid-masked LM head of an E-series assistant (use_ordered_embeddings; GEMMA4-FAMILY.md section 7). */
export interface CentroidHead {
  numCentroids: number;
  /** centroid_intermediate_top_k. */
  topK: number;
  /** masked_embedding.centroids [numCentroids, hidden]. */
  centroids: Linear;
  /** masked_embedding.token_ordering [vocab], I32 (MLX) or I64 (transformers): vocab / numCentroids per centroid. */
  tokenOrdering: TensorRef;
}

interface DescriptionBase {
  modelType: ModelType;
  config: ModelConfig;
  hidden: number;
  intermediate: number;
  vocab: number;
  window: number;
  eps: number;
  /** 30 for Gemma 4 targets; null for assistants. */
  finalSoftcap: number | null;
  /** Tied embedding [vocab, hidden]; also the LM head. */
  embed: Linear;
  layers: DecoderLayer[];
  /** [hidden] */
  finalNorm: TensorRef;
  eosIds: number[];
}

export interface TargetDescription extends DescriptionBase {
  role: 'target';
  /** sqrt(hidden) rounded to bf16, as reference implementations multiply the embedding by it (12B: 62.0). */
  embedScale: number;
  /** E2B / E4B: per-layer embeddings (each layer's weights are in DecoderLayer.perLayerInput). */
  perLayer?: PerLayerEmbedding;
}

export interface AssistantDescription extends DescriptionBase {
  role: 'assistant';
  /** Hidden size of the target (input is [target embed, target hidden], 2*backboneHidden wide). */
  backboneHidden: number;
  /** [hidden, 2*backboneHidden] */
  preProjection: Linear;
  /** [backboneHidden, hidden] */
  postProjection: Linear;
  /** E-series assistants: logits over the tokens of the top centroids only. */
  centroidHead?: CentroidHead;
}

export type ModelDescription = TargetDescription | AssistantDescription;

/**
 * The Gemma 4 family features (per-layer embeddings, KV sharing, MoE, a centroid head) a description uses, in
 * words, for consumers that implement only the dense models (the GPU engine refuses these, see
 * src/model/gpu-weights.ts). Empty for a dense 12B / 31B.
 */
export function familyFeatures(desc: ModelDescription): string[] {
  const out: string[] = [];
  if (desc.role === 'target' && desc.perLayer) out.push(`per-layer embeddings (P = ${desc.perLayer.width})`);
  if (desc.config.kvSharedLayers > 0) out.push(`${desc.config.kvSharedLayers} KV-shared layers`);
  if (desc.config.doubleWideMlp) out.push('double-wide MLP');
  if (desc.config.moe)
    out.push(`mixture-of-experts blocks (${desc.config.moe.numExperts} experts, top ${desc.config.moe.topK})`);
  if (desc.role === 'assistant' && desc.centroidHead)
    out.push(`a centroid LM head (${desc.centroidHead.numCentroids} centroids, top ${desc.centroidHead.topK})`);
  return out;
}
