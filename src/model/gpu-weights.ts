import { FormatError } from '../format/errors.ts';
import {
  familyFeatures,
  type AffineLinear,
  type DecoderLayer,
  type Linear,
  type ModelDescription,
  type TensorRef,
} from '../format/model-description.ts';
import { readTensorBytes } from '../format/safetensors.ts';
import { toFloat64 } from '../format/dtype.ts';
import { TensorUploader } from '../gpu/upload.ts';
import type { CancelToken, ProgressFn } from '../util/cancel.ts';
import { GpuError } from '../gpu/errors.ts';
import { withErrorScopes } from '../gpu/device.ts';
import { gpuTensorsOf } from './gemma4/model-tensors.ts';
import { WeightTransposer, kMajorCols, kMajorFits, type AffineLayout } from '../gpu/weight-layout.ts';
import { detectKernelClass } from '../gpu/kernel-class.ts';
import type { GpuLinear, GpuStackedQkv } from './gpu-linear.ts';
import { checkTokenOrdering, type GpuCentroidHead } from './gemma4/e-series/centroid-head-op.ts';
import { uploadMoeBlock, type GpuMoeBlock } from './gemma4/moe/moe-weights.ts';

export interface GpuLayer {
  desc: DecoderLayer;
  inputNorm: GPUBuffer;
  /** Present where q, k and v could share one buffer (uploadWeights' `stackQkv`, on by default). */
  qkv?: GpuStackedQkv;
  qProj: GpuLinear;
  kProj: GpuLinear | null;
  vProj: GpuLinear | null;
  oProj: GpuLinear;
  qNorm: GPUBuffer;
  kNorm: GPUBuffer | null;
  postAttnNorm: GPUBuffer;
  preFfNorm: GPUBuffer;
  gate: GpuLinear;
  up: GpuLinear;
  down: GpuLinear;
  postFfNorm: GPUBuffer;
  /** layer_scalar as a number (it is a uniform of the residual kernel). */
  layerScalar: number;
  /** E-series targets: the layer's gate of its per-layer input into the residual (DecoderLayer.perLayerInput). */
  perLayerInput?: GpuLayerPerLayerInput;
  /** 26B-A4B: the router and experts beside the dense MLP (src/model/gemma4/moe/moe-target.ts runs them). */
  moe?: GpuMoeBlock;
}

/** One layer's per-layer-input weights on the GPU (src/model/gemma4/e-series/e-target.ts runs them). */
export interface GpuLayerPerLayerInput {
  gate: GpuLinear;
  projection: GpuLinear;
  postNorm: GPUBuffer;
}

/**
 * The model-level per-layer embedding weights of an E-series target. The table is an embedding of
 * [vocab_ple, L * P]; like every large tensor it is split by row ranges into buffers a binding can hold.
 */
export interface GpuPerLayerEmbedding {
  width: number;
  table: GpuLinear;
  modelProjection: GpuLinear;
  projectionNorm: GPUBuffer;
}

export interface GpuWeights<D extends ModelDescription = ModelDescription> {
  desc: D;
  embed: GpuLinear;
  layers: GpuLayer[];
  finalNorm: GPUBuffer;
  preProjection?: GpuLinear;
  postProjection?: GpuLinear;
  /** E-series targets: the per-layer embedding table, its projection and norm. */
  perLayer?: GpuPerLayerEmbedding;
  /** E-series assistants: the centroid LM head (src/model/gemma4/e-series/centroid-head-op.ts). */
  centroidHead?: GpuCentroidHead;
  bytes: number;
  destroy(): void;
}

export const SUPPORTED_BITS: ReadonlySet<number> = new Set([2, 4, 8]);

/**
 * The Gemma 4 family features of `desc` that no GPU engine runs yet: none. E-series targets (per-layer embeddings,
 * KV sharing, double-wide MLPs) run in src/model/gemma4/e-series/e-target.ts and MoE targets in moe-target.ts, not in the
 * dense TargetModel, which refuses them; E-series assistants (centroid head, reading the donors' K/V) in
 * AssistantModel with src/model/gemma4/e-series/centroid-head-op.ts. (MoE assistants do not exist: the config refuses them.)
 */
export function unsupportedFamilyFeatures(desc: ModelDescription): string[] {
  return desc.role === 'assistant' && desc.config.moe ? familyFeatures(desc) : [];
}

export interface UploadOptions {
  /**
   * Upload each target layer's q, k and v projections stacked in one buffer where they allow it (GpuStackedQkv);
   * default true. Off: three buffers, as the checkpoint stores them (tests compare the two).
   */
  stackQkv?: boolean;
  /**
   * The layout of the affine linears (src/gpu/weight-layout.ts); default: 'k-major' where the device runs the
   * GPU kernel class, 'mlx' on software adapters (test/gpu/weight-layout.test.ts holds the kernels to the same
   * bytes on both).
   */
  layout?: AffineLayout;
}

/**
 * Uploads a checkpoint's weights. A memory budget, where a caller has one (load-bench's --memory-budget), is
 * checkMemory's to test before anything loads (memory-budget.ts: the weights, the k-major rewrite's extra part,
 * caches and workspace); WebGPU tells no one how much memory is free, so without one an out-of-memory error during
 * the upload becomes a GpuError naming the model, and frees what was uploaded. A weight row too large for one
 * binding is refused by TensorUploader.
 */
export async function uploadWeights<D extends ModelDescription>(
  device: GPUDevice,
  desc: D,
  onProgress?: ProgressFn,
  cancel?: CancelToken,
  opts: UploadOptions = {},
): Promise<GpuWeights<D>> {
  // The format layer reads every family member for the CPU reference; a variant no GPU engine runs is refused here
  // (running it as a dense model would be silently wrong).
  const family = unsupportedFamilyFeatures(desc);
  if (family.length > 0)
    throw new FormatError(
      `${desc.modelType} ${desc.role} uses ${family.join(', ')}: the GPU engine does not run these Gemma 4 variants yet (the CPU reference does)`,
    );
  const total = gpuTensorsOf(desc).reduce((a, t) => a + t.byteLength, 0);
  const layout = opts.layout ?? defaultLayout(device);
  const up = new TensorUploader(device, total, onProgress, cancel);
  try {
    return await withErrorScopes(
      device,
      `uploading the ${desc.modelType} weights (${(total / 1e9).toFixed(2)} GB)`,
      () => uploadAll(up, desc, total, device, opts.stackQkv ?? true, layout),
    );
  } catch (e) {
    up.buffers.forEach((b) => b.destroy());
    throw e;
  }
}

/**
 * One linear's tensors uploaded (affine: codes, scales and biases, split into the same parts of rows, as many as
 * fit a binding unless `rowsPerPart` says) in `layout` where it fits the linear (src/gpu/weight-layout.ts), else in
 * MLX's.
 */
export async function uploadLinear(
  up: TensorUploader,
  l: Linear,
  layout: AffineLayout,
  transposer: WeightTransposer,
  rowsPerPart?: number,
): Promise<GpuLinear> {
  if (l.kind !== 'affine') return { desc: l, weight: await up.upload(l.weight) };
  if (!SUPPORTED_BITS.has(l.bits)) {
    throw new GpuError(
      'unsupported',
      `${l.name}: ${l.bits}-bit affine weights are not supported by the GPU kernels yet (2, 4 and 8 are).`,
    );
  }
  const rows = rowsPerPart ?? up.rowsPerPart([l.weight, l.scales, l.biases]);
  // The k-major layout moves whole 16-byte words of codes and bf16 scales and biases (what the kernels read).
  const cols = kMajorCols(l);
  const kMajor =
    layout === 'k-major' &&
    kMajorFits(l) &&
    [l.scales, l.biases].every((t) => t.byteLength === l.outFeatures * cols.groups * 2);
  const codes = kMajor ? { kind: 'codes' as const, cols: cols.codes, transposer } : undefined;
  const sb = kMajor ? { kind: 'groups' as const, cols: cols.groups, transposer } : undefined;
  return {
    desc: l,
    weight: await up.upload(l.weight, rows, codes),
    scales: await up.upload(l.scales, rows, sb),
    biases: await up.upload(l.biases, rows, sb),
    layout: kMajor ? 'k-major' : 'mlx',
  };
}

/** The layout the device's kernel class reads best (src/gpu/weight-layout.ts). */
export function defaultLayout(device: GPUDevice): AffineLayout {
  const info = (device as GPUDevice & { adapterInfo?: GPUAdapterInfo }).adapterInfo;
  return detectKernelClass(info, device.limits) === 'gpu' ? 'k-major' : 'mlx';
}

async function uploadAll<D extends ModelDescription>(
  up: TensorUploader,
  desc: D,
  total: number,
  device: GPUDevice,
  stackQkv: boolean,
  layout: AffineLayout,
): Promise<GpuWeights<D>> {
  const transposer = new WeightTransposer(device);
  const linear = (l: Linear) => uploadLinear(up, l, layout, transposer);
  const vector = async (t: TensorRef) => (await up.upload(t)).parts[0].buffer;
  const layers: GpuLayer[] = [];
  for (const l of desc.layers) {
    const scalar = toFloat64(await readTensorBytes(l.layerScalar), l.layerScalar.dtype)[0];
    const inputNorm = await vector(l.inputNorm);
    const qkv = stackQkv ? await uploadStackedQkv(up, l) : undefined;
    layers.push({
      desc: l,
      inputNorm,
      ...(qkv ?? {
        qProj: await linear(l.qProj),
        kProj: l.kProj ? await linear(l.kProj) : null,
        vProj: l.vProj ? await linear(l.vProj) : null,
      }),
      oProj: await linear(l.oProj),
      qNorm: await vector(l.qNorm),
      kNorm: l.kNorm ? await vector(l.kNorm) : null,
      postAttnNorm: await vector(l.postAttnNorm),
      preFfNorm: await vector(l.preFfNorm),
      gate: await linear(l.gate),
      up: await linear(l.up),
      down: await linear(l.down),
      postFfNorm: await vector(l.postFfNorm),
      layerScalar: scalar,
    });
    if (l.moe) layers[layers.length - 1].moe = await uploadMoeBlock(up, device, l.moe, desc.hidden, linear, vector);
    const ple = l.perLayerInput;
    if (ple)
      layers[layers.length - 1].perLayerInput = {
        gate: await linear(ple.gate),
        projection: await linear(ple.projection),
        postNorm: await vector(ple.postNorm),
      };
  }
  const w: GpuWeights<D> = {
    desc,
    embed: await linear(desc.embed),
    layers,
    finalNorm: await vector(desc.finalNorm),
    bytes: total,
    destroy: () => up.buffers.forEach((b) => b.destroy()),
  };
  if (desc.role === 'assistant') {
    w.preProjection = await linear(desc.preProjection);
    w.postProjection = await linear(desc.postProjection);
    const ch = desc.centroidHead;
    if (ch) {
      await checkTokenOrdering(ch, desc.vocab);
      const t = ch.tokenOrdering;
      w.centroidHead = {
        numCentroids: ch.numCentroids,
        topK: ch.topK,
        centroids: await linear(ch.centroids),
        tokenOrdering: await up.upload(t, t.shape[0]),
        orderingStride: t.dtype === 'I64' ? 2 : 1,
      };
    }
  }
  if (desc.role === 'target' && desc.perLayer) {
    const p = desc.perLayer;
    w.perLayer = {
      width: p.width,
      table: await linear(p.table),
      modelProjection: await linear(p.modelProjection),
      projectionNorm: await vector(p.projectionNorm),
    };
  }
  return w;
}

/**
 * A layer's q, k and v (k_eq_v: q and k) uploaded stacked in one set of buffers, with the three as views of
 * it; undefined where they cannot be stacked (no k_proj, other kinds, bits, group sizes or inputs, sizes
 * a binding offset cannot split, or a stack larger than one binding), and the caller uploads them apart.
 */
async function uploadStackedQkv(
  up: TensorUploader,
  l: DecoderLayer,
): Promise<Pick<GpuLayer, 'qkv' | 'qProj' | 'kProj' | 'vProj'> | undefined> {
  const lins = [l.qProj, l.kProj, l.vProj].filter((x): x is Linear => x !== null);
  if (!l.kProj || !lins.every((x) => x.kind === 'affine')) return undefined;
  const aff = lins as AffineLinear[];
  const q = aff[0];
  const same = aff.every((x) => x.bits === q.bits && x.groupSize === q.groupSize && x.inFeatures === q.inFeatures);
  const tensors = (k: 'weight' | 'scales' | 'biases') => aff.map((x) => x[k]);
  if (
    !same ||
    !SUPPORTED_BITS.has(q.bits) ||
    !(['weight', 'scales', 'biases'] as const).every((k) => up.canStack(tensors(k)))
  )
    return undefined;
  const name = `${q.name.replace(/q_proj$/, '')}${aff.length === 3 ? 'q|k|v' : 'q|k'}_proj (stacked)`;
  const [w, sc, b] = [
    await up.uploadStacked(tensors('weight'), `${name}.weight`),
    await up.uploadStacked(tensors('scales'), `${name}.scales`),
    await up.uploadStacked(tensors('biases'), `${name}.biases`),
  ];
  const view = (i: number): GpuLinear => ({ desc: aff[i], weight: w.each[i], scales: sc.each[i], biases: b.each[i] });
  const rows = aff.map((x) => x.outFeatures);
  return {
    qkv: {
      lin: {
        desc: { ...q, name, outFeatures: rows.reduce((a, n) => a + n, 0) },
        weight: w.whole,
        scales: sc.whole,
        biases: b.whole,
      },
      rows,
    },
    qProj: view(0),
    kProj: view(1),
    vProj: aff.length === 3 ? view(2) : null,
  };
}
