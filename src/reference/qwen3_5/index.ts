/** CPU float64 reference of the Qwen3.5 family: target (explicit state) and MTP head (docs/QWEN35.md). */
export {
  loadQwenWeights,
  loadQwenMtpHead,
  type QwenRefWeights,
  type QwenRefLayer,
  type QwenRefLinearLayer,
  type QwenRefAttentionLayer,
  type QwenRefMtpHead,
} from './weights.ts';
export {
  qwenForward,
  qwenGreedy,
  newQwenState,
  cloneQwenState,
  newKvState,
  gatedDeltaNet,
  gatedAttention,
  attentionDecoderLayer,
  PartialRope,
  softplus,
  silu,
  sigmoid,
  type QwenState,
  type GdnState,
  type KvState,
  type QwenForwardResult,
  type QwenGreedyResult,
  type Captures,
} from './model.ts';
export {
  qwenMtpForward,
  qwenMtpDraft,
  newQwenMtpState,
  cloneQwenMtpState,
  type QwenMtpState,
  type QwenMtpResult,
  type QwenMtpDraft,
} from './mtp.ts';
