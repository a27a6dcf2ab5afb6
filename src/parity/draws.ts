/**
 * mlxcel's probe draws (docs/MODEL.md section 6): draw d uses salt = 977 d + 1, prompt
 * p[i] = (7 i + 1 + salt) mod V and block b[i] = (13 i + 3 + salt) mod V, no BOS.
 */
import { fmtInt } from '../util/number-format.ts';

export interface Draw {
  index: number;
  salt: number;
  prompt: number[];
  block: number[];
}

/** Default lengths: 8, 8, 8 plus the long buffered draw min(W + 32, 1536). */
export function defaultDrawLengths(window: number): number[] {
  return [8, 8, 8, Math.min(window + 32, 1536)];
}

/**
 * Draw lengths of a Qwen3.5 target (no sliding window): three short prompts and one past 64 keys, where the
 * full-attention layers' exact plan reads a step's keys in two segments (attention.wgsl SEG_KEYS).
 */
export const QWEN_DRAW_LENGTHS: readonly number[] = [8, 8, 8, 96];

export function probeDraw(index: number, promptLength: number, K: number, vocab: number): Draw {
  const salt = 977 * index + 1;
  const prompt = Array.from({ length: promptLength }, (_, i) => (7 * i + 1 + salt) % vocab);
  const block = Array.from({ length: K }, (_, i) => (13 * i + 3 + salt) % vocab);
  return { index, salt, prompt, block };
}

/**
 * The progress line of one phase of one draw, in the report's numbering (draws from 0, as `DrawResult.index`):
 * "draw 1 of draws 0–3 (prompt 8 tokens): chain". The phases are the report's timings: prefill, chain, block, state,
 * localize.
 */
export function drawPhaseLabel(index: number, draws: number, prompt: number, phase: string): string {
  const of = draws > 1 ? ` of draws 0–${draws - 1}` : '';
  return `draw ${index}${of} (prompt ${fmtInt(prompt)} tokens): ${phase}`;
}
