/**
 * The checks of the `exact` numerics contract that every GPU target family shares (test/gpu/exactness.test.ts for
 * the dense engine, gemma4-e-exactness and gemma4-moe-exactness for the families): a verify block's logits rows are
 * byte-identical to one-token-at-a-time decode of the same tokens, and after partial acceptance and rollback the
 * caches equal a chain-only run's. The tests keep what differs (vocab, schedule, ring bounds, layer counts).
 */
import { expect } from 'vitest';
import { readBytes } from '../../../src/gpu/buffers.ts';
import type { GpuContext } from '../../../src/gpu/device.ts';
import type { ForwardResult, StepOptions } from '../../../src/model/target.ts';
import type { TargetCore } from '../../../src/model/gemma4/target-core.ts';
import { bytesEqual, rowBytes } from '../tiny-model.ts';

/** What the checks use of a target: any family's TargetCore. */
export type ExactTarget = Pick<TargetCore, 'decode' | 'step' | 'commit' | 'snapshot' | 'restore' | 'cache'>;

/** The logits rows of decoding `block` one token at a time (the chain a verify block must equal). */
export async function chainRows(model: Pick<TargetCore, 'decode'>, block: number[]): Promise<Float32Array[]> {
  const rows: Float32Array[] = [];
  for (const t of block) rows.push((await model.decode(t)).logits!);
  return rows;
}

/**
 * From where `model` stands (already prefilled), for K = 2, 3, 4, 8: the verify block `ids(K, 1000 + K)` gives rows
 * byte-identical (first V floats) to decoding the same tokens one at a time from the same cache; each block is then
 * committed whole. `stepOptions` go to the verify step and `onVerify` sees its result (e.g. its captures).
 * Failures read `${label} K=${K}: row ${j} differs`.
 */
export async function expectBlocksEqualChain(
  model: ExactTarget,
  ids: (n: number, seed: number) => number[],
  V: number,
  label: string,
  o: { stepOptions?: StepOptions; onVerify?: (r: ForwardResult) => void } = {},
): Promise<void> {
  const snap = model.snapshot();
  for (const K of [2, 3, 4, 8]) {
    const block = ids(K, 1000 + K);
    model.restore(snap);
    const chain = await chainRows(model, block);
    model.restore(snap);
    const r = await model.step(block, o.stepOptions);
    model.commit(K);
    o.onVerify?.(r);
    for (let j = 0; j < K; j++) {
      const same = bytesEqual(rowBytes(chain[j], 0, V), rowBytes(r.logits!, j, V));
      expect(same, `${label} K=${K}: row ${j} differs`).toBe(true);
    }
  }
  snap.destroy();
}

/**
 * Runs verify blocks of width K accepting `accepted` rows ([K, accepted] per entry of `schedule`, block tokens
 * `ids(K, 1, 2, ...)`) on `model`, while `chainModel` decodes only the accepted tokens: each accepted verify row
 * must equal the chain's row byte for byte (first V floats). Failures read `${precision} block K=${K} row ${j}`.
 */
export async function runRollbackSchedule(
  model: ExactTarget,
  chainModel: ExactTarget,
  schedule: readonly (readonly number[])[],
  ids: (n: number, seed: number) => number[],
  V: number,
  precision: string,
): Promise<void> {
  let seed = 1;
  for (const [K, accepted] of schedule) {
    const block = ids(K, seed++);
    const verify = (await model.step(block)).logits!;
    model.commit(accepted);
    for (let j = 0; j < accepted; j++) {
      const row = (await chainModel.decode(block[j])).logits!;
      expect(bytesEqual(rowBytes(row, 0, V), rowBytes(verify, j, V)), `${precision} block K=${K} row ${j}`).toBe(true);
    }
  }
}

/**
 * Every cache layer's K and V of `model` equal `chainModel`'s byte for byte: sliding rings whole, full caches up to
 * nextPos (rows past it are dead). Failures read `${precision} layer ${i} ${type}`.
 */
export async function expectCacheLayersEqual(
  ctx: GpuContext,
  model: ExactTarget,
  chainModel: ExactTarget,
  precision: string,
): Promise<void> {
  for (let i = 0; i < model.cache.layers.length; i++) {
    const a = model.cache.layers[i];
    const b = chainModel.cache.layers[i];
    const bytes = (a.type === 'sliding' ? a.slots : model.cache.state.nextPos) * a.rowFloats * 4;
    for (const [x, y] of [
      [a.k, b.k],
      [a.v, b.v],
    ] as const) {
      expect(
        bytesEqual(await readBytes(ctx.device, x, bytes), await readBytes(ctx.device, y, bytes)),
        `${precision} layer ${i} ${a.type}`,
      ).toBe(true);
    }
  }
}

/**
 * Verify blocks [K, accepted] of width K accepting 0..K rows, until a 16-slot ring has wrapped several times (the
 * schedule of the dense engine's and the E-series' rollback tests).
 */
export const WRAP_SCHEDULE: readonly (readonly [number, number])[] = [
  [4, 0],
  [4, 1],
  [4, 4],
  [8, 3],
  [2, 2],
  [3, 1],
  [8, 8],
  [4, 2],
  [8, 5],
  [2, 0],
  [3, 3],
  [8, 7],
  [4, 3],
  [8, 8],
  [8, 6],
];

/** Two fresh models from `make`, both prefilled with `prompt` (no logits): the verifying one and the chain-only one. */
export async function prefilledPair<T extends ExactTarget & Pick<TargetCore, 'prefill'>>(
  make: () => T,
  prompt: number[],
): Promise<[T, T]> {
  const model = make();
  const chainModel = make();
  await model.prefill(prompt, { logits: 'none' });
  await chainModel.prefill(prompt, { logits: 'none' });
  return [model, chainModel];
}
