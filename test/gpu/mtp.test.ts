import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import { tinyWeights, tokens } from './tiny-model.ts';
import { loadGolden, tinyAssistant } from '../support/fixtures.ts';
import { uploadWeights, type GpuWeights } from '../../src/model/gpu-weights.ts';
import { AssistantModel, type DraftConvention } from '../../src/model/gemma4/assistant.ts';
import { TargetModel } from '../../src/model/gemma4/dense/dense-target.ts';
import { chainedAndLoop } from './helpers/mtp-parity.ts';
import {
  assistantSource,
  generateClassic,
  generateMtp,
  oracleSource,
  roundEmitted,
  type GenerateResult,
} from '../../src/model/generate.ts';
import { readBytes } from '../../src/gpu/buffers.ts';
import type { AssistantDescription, TargetDescription } from '../../src/format/model-description.ts';
import type { GpuContext } from '../../src/gpu/device.ts';

/** Under policy `exact`, MTP greedy output equals classic greedy output token for token. */
describe('MTP speculative decoding == classic greedy (exact policy)', () => {
  let ctx: GpuContext;
  let tw: GpuWeights<TargetDescription>;
  let aw: GpuWeights<AssistantDescription>;
  const newTarget = (maxContext = 400) =>
    new TargetModel(ctx, tw, { maxContext, maxBlock: 8, prefillChunk: 64, precision: 'f32' });
  beforeAll(async () => {
    ctx = await testGpu();
    tw = await tinyWeights(ctx);
    aw = await uploadWeights(ctx.device, (await tinyAssistant()).description as AssistantDescription);
  });
  afterAll(() => ctx?.destroy());

  it('reproduces the 24 fixture greedy tokens with the assistant, K = 2, 3, 4, 8', async () => {
    const golden = await loadGolden();
    const target = newTarget();
    const classic = await generateClassic(target, golden.json.prompt, { maxNew: 24 });
    expect(classic.tokens).toEqual(golden.json.greedy);
    for (const K of [2, 3, 4, 8]) {
      const asst = new AssistantModel(ctx, aw, target, 'hf');
      const mtp = await generateMtp(target, assistantSource(asst), golden.json.prompt, K, { maxNew: 24 });
      expect(mtp.tokens, `K=${K}`).toEqual(golden.json.greedy);
      expect(mtp.sha256).toBe(classic.sha256);
      asst.destroy();
    }
    target.destroy();
  });

  /** Every round's invariants; the rounds' emitted tokens, concatenated, are the output. */
  const checkRounds = (mtp: GenerateResult, K: number, what: string) => {
    const rounds = mtp.rounds!;
    expect(rounds.length, what).toBe(mtp.counters!.rounds);
    const stream = [mtp.tokens[0]];
    for (const [i, r] of rounds.entries()) {
      const at = `${what} round ${i}`;
      expect(r.at, at).toBe(stream.length);
      expect(r.pos, at).toBe(mtp.prompt.length + r.at);
      expect(r.drafts.length, at).toBe(K - 1);
      expect(r.verify.length, at).toBe(K);
      expect(r.accepted, at).toBeGreaterThanOrEqual(0);
      expect(r.accepted, at).toBeLessThanOrEqual(r.drafts.length);
      // accepted = the longest prefix where the draft is the verify's own token
      expect(r.drafts.slice(0, r.accepted), at).toEqual(r.verify.slice(0, r.accepted));
      if (r.accepted < r.drafts.length) expect(r.drafts[r.accepted], at).not.toBe(r.verify[r.accepted]);
      expect(roundEmitted(r), at).toEqual([...r.drafts.slice(0, r.accepted), r.verify[r.accepted]]);
      stream.push(...roundEmitted(r));
    }
    expect(stream.length, what).toBeGreaterThanOrEqual(mtp.tokens.length);
    expect(stream.slice(0, mtp.tokens.length), what).toEqual(mtp.tokens);
    const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
    expect(sum(rounds.map((r) => r.accepted)), what).toBe(mtp.counters!.accepted);
  };

  it("records every round: the first drafts are the goldens' draft tokens (hf); the rounds rebuild the output", async () => {
    const golden = await loadGolden();
    const target = newTarget();
    const classic = await generateClassic(target, golden.json.prompt, { maxNew: 24 });
    for (const K of [2, 4]) {
      const asst = new AssistantModel(ctx, aw, target, 'hf');
      const mtp = await generateMtp(target, assistantSource(asst), golden.json.prompt, K, {
        maxNew: 24,
        draftPosition: 'hf',
      });
      asst.destroy();
      // the first round drafts from the bonus token after the prompt, at the goldens' draft position
      expect(mtp.rounds![0].at).toBe(1);
      expect(mtp.rounds![0].pos).toBe(golden.json.draft.position_id + 1);
      expect(mtp.rounds![0].drafts, `K=${K}`).toEqual(golden.json.draft.tokens.slice(0, K - 1));
      checkRounds(mtp, K, `assistant K=${K}`);
      expect(mtp.tokens).toEqual(classic.tokens);
    }
    // Oracle drafts accept every length 0 .. K-1, so the rounds see full and partial acceptance.
    const wrong = new Set([1, 2, 6, 7, 11, 15, 18]);
    const mtp = await generateMtp(
      target,
      oracleSource(classic.tokens, 1024, (i) => wrong.has(i)),
      golden.json.prompt,
      4,
      {
        maxNew: 24,
      },
    );
    checkRounds(mtp, 4, 'oracle K=4');
    expect(new Set(mtp.rounds!.map((r) => r.accepted))).toEqual(new Set([0, 1, 2, 3]));
    expect(mtp.tokens).toEqual(classic.tokens);
    target.destroy();
  });

  it('chained greedy steps (decodeGreedy: argmax fed back on the GPU, no wait per token) == one decode() per token, and leave the same cache', async () => {
    // two windows, 40 tokens: the 16-slot ring wraps more than twice
    const { loop, chained } = await chainedAndLoop(newTarget, tokens(12, 7));
    expect(chained.out).toEqual(loop.out);
    expect(chained.logits.equals(loop.logits)).toBe(true);
  });

  // 160 tokens: the 16-slot ring wraps ten times and the oracle's gap cycle (45 tokens at K = 8) recurs; twice
  // as many tokens double the time of the suite's longest file and add no case.
  const LONG = 160;
  const prompt = tokens(20, 99);
  // The classic output the four K compare with: one generation, not one per K (the same prompt and target).
  let classicLong: Promise<GenerateResult> | undefined;
  const classicOnce = () => {
    classicLong ??= (async () => {
      const target = newTarget();
      try {
        return await generateClassic(target, prompt, { maxNew: LONG });
      } finally {
        target.destroy();
      }
    })();
    return classicLong;
  };
  for (const K of [2, 3, 4, 8])
    it(`${LONG}-token generations that wrap the ring ten times, K = ${K}: both draft sources, both positions`, {
      timeout: 600_000,
    }, async () => {
      const classic = await classicOnce();
      expect(classic.tokens.length).toBe(LONG);
      const target = newTarget();
      const rates: string[] = [];
      {
        for (const convention of ['hf', 'mlxcel'] as DraftConvention[]) {
          const asst = new AssistantModel(ctx, aw, target, convention);
          const mtp = await generateMtp(target, assistantSource(asst), prompt, K, {
            maxNew: LONG,
            draftPosition: convention,
          });
          expect(mtp.tokens, `assistant K=${K} ${convention}`).toEqual(classic.tokens);
          checkRounds(mtp, K, `assistant K=${K} ${convention}`);
          rates.push(
            `K=${K} ${convention}: ${(100 * mtp.counters!.acceptanceRate).toFixed(1)}% (${mtp.counters!.rounds} rounds)`,
          );
          asst.destroy();
        }
        // Oracle: wrong drafts at stream indices whose gaps cycle through 0 .. K, so that rounds
        // accept every length 0 .. K-1 and roll back every depth.
        const wrong = new Set<number>();
        for (let m = 0, g = 0; m < 400; g = (g + 1) % (K + 1)) wrong.add((m += g + 1));
        const oracle = oracleSource(classic.tokens, 1024, (i) => wrong.has(i));
        const mtp = await generateMtp(target, oracle, prompt, K, { maxNew: LONG });
        expect(mtp.tokens, `oracle K=${K}`).toEqual(classic.tokens);
        checkRounds(mtp, K, `oracle K=${K}`);
        const hist = mtp.counters!.acceptedHistogram;
        expect(
          hist.every((n) => n > 0),
          `K=${K} acceptance lengths ${hist.join(',')}`,
        ).toBe(true);
      }
      console.log(`assistant acceptance on tiny-a (random weights): ${rates.join('; ')}`);
      target.destroy();
    });

  it('after an MTP run the caches are byte-identical to classic decode over the same tokens', async () => {
    const prompt = tokens(9, 5);
    const a = newTarget(200);
    const b = newTarget(200);
    const classic = await generateClassic(a, prompt, { maxNew: 80 });
    const oracle = oracleSource(classic.tokens, 1024, (i) => i % 4 === 1);
    const mtp = await generateMtp(b, oracle, prompt, 4, { maxNew: 60 });
    expect(mtp.tokens).toEqual(classic.tokens.slice(0, 60));
    // Replay classic decode over exactly the tokens MTP committed (its last round may run past 60).
    a.reset();
    await a.prefill(prompt, { logits: 'none' });
    for (let i = 0; a.cache.state.nextPos < b.cache.state.nextPos; i++) await a.decode(classic.tokens[i]);
    expect(a.cache.state).toEqual(b.cache.state);
    for (let i = 0; i < a.cache.layers.length; i++) {
      const x = a.cache.layers[i];
      const y = b.cache.layers[i];
      const bytes = (x.type === 'sliding' ? x.slots : a.cache.state.nextPos) * x.rowFloats * 4;
      expect(
        Buffer.compare(await readBytes(ctx.device, x.k, bytes), await readBytes(ctx.device, y.k, bytes)),
        `k ${i}`,
      ).toBe(0);
      expect(
        Buffer.compare(await readBytes(ctx.device, x.v, bytes), await readBytes(ctx.device, y.v, bytes)),
        `v ${i}`,
      ).toBe(0);
    }
    a.destroy();
    b.destroy();
  });
});
