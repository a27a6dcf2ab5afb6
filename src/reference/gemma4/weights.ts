import { dequantizeLinear } from '../../format/dequant.ts';
import type {
  AssistantDescription,
  DecoderLayer,
  ExpertsLinear,
  Linear,
  MoeBlock,
  ModelDescription,
  TargetDescription,
} from '../../format/model-description.ts';
import { readTensorBytes, toFloat64, type TensorRef } from '../../format/safetensors.ts';
import type { LayerGeometry } from '../../format/config.ts';
import type { CentroidHeadWeights } from './e-series/centroid-head.ts';
import type { MoeWeights } from './moe/moe.ts';
import type { PleLayerWeights, PleModelWeights } from './e-series/ple.ts';
import { expertLinear } from '../../format/experts.ts';
import type { RefLinear } from '../linear.ts';

/** One decoder layer's weights in float64 (null where the description has no tensor). */
export interface RefLayer extends LayerGeometry {
  index: number;
  inputNorm: Float64Array;
  q: RefLinear;
  k: RefLinear | null;
  v: RefLinear | null;
  o: RefLinear;
  qNorm: Float64Array;
  kNorm: Float64Array | null;
  postAttnNorm: Float64Array;
  preFfNorm: Float64Array;
  gate: RefLinear;
  up: RefLinear;
  down: RefLinear;
  postFfNorm: Float64Array;
  layerScalar: number;
  /** E-series targets: the layer's per-layer input gate, projection and norm. */
  ple?: PleLayerWeights;
  /** 26B-A4B: the router and experts beside the dense MLP. */
  moe?: MoeWeights;
}

interface RefModelBase {
  hidden: number;
  vocab: number;
  window: number;
  eps: number;
  finalSoftcap: number | null;
  /** Tied embedding / LM head [vocab, hidden]. */
  embed: RefLinear;
  layers: RefLayer[];
  finalNorm: Float64Array;
}

export interface TargetWeights extends RefModelBase {
  role: 'target';
  desc: TargetDescription;
  embedScale: number;
  /** E-series: per-layer embedding table, model projection and its norm. */
  ple?: PleModelWeights;
}

export interface AssistantWeights extends RefModelBase {
  role: 'assistant';
  desc: AssistantDescription;
  backboneHidden: number;
  preProjection: RefLinear;
  postProjection: RefLinear;
  /** E-series assistants: the centroid LM head (its `embed` is the assistant's tied embedding). */
  centroidHead?: CentroidHeadWeights;
}

export type ReferenceWeights = TargetWeights | AssistantWeights;

async function vec(t: TensorRef): Promise<Float64Array> {
  return toFloat64(await readTensorBytes(t), t.dtype);
}

async function lin(l: Linear): Promise<RefLinear> {
  return { out: l.outFeatures, in: l.inFeatures, w: await dequantizeLinear(l) };
}

async function moe(m: MoeBlock): Promise<MoeWeights> {
  const each = async (x: ExpertsLinear) => {
    const out: RefLinear[] = [];
    for (let e = 0; e < x.numExperts; e++) out.push(await lin(expertLinear(x, e)));
    return out;
  };
  return {
    numExperts: m.numExperts,
    topK: m.topK,
    routerProj: await lin(m.routerProj),
    routerScale: await vec(m.routerScale),
    perExpertScale: await vec(m.perExpertScale),
    gate: await each(m.gate),
    up: await each(m.up),
    down: await each(m.down),
    preFfNorm2: await vec(m.preFfNorm2),
    postFfNorm1: await vec(m.postFfNorm1),
    postFfNorm2: await vec(m.postFfNorm2),
  };
}

async function layer(l: DecoderLayer): Promise<RefLayer> {
  const p = l.perLayerInput;
  return {
    index: l.index,
    type: l.type,
    headDim: l.headDim,
    numHeads: l.numHeads,
    numKvHeads: l.numKvHeads,
    kEqV: l.kEqV,
    rope: l.rope,
    ...(l.kvDonor !== undefined ? { kvDonor: l.kvDonor } : {}),
    ...(p
      ? { ple: { gate: await lin(p.gate), projection: await lin(p.projection), postNorm: await vec(p.postNorm) } }
      : {}),
    ...(l.moe ? { moe: await moe(l.moe) } : {}),
    inputNorm: await vec(l.inputNorm),
    q: await lin(l.qProj),
    k: l.kProj ? await lin(l.kProj) : null,
    v: l.vProj ? await lin(l.vProj) : null,
    o: await lin(l.oProj),
    qNorm: await vec(l.qNorm),
    kNorm: l.kNorm ? await vec(l.kNorm) : null,
    postAttnNorm: await vec(l.postAttnNorm),
    preFfNorm: await vec(l.preFfNorm),
    gate: await lin(l.gate),
    up: await lin(l.up),
    down: await lin(l.down),
    postFfNorm: await vec(l.postFfNorm),
    layerScalar: (await vec(l.layerScalar))[0],
  };
}

/**
 * Loads every weight of a description into float64 (dequantized exactly: scale * q + bias in f64, which is
 * exact for bf16 scales/biases and small integer codes). Meant for small models (fixtures, synthetic ones):
 * a 12B would need ~100 GB this way.
 */
export async function loadReferenceWeights(desc: TargetDescription): Promise<TargetWeights>;
export async function loadReferenceWeights(desc: AssistantDescription): Promise<AssistantWeights>;
export async function loadReferenceWeights(desc: ModelDescription): Promise<ReferenceWeights>;
export async function loadReferenceWeights(desc: ModelDescription): Promise<ReferenceWeights> {
  const layers: RefLayer[] = [];
  for (const l of desc.layers) layers.push(await layer(l));
  const base: RefModelBase = {
    hidden: desc.hidden,
    vocab: desc.vocab,
    window: desc.window,
    eps: desc.eps,
    finalSoftcap: desc.finalSoftcap,
    embed: await lin(desc.embed),
    layers,
    finalNorm: await vec(desc.finalNorm),
  };
  if (desc.role === 'target') {
    const p = desc.perLayer;
    const ple: PleModelWeights | undefined = p && {
      numLayers: desc.layers.length,
      ple: p.width,
      hidden: desc.hidden,
      table: await lin(p.table),
      modelProjection: await lin(p.modelProjection),
      projectionNorm: await vec(p.projectionNorm),
    };
    return { ...base, role: 'target', desc, embedScale: desc.embedScale, ...(ple ? { ple } : {}) };
  }
  const ch = desc.centroidHead;
  const centroidHead: CentroidHeadWeights | undefined = ch && {
    centroids: await lin(ch.centroids),
    tokenOrdering: Int32Array.from(await vec(ch.tokenOrdering)),
    embed: base.embed,
    topK: ch.topK,
  };
  return {
    ...base,
    role: 'assistant',
    desc,
    backboneHidden: desc.backboneHidden,
    preProjection: await lin(desc.preProjection),
    postProjection: await lin(desc.postProjection),
    ...(centroidHead ? { centroidHead } : {}),
  };
}
