/**
 * The geometry every synthetic Gemma 4 preset sets: the dense target and its assistant. One definition for the
 * dense presets (synthetic.ts) and the family preset tables (synthetic-gemma4-family-presets.ts,
 * synthetic-gemma4-moe-presets.ts), which extend it; a module of its own, with types only, so that the preset
 * tables can import it while synthetic.ts imports them (no module cycle).
 */
import type { AffineBits } from './quantization.ts';

/** The MTP assistant's geometry; bits null = dense bf16. */
export interface AssistantSynth {
  hidden: number;
  intermediate: number;
  heads: number;
  bits: AffineBits | null;
}

export interface DenseSynthGeometry {
  modelType: 'gemma4' | 'gemma4_unified';
  vocab: number;
  hidden: number;
  /** The dense MLP's width (a MoE target's dense MLP beside its experts). */
  intermediate: number;
  layers: number;
  heads: number;
  /** Sliding layers' KV heads x head dim. */
  kvHeads: number;
  headDim: number;
  /** Full layers' (k_eq_v) KV heads x head dim (where num_global_key_value_heads is null: num_key_value_heads). */
  globalKvHeads: number;
  globalHeadDim: number;
  window: number;
  softcap: number;
  /** Affine bits of the target's linears (and embedding); null = dense bf16. */
  bits: AffineBits | null;
  groupSize: number;
  /** MLP projections at another width, declared as per-module overrides (tiny-a uses 8). */
  mlpBits: AffineBits | null;
  /** null = no assistant. */
  assistant: AssistantSynth | null;
}
