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
}

export interface AssistantDescription extends DescriptionBase {
  role: 'assistant';
  /** Hidden size of the target (input is [target embed, target hidden], 2*backboneHidden wide). */
  backboneHidden: number;
  /** [hidden, 2*backboneHidden] */
  preProjection: Linear;
  /** [backboneHidden, hidden] */
  postProjection: Linear;
}

export type ModelDescription = TargetDescription | AssistantDescription;
