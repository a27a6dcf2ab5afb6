/**
 * MTP with the E-series assistant (centroid head, donors' K/V) on gemma4-e-tiny (window 16): under `exact`, MTP
 * output equals classic greedy output byte for byte (SHA-256 of the token ids) over 160 tokens, far past the
 * window, with rejected drafts (the mlx-swift-lm #383 case: a verify block's rejected rows must leave the rings of
 * the cache owners as a chain-only run would), in f32 and bf16, with the assistant and with oracle drafts that
 * accept every length. ETargetModel serves generate through the GenerateTarget contract (its chained greedy steps
 * included).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AssistantDescription, TargetDescription } from '../../src/format/model-description.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import { ETargetModel } from '../../src/model/gemma4/e-series/e-target.ts';
import { generateClassic } from '../../src/model/generate.ts';
import type { GpuWeights } from '../../src/model/gpu-weights.ts';
import type { Precision } from '../../src/model/target.ts';
import { GEMMA4_E_TINY, type Golden } from '../support/fixtures.ts';
import { fixtureOnGpu, type FixtureOnGpu } from './helpers/fixture-on-gpu.ts';
import {
  chainedAndLoop,
  expectCachesByteEqual,
  expectGoldenMtp,
  expectLongMtpParity,
  mtpThenReplayClassic,
} from './helpers/mtp-parity.ts';

// 160 tokens: the 16-slot rings wrap ten times, every accept length recurs (the oracle's gaps cycle every 15
// tokens at K = 4, 45 at K = 8); twice as many add test time, not cases.
const MAX_NEW = 160;

describe('E-series MTP == classic greedy (exact policy, gemma4-e-tiny)', () => {
  let fixture: FixtureOnGpu;
  let ctx: GpuContext;
  let golden: Golden;
  let tw: GpuWeights<TargetDescription>;
  let aw: GpuWeights<AssistantDescription>;
  const newTarget = (precision: Precision = 'f32', maxContext = 400) =>
    new ETargetModel(ctx, tw, { maxContext, maxBlock: 8, prefillChunk: 64, precision });

  beforeAll(async () => {
    fixture = await fixtureOnGpu(GEMMA4_E_TINY);
    ({ ctx, golden, tw, aw } = fixture);
  });
  afterAll(() => {
    fixture?.destroy();
  });

  it('chained greedy steps (decodeGreedy) == one decode() per token, and leave the same owner caches', async () => {
    const { loop, chained } = await chainedAndLoop(() => newTarget('f32', 128), golden.json.prompt);
    expect(chained.out.slice(0, golden.json.greedy.length)).toEqual(golden.json.greedy);
    expect(chained.out).toEqual(loop.out);
    expect(chained.logits.equals(loop.logits)).toBe(true);
  });

  it("reproduces the 16 golden greedy tokens with the assistant, K = 2, 3, 4, 8; the first drafts are the goldens'", async () => {
    const target = newTarget();
    const classic = await generateClassic(target, golden.json.prompt, { maxNew: 16 });
    expect(classic.tokens).toEqual(golden.json.greedy);
    // the goldens hold 3 draft steps after the prompt: the first round's drafts start with them
    await expectGoldenMtp(ctx, aw, target, golden, [2, 3, 4, 8], classic.sha256);
    target.destroy();
  });

  for (const precision of ['f32', 'bf16'] as const)
    it(`${MAX_NEW} tokens (the 16-slot rings wrap ~10 times), ${precision}: assistant K = ${precision === 'f32' ? '4, 8' : '4'} and oracle K = 4 == classic, SHA-256`, {
      timeout: 600_000,
    }, async () => {
      const target = newTarget(precision);
      await expectLongMtpParity(ctx, aw, target, golden.json.prompt, precision, MAX_NEW, 'gemma4-e-tiny');
      target.destroy();
    });

  it('after an MTP run with rejections the owner caches are byte-identical to classic decode over the same tokens', async () => {
    const a = newTarget('f32', 160);
    const b = newTarget('f32', 160);
    await mtpThenReplayClassic(ctx, aw, a, b, golden.json.prompt);
    expect(a.cache.state).toEqual(b.cache.state);
    expect(a.cache.layers.length).toBe(6); // the owners 0 .. 5; layers 6 .. 9 read 5 and 4
    await expectCachesByteEqual(ctx, a, b);
    a.destroy();
    b.destroy();
  });
});
