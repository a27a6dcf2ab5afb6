/** CPU float64 reference of the Gemma 4 family's own parts: PLE, KV sharing, MoE, centroid head. */
export {
  familyConstant,
  familyConstants,
  type ConstantMode,
  type FamilyConstants,
} from '../../numerics/family-constants.ts';
export {
  firstKvSharedLayer,
  isKvSharedLayer,
  kvDonors,
  cacheOwners,
  storedKvLayers,
  mlpWidth,
  SharedKvCache,
} from './kv-sharing.ts';
export {
  pleTableRow,
  perLayerInputs,
  pleContribution,
  type PleModelWeights,
  type PleLayerWeights,
} from './e-series/ple.ts';
export {
  routeRow,
  expertsRow,
  moeBlockRow,
  topKIndices,
  type MoeWeights,
  type RouterOrder,
  type RouterOptions,
  type RouterResult,
  type MoeBlockResult,
} from './moe/moe.ts';
export {
  centroidHead,
  DTYPE_MIN,
  type CentroidHeadWeights,
  type CentroidFill,
  type CentroidHeadResult,
} from './e-series/centroid-head.ts';
export { familyLayerRow, type FamilyLayer, type FamilyLayerOptions, type FamilyLayerCapture } from './member-layer.ts';
export { referenceRouterComparison, type ReferenceRouterLayer, type RouterScale } from './moe/router-compare.ts';
