import type { KernelCache, KernelCacheOptions } from '../gpu/kernels.ts';
import type { Policy } from './policy.ts';
import type { CancelToken } from '../util/cancel.ts';

/**
 * What every target engine takes and gives, whatever its family (docs/MODEL.md section 2): the options a target is
 * built with, the step options and the results of a forward. The engines are the family folders' (the dense Gemma 4
 * one: gemma4/dense/dense-target.ts); buildTarget (build-target.ts) picks one.
 */
export type Precision = 'f32' | 'bf16';

/**
 * The widest verify block (K) a command or the page takes. Checked once, where a run's options enter (the CLI's
 * --block, the worker's run options); an engine's own guard is its `maxBlock`, the rows its workspace holds.
 */
export const MAX_VERIFY_BLOCK = 16;

export interface TargetOptions {
  /** Largest sequence length (full-attention cache rows, RoPE table). */
  maxContext: number;
  /** Largest block width K (staging rows). */
  maxBlock: number;
  /** Prefill chunk size (rows per forward during prefill). */
  prefillChunk: number;
  precision: Precision;
  /**
   * This engine's kernels: a cache to share (its class and fault included), or the options of its own
   * (KernelCacheOptions); unset, a cache of the device's class without a fault. Only the exactness self-test sets
   * it (src/parity/exactness-selftest.ts).
   */
  kernels?: KernelCache | KernelCacheOptions;
}

/** Capture names: q.i k.i v.i (after norm + RoPE), attn.i (after o_proj), mlp.i (before post-FF norm), layer.i, final_norm, logits. */
export type Captures = Set<string> | 'all';

export interface ForwardResult {
  /** Row-major [rows, V] for the rows requested. */
  logits?: Float32Array;
  /** Greedy argmax of each requested row. */
  argmax?: Uint32Array;
  /** Post-final-norm hidden state of every row [M, H] (the MTP seed). */
  finalHidden?: Float32Array;
  captures: Map<string, Float32Array>;
}

/** Options of a prefill: its chunk size (default: the model's), and a token that Cancel sets (checked per chunk). */
export interface PrefillOptions {
  chunk?: number;
  cancel?: CancelToken;
}

export interface StepOptions {
  /** Which rows' logits to return; 'argmax': the LM head runs for every row, only its argmax ids come back. */
  logits?: 'all' | 'last' | 'none' | 'argmax';
  captures?: Captures;
  policy?: Policy;
  finalHidden?: boolean;
  /**
   * Teacher forcing, for error analysis: the hidden rows [M, hidden] that enter layer `layer` in the forward
   * of rows at positions p .. p+M-1 (undefined: the rows the previous layer produced). Each layer then
   * shows its own error instead of the error it inherits; no op's arithmetic changes.
   */
  layerInputs?: (layer: number, p: number, M: number) => Float32Array | undefined;
  /**
   * A chained greedy step (decodeGreedy): the token to embed is already in the ids buffer (written by
   * the previous step's argmax on the GPU), and this step's argmax goes to the ids buffer and to
   * argmaxOut at byte `offset`. Nothing is read back and the call does not wait for the GPU.
   */
  chained?: { argmaxOut: GPUBuffer; offset: number };
}
