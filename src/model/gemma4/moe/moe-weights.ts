/**
 * One MoE layer's weights on the GPU (Gemma 4 26B-A4B; docs/GEMMA4-FAMILY.md section 6), uploaded by
 * src/model/gpu-weights.ts and run by moe-ops.ts. The expert tensors stay stacked as stored ([E, out, in]
 * packed, split by expert ranges only when one binding cannot hold them): the expert kernel finds expert e's
 * rows by its id on the GPU.
 */
import type { ExpertsLinear, MoeBlock, TensorRef } from '../../../format/model-description.ts';
import { readTensorBytes } from '../../../format/safetensors.ts';
import { toFloat64 } from '../../../format/dtype.ts';
import { uploadBuffer } from '../../../gpu/buffers.ts';
import { GpuError } from '../../../gpu/errors.ts';
import type { GpuTensor, TensorUploader } from '../../../gpu/upload.ts';
import { familyConstants } from '../../../numerics/family-constants.ts';
import { roundBf16 } from '../../../numerics/bf16.ts';
import type { GpuLinear } from '../../gpu-linear.ts';

/** A stacked expert linear: the [E, out, in] tensors, split into expert ranges (parts) alike. */
export interface GpuExperts {
  /** One expert's shape (stacked.desc.outFeatures x inFeatures) with the whole stacked tensors. */
  desc: ExpertsLinear['stacked'] & { kind: 'affine' };
  numExperts: number;
  weight: GpuTensor;
  scales: GpuTensor;
  biases: GpuTensor;
}

export interface GpuMoeBlock {
  desc: MoeBlock;
  numExperts: number;
  topK: number;
  /** router.proj [E, H] (8-bit in MLX conversions). */
  routerProj: GpuLinear;
  /**
   * The router's RMSNorm weight: router.scale x H^-0.5 formed first and rounded to bf16 per element, as MLX's
   * `mx.fast.rms_norm(x, self.scale * self._root_size, eps)` does on bf16 arrays (reference scaleProduct 'mlx-bf16').
   */
  routerNorm: GPUBuffer;
  /** router.scale [H] as stored (bf16; the transformers convention multiplies it in) and H^-0.5 as MLX rounds it. */
  routerScale: GPUBuffer;
  rootSize: number;
  /** router.per_expert_scale [E] as stored (bf16). */
  perExpertScale: GPUBuffer;
  gate: GpuExperts;
  up: GpuExperts;
  down: GpuExperts;
  preFfNorm2: GPUBuffer;
  postFfNorm1: GPUBuffer;
  postFfNorm2: GPUBuffer;
}

/** Values a bf16-pair binding holds for n values: whole 32-bit words (an odd count takes one more). */
function bf16PairCount(n: number): number {
  return n + (n % 2);
}

/** The bf16 bit patterns of values that are bf16 numbers (each already rounded), packed for a bf16-pair binding. */
export function bf16Bits(values: ArrayLike<number>): Uint16Array {
  const out = new Uint16Array(bf16PairCount(values.length));
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  for (let i = 0; i < values.length; i++) {
    f[0] = values[i];
    if ((u[0] & 0xffff) !== 0) throw new Error(`value ${values[i]} at ${i} is not a bf16 number`);
    out[i] = u[0] >>> 16;
  }
  return out;
}

/** The bytes of the router norm's weight that uploadMoeBlock computes and uploads (bf16Bits of routerNormWeight). */
export function routerNormBytes(m: MoeBlock): number {
  return 2 * bf16PairCount(m.routerScale.shape.reduce((a, b) => a * b, 1));
}

/** router.scale x root size, each product rounded to bf16 (MLX's weight vector of the router's norm). */
export function routerNormWeight(scale: Float64Array, rootSize: number): Float64Array {
  return scale.map((s) => roundBf16(s * rootSize));
}

/**
 * Uploads a layer's MoE block. `linear` / `vector` are gpu-weights.ts's uploaders (they share its accounting);
 * the router's norm weight is computed here (a buffer of the uploader's, freed with the weights).
 */
export async function uploadMoeBlock(
  up: TensorUploader,
  device: GPUDevice,
  m: MoeBlock,
  hidden: number,
  linear: (l: MoeBlock['routerProj']) => Promise<GpuLinear>,
  vector: (t: TensorRef) => Promise<GPUBuffer>,
): Promise<GpuMoeBlock> {
  const experts = async (x: ExpertsLinear): Promise<GpuExperts> => {
    const s = x.stacked;
    if (s.kind !== 'affine' || (s.bits !== 4 && s.bits !== 8) || s.groupSize % 32 !== 0 || s.inFeatures % 32 !== 0)
      throw new GpuError(
        'unsupported',
        `${s.name}: the GPU expert kernel (shaders/moe_experts.wgsl) runs 4- or 8-bit affine experts with groups and inputs a multiple of 32; this one is ${s.kind === 'affine' ? `${s.bits}-bit, group ${s.groupSize}, ${s.inFeatures} inputs` : `dense ${s.weight.dtype}`}`,
      );
    const rows = up.rowsPerPart([s.weight, s.scales, s.biases]); // experts per part
    return {
      desc: s,
      numExperts: x.numExperts,
      weight: await up.upload(s.weight, rows),
      scales: await up.upload(s.scales, rows),
      biases: await up.upload(s.biases, rows),
    };
  };
  const scale = toFloat64(await readTensorBytes(m.routerScale), m.routerScale.dtype);
  const root = familyConstants(hidden, 0).routerRootSize;
  const routerNorm = uploadBuffer(device, bf16Bits(routerNormWeight(scale, root)), `${m.routerScale.name}*root`);
  up.buffers.push(routerNorm);
  for (const t of [m.routerScale, m.perExpertScale])
    if (t.dtype !== 'BF16')
      throw new GpuError(
        'unsupported',
        `${t.name}: ${t.dtype}; the router kernels read bf16 vectors (as MLX stores router.scale and per_expert_scale)`,
      );
  return {
    desc: m,
    numExperts: m.numExperts,
    topK: m.topK,
    routerProj: await linear(m.routerProj),
    routerNorm,
    routerScale: await vector(m.routerScale),
    rootSize: root,
    perExpertScale: await vector(m.perExpertScale),
    gate: await experts(m.gate),
    up: await experts(m.up),
    down: await experts(m.down),
    preFfNorm2: await vector(m.preFfNorm2),
    postFfNorm1: await vector(m.postFfNorm1),
    postFfNorm2: await vector(m.postFfNorm2),
  };
}
