/**
 * The Qwen3.5 description's weights in float64 (dequantized exactly: scale * q + bias), for the CPU reference.
 * Meant for small models (fixtures, synthetic ones). Norm weights are the effective multipliers as stored (MLX
 * layout: 1 + w for transformers' zero-centred norms; docs/QWEN35.md section 2).
 */
import { dequantizeLinear } from '../../format/dequant.ts';
import type { Linear } from '../../format/model-description.ts';
import type {
  Qwen35AttentionLayer,
  Qwen35Description,
  Qwen35LinearLayer,
  Qwen35MtpHead,
} from '../../format/qwen3_5/description.ts';
import type { Qwen35Config } from '../../format/qwen3_5/config.ts';
import { readTensorBytes, toFloat64, type TensorRef } from '../../format/safetensors.ts';
import type { RefLinear } from '../linear.ts';

interface QwenRefLayerBase {
  index: number;
  inputNorm: Float64Array;
  postAttnNorm: Float64Array;
  gate: RefLinear;
  up: RefLinear;
  down: RefLinear;
}

export interface QwenRefLinearLayer extends QwenRefLayerBase {
  type: 'linear';
  inProjQkv: RefLinear;
  inProjZ: RefLinear;
  inProjB: RefLinear;
  inProjA: RefLinear;
  /** [convDim, K] row-major: conv[c * K + j] multiplies the input of position t - (K-1) + j. */
  conv: Float64Array;
  dtBias: Float64Array;
  aLog: Float64Array;
  gatedNorm: Float64Array;
  outProj: RefLinear;
}

export interface QwenRefAttentionLayer extends QwenRefLayerBase {
  type: 'full';
  qProj: RefLinear;
  kProj: RefLinear;
  vProj: RefLinear;
  oProj: RefLinear;
  qNorm: Float64Array;
  kNorm: Float64Array;
}

export type QwenRefLayer = QwenRefLinearLayer | QwenRefAttentionLayer;

export interface QwenRefMtpHead {
  preFcNormEmbedding: Float64Array;
  preFcNormHidden: Float64Array;
  fc: RefLinear;
  layer: QwenRefAttentionLayer;
  norm: Float64Array;
}

export interface QwenRefWeights {
  config: Qwen35Config;
  hidden: number;
  vocab: number;
  eps: number;
  /** [vocab, hidden] */
  embed: RefLinear;
  /** [vocab, hidden]; the same object as `embed` when tied. */
  lmHead: RefLinear;
  layers: QwenRefLayer[];
  finalNorm: Float64Array;
  /** Null when the description has no MTP head. */
  mtp: QwenRefMtpHead | null;
}

async function vec(t: TensorRef): Promise<Float64Array> {
  return toFloat64(await readTensorBytes(t), t.dtype);
}

async function lin(l: Linear): Promise<RefLinear> {
  return { out: l.outFeatures, in: l.inFeatures, w: await dequantizeLinear(l) };
}

async function base(l: Qwen35LinearLayer | Qwen35AttentionLayer): Promise<QwenRefLayerBase> {
  return {
    index: l.index,
    inputNorm: await vec(l.inputNorm),
    postAttnNorm: await vec(l.postAttnNorm),
    gate: await lin(l.gate),
    up: await lin(l.up),
    down: await lin(l.down),
  };
}

async function attention(l: Qwen35AttentionLayer): Promise<QwenRefAttentionLayer> {
  return {
    ...(await base(l)),
    type: 'full',
    qProj: await lin(l.qProj),
    kProj: await lin(l.kProj),
    vProj: await lin(l.vProj),
    oProj: await lin(l.oProj),
    qNorm: await vec(l.qNorm),
    kNorm: await vec(l.kNorm),
  };
}

async function linear(l: Qwen35LinearLayer): Promise<QwenRefLinearLayer> {
  return {
    ...(await base(l)),
    type: 'linear',
    inProjQkv: await lin(l.inProjQkv),
    inProjZ: await lin(l.inProjZ),
    inProjB: await lin(l.inProjB),
    inProjA: await lin(l.inProjA),
    conv: await vec(l.conv), // [C, K, 1] row-major is [C, K]
    dtBias: await vec(l.dtBias),
    aLog: await vec(l.aLog),
    gatedNorm: await vec(l.gatedNorm),
    outProj: await lin(l.outProj),
  };
}

export async function loadQwenMtpHead(h: Qwen35MtpHead): Promise<QwenRefMtpHead> {
  return {
    preFcNormEmbedding: await vec(h.preFcNormEmbedding),
    preFcNormHidden: await vec(h.preFcNormHidden),
    fc: await lin(h.fc),
    layer: await attention(h.layer),
    norm: await vec(h.norm),
  };
}

export async function loadQwenWeights(desc: Qwen35Description): Promise<QwenRefWeights> {
  const layers: QwenRefLayer[] = [];
  for (const l of desc.layers) layers.push(l.type === 'linear' ? await linear(l) : await attention(l));
  const embed = await lin(desc.embed);
  return {
    config: desc.config,
    hidden: desc.hidden,
    vocab: desc.vocab,
    eps: desc.eps,
    embed,
    lmHead: desc.lmHead === desc.embed ? embed : await lin(desc.lmHead),
    layers,
    finalNorm: await vec(desc.finalNorm),
    mtp: desc.mtp ? await loadQwenMtpHead(desc.mtp) : null,
  };
}
