/** The tiny-a target on the GPU for tests. */
import type { GpuContext } from '../../src/gpu/device.ts';
import type { TargetDescription } from '../../src/format/model-description.ts';
import { uploadWeights, type GpuWeights } from '../../src/model/gpu-weights.ts';
import type { Precision } from '../../src/model/target.ts';
import { TargetModel } from '../../src/model/gemma4/dense/dense-target.ts';
import { tinyTarget } from '../support/fixtures.ts';
import { pseudoRandomTokens } from '../../src/util/prng.ts';

export async function tinyWeights(ctx: GpuContext): Promise<GpuWeights<TargetDescription>> {
  return uploadWeights(ctx.device, (await tinyTarget()).description as TargetDescription);
}

export function tinyModel(
  ctx: GpuContext,
  w: GpuWeights<TargetDescription>,
  precision: Precision,
  opts: { prefillChunk?: number } = {},
): TargetModel {
  return new TargetModel(ctx, w, { maxContext: 160, maxBlock: 8, prefillChunk: opts.prefillChunk ?? 64, precision });
}

/** Deterministic pseudo-random token ids of the tiny-a vocabulary. */
export const tokens = (n: number, seed: number, vocab = 1024): number[] => pseudoRandomTokens(n, seed, vocab);

/** Byte view of a Float32Array row. */
export function rowBytes(a: Float32Array, row: number, width: number): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset + row * width * 4, width * 4);
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
