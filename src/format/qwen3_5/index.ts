/** The Qwen3.5 family's format layer: config, tensor plan, checkpoints (docs/QWEN35.md). */
export {
  parseQwen35Config,
  isQwen35Config,
  QWEN35_MODEL_TYPES,
  QWEN35_DRAFTER_MODEL_TYPES,
  type Qwen35Config,
  type Qwen35LayerType,
  type Qwen35ModelType,
  type Qwen35AttentionGeometry,
  type Qwen35LinearGeometry,
} from './config.ts';
export type * from './description.ts';
export { describeQwen35, describeQwen35Drafter } from './describe.ts';
export { openQwen35Checkpoint, type Qwen35Checkpoint } from './checkpoint.ts';
export {
  openQwen35Drafter,
  attachQwen35Drafter,
  qwenMtpHeadText,
  QWEN35_MTP_DRAFTER_TYPE,
  type Qwen35DrafterCheckpoint,
} from './drafter.ts';
