/**
 * The typed description of a Qwen3.5 checkpoint (docs/QWEN35.md section 2), beside Gemma's ModelDescription:
 * every shape derived from config.json and checked against the tensors. Names in Linear.name are normalised
 * ("layers.0.linear_attn.in_proj_qkv", "mtp.fc"); TensorRef.name keeps the name as written in the file.
 *
 * Norm weights are the effective multipliers (MLX layout): every zero-centred Qwen3_5RMSNorm of transformers
 * (input/post-attention/final/q/k norms and the MTP head's norms) computes x_hat * (1 + w), and MLX conversions
 * store 1 + w; the Gated DeltaNet output norm (RMSNormGated) computes x_hat * w and is stored as is. Consumers
 * multiply by the stored weight in every case.
 */
import type { Linear } from '../model-description.ts';
import type { TensorRef } from '../safetensors.ts';
import type { Qwen35Config, Qwen35ModelType } from './config.ts';

/** What every Qwen3.5 decoder layer has besides its token mixer. */
interface Qwen35LayerBase {
  index: number;
  /** [hidden] */
  inputNorm: TensorRef;
  /** [hidden] */
  postAttnNorm: TensorRef;
  gate: Linear;
  up: Linear;
  down: Linear;
}

/** Gated DeltaNet layer (`linear_attn`). */
export interface Qwen35LinearLayer extends Qwen35LayerBase {
  type: 'linear';
  /** [convDim, hidden]: rows are q (keyDim), k (keyDim), v (valueDim). */
  inProjQkv: Linear;
  /** [valueDim, hidden]: the gate z of the output norm. */
  inProjZ: Linear;
  /** [numValueHeads, hidden]: beta = sigmoid(b). */
  inProjB: Linear;
  /** [numValueHeads, hidden]: a, the input of the decay. */
  inProjA: Linear;
  /** Depthwise causal conv weight, MLX layout [convDim, convKernel, 1] (tap j multiplies x[t - (K-1) + j]). */
  conv: TensorRef;
  /** [numValueHeads] */
  dtBias: TensorRef;
  /** [numValueHeads] (F32 in MLX conversions). */
  aLog: TensorRef;
  /** [valueHeadDim]: RMSNormGated weight, shared by the value heads. */
  gatedNorm: TensorRef;
  /** [hidden, valueDim] */
  outProj: Linear;
}

/** Gated full-attention layer (`self_attn`); also the MTP head's decoder layer. */
export interface Qwen35AttentionLayer extends Qwen35LayerBase {
  type: 'full';
  /** [2 * numHeads * headDim, hidden]: per head, headDim query rows then headDim output-gate rows. */
  qProj: Linear;
  kProj: Linear;
  vProj: Linear;
  /** [hidden, numHeads * headDim] */
  oProj: Linear;
  /** [headDim] */
  qNorm: TensorRef;
  /** [headDim] */
  kNorm: TensorRef;
}

export type Qwen35Layer = Qwen35LinearLayer | Qwen35AttentionLayer;

/**
 * The MTP head (vLLM qwen3_5_mtp.py): h' = fc([norm_e(embed(token)), norm_h(hidden)]) -> one full-attention
 * decoder layer with its own KV cache -> norm -> the target's LM head.
 */
export interface Qwen35MtpHead {
  /** Where the tensors came from: the target checkpoint's mtp.* or a split drafter folder. */
  source: 'target' | 'drafter';
  /** A label for messages and reports (the folder of the drafter). */
  label: string;
  /** [hidden] */
  preFcNormEmbedding: TensorRef;
  /** [hidden] */
  preFcNormHidden: TensorRef;
  /** [hidden, 2 * hidden]: input is [normed embedding, normed hidden] (embedding first). */
  fc: Linear;
  layer: Qwen35AttentionLayer;
  /** [hidden] */
  norm: TensorRef;
}

export interface Qwen35Description {
  family: 'qwen3_5';
  role: 'target';
  modelType: Qwen35ModelType;
  config: Qwen35Config;
  hidden: number;
  intermediate: number;
  vocab: number;
  eps: number;
  /** [vocab, hidden] */
  embed: Linear;
  /** [vocab, hidden]: lm_head, or the embedding itself when tie_word_embeddings. */
  lmHead: Linear;
  tieWordEmbeddings: boolean;
  layers: Qwen35Layer[];
  /** [hidden] */
  finalNorm: TensorRef;
  eosIds: number[];
  /** The target's own MTP head, or null with `mtpUnavailable` saying why (the probe and trace still run). */
  mtp: Qwen35MtpHead | null;
  mtpUnavailable: string | null;
}
