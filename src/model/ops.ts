/**
 * Typed wrappers around the WGSL kernels: one function per op, taking buffers and sizes. The same
 * function (hence the same compiled pipeline) serves every M, which is what makes rows exact.
 * This module gathers them under one name (`import * as op`); each op family lives in its own module.
 */
export type { Rows } from './op-rows.ts';
export {
  affineKernel,
  engineKernels,
  readsGroupSums,
  stepKernel,
  type AffineKernel,
  type LinearShape,
} from './affine-kernel.ts';
export {
  coopFeatures,
  coopShape,
  coopThreads,
  coopWorkgroup,
  type CoopLinear,
} from './coop-shape.ts';
export { groupSums, matmul, splitRanges, type GroupSums } from './matmul-op.ts';
export { downSumsFused, gateUp } from './gate-up-op.ts';
export { argmax, embed, geglu, softcap } from './elementwise-op.ts';
export {
  qkvNorm,
  qkvNormFused,
  rmsnorm,
  rope,
  type HeadRows,
  type NormArgs,
  type QkvNormArgs,
  type RopeTable,
} from './norm-rope-op.ts';
export { ATTENTION_MODE, attention, maskedKeyCount, type AttentionArgs, type AttentionMode } from './attention-op.ts';
export { stackedQkvBlocks, stackedQkvFits, stackedQkvMatmul } from './stacked-qkv-op.ts';
