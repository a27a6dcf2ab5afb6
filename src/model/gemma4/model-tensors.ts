/**
 * What the Gemma 4 GPU engine uploads of a model (uploadWeights, src/model/gpu-weights.ts), listed once for
 * everything that counts it: the upload's own total, the memory plan (memory-budget.ts), and the extra memory of
 * the k-major rewrite. A tensor added to the upload is added here, and every count follows.
 */
import { linearTensors, type Linear, type ModelDescription, type TensorRef } from '../../format/model-description.ts';
import { routerNormBytes } from './moe/moe-weights.ts';

export interface ModelTensors {
  /**
   * The linears uploadWeights uploads through uploadLinear: in the k-major layout where the device reads it and
   * the linear fits it (a layer's q, k and v among them, though uploaded stacked in MLX's layout where they can be).
   */
  linears: Linear[];
  /** MoE experts' stacked matrices: MLX's layout, codes, scales and biases in one row partition (moe-weights.ts). */
  experts: Linear[];
  /** Every other tensor the engine reads from the checkpoint (norms, router vectors, token orderings). */
  vectors: TensorRef[];
  /** Buffers the upload computes from checkpoint tensors: each MoE router's norm weight (router.scale x root). */
  derived: { name: string; bytes: number }[];
}

/** layer_scalar is not among them: the CPU reads it (it is a uniform of the residual kernel). */
export function modelTensors(desc: ModelDescription): ModelTensors {
  const t: ModelTensors = { linears: [desc.embed], experts: [], vectors: [desc.finalNorm], derived: [] };
  for (const l of desc.layers) {
    for (const x of [l.qProj, l.kProj, l.vProj, l.oProj, l.gate, l.up, l.down]) if (x) t.linears.push(x);
    for (const x of [l.inputNorm, l.qNorm, l.kNorm, l.postAttnNorm, l.preFfNorm, l.postFfNorm])
      if (x) t.vectors.push(x);
    const ple = l.perLayerInput;
    if (ple) {
      t.linears.push(ple.gate, ple.projection);
      t.vectors.push(ple.postNorm);
    }
    const moe = l.moe;
    if (moe) {
      t.linears.push(moe.routerProj);
      t.experts.push(moe.gate.stacked, moe.up.stacked, moe.down.stacked);
      t.vectors.push(moe.routerScale, moe.perExpertScale, moe.preFfNorm2, moe.postFfNorm1, moe.postFfNorm2);
      t.derived.push({ name: `${moe.routerScale.name}*root`, bytes: routerNormBytes(moe) });
    }
  }
  if (desc.role === 'assistant') {
    t.linears.push(desc.preProjection, desc.postProjection);
    if (desc.centroidHead) {
      t.linears.push(desc.centroidHead.centroids);
      t.vectors.push(desc.centroidHead.tokenOrdering);
    }
  }
  if (desc.role === 'target' && desc.perLayer) {
    t.linears.push(desc.perLayer.table, desc.perLayer.modelProjection);
    t.vectors.push(desc.perLayer.projectionNorm);
  }
  return t;
}

/** Every checkpoint tensor the GPU engine reads, each once (the derived buffers are not among them). */
export function gpuTensorsOf(desc: ModelDescription): TensorRef[] {
  const t = modelTensors(desc);
  return [...t.linears.flatMap(linearTensors), ...t.experts.flatMap(linearTensors), ...t.vectors];
}
