/** CPU float64 reference of Gemma 4 target and MTP assistant: the oracle for tests and error reports. */
export {
  loadReferenceWeights,
  type ReferenceWeights,
  type TargetWeights,
  type AssistantWeights,
  type RefLayer,
} from './gemma4/weights.ts';
export { linear, type RefLinear } from './linear.ts';
export {
  referenceForward,
  referenceGreedy,
  targetStep,
  newKvCache,
  sharedKvFromCache,
  type ReferenceKvCache,
  type ReferenceOptions,
  type StepResult,
  type ForwardResult,
  type GreedyResult,
  type SharedKv,
  type SharedKvByType,
} from './gemma4/target.ts';
export { referenceDraft, type DraftInput, type DraftResult } from './gemma4/draft.ts';
export { Rope, type RopePrecision } from './rope.ts';
export { rmsNorm, rmsNormF32, makeNorm, geluTanh, softcap, argmax, matvec, type Numerics, type NormFn } from './ops.ts';
export { affineMatrix, affineMatvec, affineMatmul, type AffineMatrix, type AffineProduct } from './quantized-matmul.ts';
