import { linearTensors, type Linear } from '../../format/model-description.ts';
import type { Qwen35Description, Qwen35Layer, Qwen35MtpHead } from '../../format/qwen3_5/description.ts';
import { readTensorBytes, toFloat64, type TensorRef } from '../../format/safetensors.ts';
import { uploadBuffer } from '../../gpu/buffers.ts';
import { withErrorScopes } from '../../gpu/device.ts';
import { TensorUploader } from '../../gpu/upload.ts';
import type { CancelToken, ProgressFn } from '../../util/cancel.ts';
import { defaultLayout, uploadLinear } from '../gpu-weights.ts';
import type { GpuLinear } from '../gpu-linear.ts';
import { WeightTransposer } from '../../gpu/weight-layout.ts';

/**
 * A Qwen3.5 checkpoint's weights on the GPU (docs/QWEN35.md section 2), as src/model/gpu-weights.ts uploads
 * Gemma's: linears as stored (packed codes, bf16 scales and biases), RMSNorm weights as stored bf16 (what
 * rmsnorm.wgsl reads). The Gated DeltaNet's small float vectors (conv taps, dt_bias, A_log, the gated norm's
 * weight) are widened to f32 on the CPU, which is exact from bf16, f16 or f32, so gated_delta.wgsl reads one
 * dtype whatever the conversion kept (MLX keeps A_log in f32, the rest in bf16).
 */
interface QwenGpuLayerBase {
  inputNorm: GPUBuffer;
  postAttnNorm: GPUBuffer;
  gate: GpuLinear;
  up: GpuLinear;
  down: GpuLinear;
}

export interface QwenGpuLinearLayer extends QwenGpuLayerBase {
  type: 'linear';
  inProjQkv: GpuLinear;
  inProjZ: GpuLinear;
  inProjB: GpuLinear;
  inProjA: GpuLinear;
  /** f32 [convDim, K] */
  conv: GPUBuffer;
  /** f32 [Hv] */
  dtBias: GPUBuffer;
  /** f32 [Hv] */
  aLog: GPUBuffer;
  /** f32 [Dv] */
  gatedNorm: GPUBuffer;
  outProj: GpuLinear;
}

export interface QwenGpuAttentionLayer extends QwenGpuLayerBase {
  type: 'full';
  qProj: GpuLinear;
  kProj: GpuLinear;
  vProj: GpuLinear;
  oProj: GpuLinear;
  qNorm: GPUBuffer;
  kNorm: GPUBuffer;
}

export type QwenGpuLayer = QwenGpuLinearLayer | QwenGpuAttentionLayer;

/** The MTP head (docs/QWEN35.md section 4); embedding and LM head are the target's. */
export interface QwenGpuMtpHead {
  preFcNormEmbedding: GPUBuffer;
  preFcNormHidden: GPUBuffer;
  /** [hidden, 2 hidden]: input [normed embedding, normed hidden]. */
  fc: GpuLinear;
  layer: QwenGpuAttentionLayer;
  norm: GPUBuffer;
}

export interface QwenGpuWeights {
  desc: Qwen35Description;
  /** Present when the description has an MTP head (else desc.mtpUnavailable says why). */
  mtp: QwenGpuMtpHead | null;
  embed: GpuLinear;
  lmHead: GpuLinear;
  layers: QwenGpuLayer[];
  finalNorm: GPUBuffer;
  bytes: number;
  destroy(): void;
}

function layerLinears(l: Qwen35Layer): Linear[] {
  const mixer =
    l.type === 'linear'
      ? [l.inProjQkv, l.inProjZ, l.inProjB, l.inProjA, l.outProj]
      : [l.qProj, l.kProj, l.vProj, l.oProj];
  return [...mixer, l.gate, l.up, l.down];
}

function layerVectors(l: Qwen35Layer): TensorRef[] {
  const mixer = l.type === 'linear' ? [l.conv, l.dtBias, l.aLog, l.gatedNorm] : [l.qNorm, l.kNorm];
  return [l.inputNorm, l.postAttnNorm, ...mixer];
}

const layerTensors = (l: Qwen35Layer) => [...layerLinears(l).flatMap(linearTensors), ...layerVectors(l)];

/** Every tensor the Qwen GPU target and its MTP head read. */
export function qwenGpuTensors(d: Qwen35Description): TensorRef[] {
  const heads = d.tieWordEmbeddings ? [d.embed] : [d.embed, d.lmHead];
  const mtp = d.mtp ? qwenMtpHeadTensors(d.mtp) : [];
  return [...heads.flatMap(linearTensors), d.finalNorm, ...d.layers.flatMap(layerTensors), ...mtp];
}

export async function uploadQwenWeights(
  device: GPUDevice,
  desc: Qwen35Description,
  onProgress?: ProgressFn,
  cancel?: CancelToken,
): Promise<QwenGpuWeights> {
  const total = qwenGpuTensors(desc).reduce((a, t) => a + t.byteLength, 0);
  // Progress and cancellation as Gemma's uploadWeights (per chunk streamed; the small vectors widened to f32 on
  // the CPU count as they are uploaded); a cancel frees what was uploaded.
  const up = new TensorUploader(device, total, onProgress, cancel);
  const own: GPUBuffer[] = [];
  try {
    return await withErrorScopes(device, `uploading the ${desc.modelType} weights`, () =>
      uploadAll(device, up, own, desc, total),
    );
  } catch (e) {
    [...up.buffers, ...own].forEach((b) => b.destroy());
    throw e;
  }
}

/** The per-tensor uploaders both uploads use: linears as stored, bf16 RMSNorm weights, small vectors widened to f32. */
function uploaders(device: GPUDevice, up: TensorUploader, own: GPUBuffer[]) {
  // Gemma's linear upload: the device's layout (src/gpu/weight-layout.ts)
  const transposer = new WeightTransposer(device);
  const layout = defaultLayout(device);
  const linear = (l: Linear) => uploadLinear(up, l, layout, transposer);
  // rmsnorm.wgsl reads its weight as bf16 pairs
  const norm = async (t: TensorRef) => {
    if (t.dtype !== 'BF16')
      throw new Error(`${t.name}: RMSNorm weights must be BF16 for the GPU kernels, not ${t.dtype}`);
    return (await up.upload(t)).parts[0].buffer;
  };
  const f32 = async (t: TensorRef) => {
    const b = uploadBuffer(device, Float32Array.from(toFloat64(await readTensorBytes(t), t.dtype)), t.name);
    own.push(b);
    up.countUploaded(t.byteLength, t.name);
    return b;
  };
  const layer = async (l: Qwen35Layer): Promise<QwenGpuLayer> => {
    const base = {
      inputNorm: await norm(l.inputNorm),
      postAttnNorm: await norm(l.postAttnNorm),
      gate: await linear(l.gate),
      up: await linear(l.up),
      down: await linear(l.down),
    };
    if (l.type === 'linear')
      return {
        ...base,
        type: 'linear',
        inProjQkv: await linear(l.inProjQkv),
        inProjZ: await linear(l.inProjZ),
        inProjB: await linear(l.inProjB),
        inProjA: await linear(l.inProjA),
        conv: await f32(l.conv),
        dtBias: await f32(l.dtBias),
        aLog: await f32(l.aLog),
        gatedNorm: await f32(l.gatedNorm),
        outProj: await linear(l.outProj),
      };
    return {
      ...base,
      type: 'full',
      qProj: await linear(l.qProj),
      kProj: await linear(l.kProj),
      vProj: await linear(l.vProj),
      oProj: await linear(l.oProj),
      qNorm: await norm(l.qNorm),
      kNorm: await norm(l.kNorm),
    };
  };
  const head = async (m: Qwen35MtpHead): Promise<QwenGpuMtpHead> => ({
    preFcNormEmbedding: await norm(m.preFcNormEmbedding),
    preFcNormHidden: await norm(m.preFcNormHidden),
    fc: await linear(m.fc),
    layer: (await layer(m.layer)) as QwenGpuAttentionLayer,
    norm: await norm(m.norm),
  });
  return { linear, norm, layer, head };
}

async function uploadAll(
  device: GPUDevice,
  up: TensorUploader,
  own: GPUBuffer[],
  desc: Qwen35Description,
  total: number,
): Promise<QwenGpuWeights> {
  const u = uploaders(device, up, own);
  const layers: QwenGpuLayer[] = [];
  for (const l of desc.layers) layers.push(await u.layer(l));
  const mtp = desc.mtp ? await u.head(desc.mtp) : null;
  const embed = await u.linear(desc.embed);
  return {
    desc,
    embed,
    lmHead: desc.tieWordEmbeddings ? embed : await u.linear(desc.lmHead),
    layers,
    mtp,
    finalNorm: await u.norm(desc.finalNorm),
    bytes: total,
    destroy: () => [...up.buffers, ...own].forEach((b) => b.destroy()),
  };
}

/** The tensors of an MTP head (its own; it shares the target's embedding and LM head). */
export function qwenMtpHeadTensors(m: Qwen35MtpHead): TensorRef[] {
  return [m.preFcNormEmbedding, m.preFcNormHidden, m.norm, ...linearTensors(m.fc), ...layerTensors(m.layer)];
}

/** An MTP head uploaded on its own (a split drafter folder's, src/format/qwen3_5/drafter.ts), beside a loaded target. */
export interface QwenGpuMtpHeadUpload {
  head: QwenGpuMtpHead;
  bytes: number;
  destroy(): void;
}

/**
 * Uploads only an MTP head: the page attaches a split drafter folder to a Qwen3.5 target already on the GPU, so
 * the target (27B: 15 GB) is not uploaded again. `m` is the head as attachQwen35Drafter described it (checked
 * against the target's geometry); the result goes in place of the target weights' `mtp` (withQwenMtpHead).
 */
export async function uploadQwenMtpHead(
  device: GPUDevice,
  m: Qwen35MtpHead,
  onProgress?: ProgressFn,
  cancel?: CancelToken,
): Promise<QwenGpuMtpHeadUpload> {
  const total = qwenMtpHeadTensors(m).reduce((a, t) => a + t.byteLength, 0);
  const up = new TensorUploader(device, total, onProgress, cancel);
  const own: GPUBuffer[] = [];
  try {
    const head = await withErrorScopes(device, `uploading the MTP head of ${m.label}`, () =>
      uploaders(device, up, own).head(m),
    );
    return { head, bytes: total, destroy: () => [...up.buffers, ...own].forEach((b) => b.destroy()) };
  } catch (e) {
    [...up.buffers, ...own].forEach((b) => b.destroy());
    throw e;
  }
}

/**
 * The target's weights with another MTP head drafting (`desc` is the target's description with that head attached):
 * the same buffers, not a copy, so destroying the result's target buffers is the target's business (its own
 * destroy); the head's buffers belong to its QwenGpuMtpHeadUpload.
 */
export function withQwenMtpHead(target: QwenGpuWeights, desc: Qwen35Description, head: QwenGpuMtpHead): QwenGpuWeights {
  if (desc.mtp === null) throw new Error(`${desc.modelType}: withQwenMtpHead needs a description with an MTP head`);
  return { ...target, desc, mtp: head, destroy: target.destroy };
}
