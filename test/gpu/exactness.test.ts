import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import { bytesEqual, rowBytes, tinyModel, tinyWeights, tokens } from './tiny-model.ts';
import { readBytes } from '../../src/gpu/buffers.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import type { GpuWeights } from '../../src/model/gpu-weights.ts';
import type { TargetDescription } from '../../src/format/model-description.ts';
import type { TargetModel } from '../../src/model/target.ts';

/**
 * The numerics contract under policy `exact`: a verify block's logits rows are byte-identical to
 * one-token-at-a-time decode of the same tokens, for any block width and wherever the ring stands.
 * The tiny-a window is 16: prompts of 5 (< W), 16 (= W) and 40 (wrapped twice) tokens.
 */
const V = 1024;

async function chainRows(model: TargetModel, block: number[]): Promise<Float32Array[]> {
  const rows: Float32Array[] = [];
  for (const t of block) rows.push((await model.decode(t)).logits!);
  return rows;
}

describe('exact policy: block rows == chain rows, byte for byte', () => {
  let ctx: GpuContext;
  let weights: GpuWeights<TargetDescription>;
  beforeAll(async () => {
    ctx = await testGpu();
    weights = await tinyWeights(ctx);
  });
  afterAll(() => ctx?.destroy());

  for (const precision of ['f32', 'bf16'] as const) {
    for (const P of [5, 16, 40]) {
      it(`${precision}, prompt ${P}: K = 2, 3, 4, 8`, async () => {
        const model = tinyModel(ctx, weights, precision);
        await model.prefill(tokens(P, P), { logits: 'none' });
        const snap = model.snapshot();
        for (const K of [2, 3, 4, 8]) {
          const block = tokens(K, 1000 + K);
          model.restore(snap);
          const chain = await chainRows(model, block);
          model.restore(snap);
          const verify = (await model.step(block)).logits!;
          model.commit(K);
          for (let j = 0; j < K; j++) {
            const same = bytesEqual(rowBytes(chain[j], 0, V), rowBytes(verify, j, V));
            expect(same, `${precision} P=${P} K=${K}: row ${j} differs`).toBe(true);
          }
        }
        snap.destroy();
        model.destroy();
      });
    }
  }

  it('after partial acceptance + rollback the caches equal a chain-only run (contents and slot order)', async () => {
    for (const precision of ['f32', 'bf16'] as const) {
      const model = tinyModel(ctx, weights, precision);
      const chainModel = tinyModel(ctx, weights, precision);
      const prompt = tokens(13, 7);
      await model.prefill(prompt, { logits: 'none' });
      await chainModel.prefill(prompt, { logits: 'none' });
      // Blocks of width K, accepting 0..K rows, until the ring has wrapped several times.
      const schedule = [
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
      let seed = 1;
      for (const [K, accepted] of schedule) {
        const block = tokens(K, seed++);
        const verify = (await model.step(block)).logits!;
        model.commit(accepted);
        // The chain model decodes only what was accepted; its rows must equal the verify rows.
        for (let j = 0; j < accepted; j++) {
          const row = (await chainModel.decode(block[j])).logits!;
          expect(bytesEqual(rowBytes(row, 0, V), rowBytes(verify, j, V)), `${precision} block K=${K} row ${j}`).toBe(
            true,
          );
        }
      }
      expect(model.cache.state).toEqual(chainModel.cache.state);
      expect(model.cache.state.nextPos).toBeGreaterThan(3 * model.cache.window);
      for (let i = 0; i < model.cache.layers.length; i++) {
        const a = model.cache.layers[i];
        const b = chainModel.cache.layers[i];
        // Sliding rings are compared whole; full caches up to nextPos (rows past it are dead).
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
      model.destroy();
      chainModel.destroy();
    }
  });

  it('chunked prefill leaves the same ring layout as whole prefill (positions in mlxcel slots)', async () => {
    const whole = tinyModel(ctx, weights, 'f32');
    const chunked = tinyModel(ctx, weights, 'f32', { prefillChunk: 7 });
    const prompt = tokens(40, 3);
    await whole.prefill(prompt, { logits: 'none' });
    await chunked.prefill(prompt, { logits: 'none' });
    expect(whole.cache.state).toEqual({ nextPos: 40, base: 40 });
    expect(chunked.cache.state).toEqual(whole.cache.state);
    // Decoding continues identically in slot order (values may differ in the last bits: chunking is
    // a different reduction, which is what the prefill-chunk-mismatch policy demonstrates).
    expect(whole.cache.slotOf(40)).toBe(0);
    expect(whole.cache.slotOf(39)).toBe(15);
    whole.destroy();
    chunked.destroy();
  });
});
