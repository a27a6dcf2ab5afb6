/**
 * MTP with the MoE fixture's assistant (a dense Gemma 4 assistant: 4 layers, KV-shared on the target's last sliding
 * and full caches) on gemma4-moe-tiny (window 16): MoETargetModel serves generate (GenerateTarget, its chained greedy
 * steps included); the first round drafts the goldens' draft tokens; under `exact`, MTP output equals classic greedy
 * output byte for byte (SHA-256 of the token ids) over 160 tokens, far past the window, with rejected drafts (the
 * mlx-swift-lm #383 case), in f32 and bf16, with the assistant and with oracle drafts that accept every length;
 * after an MTP run with rejections every layer's cache equals a classic run's byte for byte.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AssistantDescription, TargetDescription } from '../../src/format/model-description.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import { AssistantModel } from '../../src/model/gemma4/assistant.ts';
import { MoETargetModel, type MoeTargetOptions } from '../../src/model/gemma4/moe/moe-target.ts';
import { generateClassic } from '../../src/model/generate.ts';
import type { GpuWeights } from '../../src/model/gpu-weights.ts';
import type { Precision } from '../../src/model/target.ts';
import { GEMMA4_MOE_TINY, maxAbsDiff, type Golden } from '../support/fixtures.ts';
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

describe('MoE MTP == classic greedy (exact policy, gemma4-moe-tiny)', () => {
  let fixture: FixtureOnGpu;
  let ctx: GpuContext;
  let golden: Golden;
  let tw: GpuWeights<TargetDescription>;
  let aw: GpuWeights<AssistantDescription>;
  const newTarget = (precision: Precision = 'f32', maxContext = 400, extra: Partial<MoeTargetOptions> = {}) =>
    new MoETargetModel(ctx, tw, { maxContext, maxBlock: 8, prefillChunk: 64, precision, ...extra });

  beforeAll(async () => {
    fixture = await fixtureOnGpu(GEMMA4_MOE_TINY);
    ({ ctx, golden, tw, aw } = fixture);
  });
  afterAll(() => {
    fixture?.destroy();
  });

  it('chained greedy steps (decodeGreedy) == one decode() per token, and leave the same caches', async () => {
    const { loop, chained } = await chainedAndLoop(() => newTarget('f32', 128), golden.json.prompt);
    expect(chained.out).toEqual(loop.out);
    expect(chained.logits.equals(loop.logits)).toBe(true);
    const target = newTarget('f32', 64);
    await expect(target.decodeGreedy(512, 2)).rejects.toThrow(/token 512 outside \[0, 512\)/);
    target.destroy();
  });

  it("transformers' router: the 16 golden greedy tokens at K = 2, 3, 4; the first round drafts the goldens' drafts", async () => {
    // The goldens follow transformers' router; MLX's bf16 router weight picks another expert on one prompt row here
    // (gemma4-moe-golden.test.ts), so the golden tokens are checked under transformers' convention.
    const target = newTarget('f32', 64, { router: 'transformers' });
    const classic = await generateClassic(target, golden.json.prompt, { maxNew: 16 });
    expect(classic.tokens).toEqual(golden.json.greedy);
    const want = golden.json.draft.tokens;
    // the goldens hold 3 draft steps after the prompt: the first round's drafts start with them
    await expectGoldenMtp(ctx, aw, target, golden, [2, 3, 4], classic.sha256);
    // the draft logits of those 3 steps against the float64 goldens (the target's seed hidden is f32 here)
    target.reset();
    const pre = await target.prefill(golden.json.prompt, { logits: 'last', finalHidden: true });
    const H = target.desc.hidden;
    const T = golden.json.prompt.length;
    const asst = new AssistantModel(ctx, aw, target, 'hf');
    const d = await asst.draft(pre.argmax![0], pre.finalHidden!.slice((T - 1) * H, T * H), want.length, {
      capture: true,
    });
    asst.destroy();
    expect(d.tokens).toEqual(want);
    const err = maxAbsDiff(d.logits!, (await golden.tensor('draft.logits')).data);
    console.log(
      `gemma4-moe-tiny assistant: draft tokens ${d.tokens.join(',')} equal; logits max abs ${err.toExponential(2)}`,
    );
    expect(err).toBeLessThan(0.05);
    target.destroy();
  });

  for (const precision of ['f32', 'bf16'] as const)
    it(`${MAX_NEW} tokens (the 16-slot rings wrap ~10 times), ${precision}: assistant K = ${precision === 'f32' ? '4, 8' : '4'} and oracle K = 4 == classic, SHA-256`, {
      timeout: 900_000,
    }, async () => {
      const target = newTarget(precision);
      await expectLongMtpParity(ctx, aw, target, golden.json.prompt, precision, MAX_NEW, 'gemma4-moe-tiny');
      target.destroy();
    });

  it('after an MTP run with rejections every cache is byte-identical to classic decode over the same tokens', async () => {
    const a = newTarget('f32', 160);
    const b = newTarget('f32', 160);
    await mtpThenReplayClassic(ctx, aw, a, b, golden.json.prompt, (mtp) =>
      expect(mtp.counters!.acceptedHistogram.slice(0, 3).some((n) => n > 0)).toBe(true),
    );
    expect(a.cache.state).toEqual(b.cache.state);
    expect(a.cache.layers.length).toBe(6);
    await expectCachesByteEqual(ctx, a, b);
    a.destroy();
    b.destroy();
  });
});
