/** Public API of the format layer (browser-safe: no Node imports). */
export { FormatError } from './errors.ts';
export { blobSource, bytesSource, readAll, readJson, type ByteSource } from './bytesource.ts';
export {
  DTYPE_SIZE,
  bf16ToNumber,
  f16ToNumber,
  roundToBf16,
  toFloat64,
  toUint32,
  toUint16,
  type Dtype,
  type FloatDtype,
} from './dtype.ts';
export {
  readSafetensorsHeader,
  parseSafetensorsHeader,
  readTensorBytes,
  numel,
  MAX_HEADER_BYTES,
  type TensorRef,
  type SafetensorsHeader,
} from './safetensors.ts';
export { writeSafetensors, type TensorToWrite } from './safetensors-writer.ts';
export {
  parseConfig,
  DEFAULT_EOS_IDS,
  TARGET_MODEL_TYPES,
  ASSISTANT_MODEL_TYPES,
  type ModelConfig,
  type LayerGeometry,
  type RopeSpec,
  type ModelType,
  type PerLayerInputConfig,
  type CentroidHeadConfig,
  type MoeConfig,
} from './config.ts';
export type { LayerType } from './layer-type.ts';
export {
  firstKvSharedLayer,
  isKvSharedLayer,
  kvDonors,
  cacheOwners,
  storedKvLayers,
  mlpWidth,
} from './kv-sharing.ts';
export {
  parseQuantization,
  readQuantization,
  quantParamsFor,
  type QuantizationConfig,
  type QuantParams,
  type AffineBits,
} from './quantization.ts';
export { normaliseTensorName, isIgnoredTensor } from './tensor-names.ts';
export { openCheckpoint, type Checkpoint } from './checkpoint.ts';
export { checkCompatibility } from './compat.ts';
export { dequantizeLinear, dequantAffine, unpackRow, readRows } from './dequant.ts';
export type * from './model-description.ts';
export { familyFeatures } from './model-description.ts';
export { expertLinear, expertSlice } from './experts.ts';
export {
  synthGeometry,
  syntheticCheckpoint,
  layerTypes,
  SYNTH_PRESETS,
  type SynthGeometry,
  type SynthPreset,
  type SyntheticPair,
} from './synthetic.ts';
export { SyntheticFile, DEFAULT_SHARD_BYTES, type SynthOptions } from './synthetic-files.ts';
export * from './qwen3_5/index.ts';
