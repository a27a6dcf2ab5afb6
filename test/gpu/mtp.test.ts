import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import { tinyWeights, tokens } from './tiny-model.ts';
import { loadGolden, tinyAssistant } from '../support/fixtures.ts';
import { uploadWeights, type GpuWeights } from '../../src/model/gpu-weights.ts';
import { AssistantModel, type DraftConvention } from '../../src/model/assistant.ts';
import { TargetModel } from '../../src/model/target.ts';
import { assistantSource, generateClassic, generateMtp, oracleSource } from '../../src/model/generate.ts';
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

  it('chained greedy steps (decodeGreedy: argmax fed back on the GPU, no wait per token) == one decode() per token, and leave the same cache', async () => {
    const prompt = tokens(12, 7);
    const run = async (chained: boolean) => {
      const target = newTarget();
      const pre = await target.prefill(prompt, { logits: 'last' });
      const out = [pre.argmax![0]];
      if (chained) {
        // two windows, 40 tokens: the 16-slot ring wraps more than twice
        out.push(...(await target.decodeGreedy(out[0], 25)));
        out.push(...(await target.decodeGreedy(out[out.length - 1], 15)));
      } else {
        for (let i = 0; i < 40; i++) out.push((await target.decode(out[out.length - 1])).argmax![0]);
      }
      const next = await target.decode(out[out.length - 1]); // reads the cache both runs left behind
      target.destroy();
      return { out, logits: new Uint8Array(next.logits!.buffer, next.logits!.byteOffset, next.logits!.byteLength) };
    };
    const [loop, chained] = [await run(false), await run(true)];
    expect(chained.out).toEqual(loop.out);
    expect(Buffer.from(chained.logits).equals(Buffer.from(loop.logits))).toBe(true);
  });

  for (const K of [2, 3, 4, 8])
    it(`300+ token generations that wrap the ring many times, K = ${K}: both draft sources, both positions`, {
      timeout: 600_000,
    }, async () => {
      const prompt = tokens(20, 99);
      const target = newTarget();
      const classic = await generateClassic(target, prompt, { maxNew: 310 });
      expect(classic.tokens.length).toBe(310);
      const rates: string[] = [];
      {
        for (const convention of ['hf', 'mlxcel'] as DraftConvention[]) {
          const asst = new AssistantModel(ctx, aw, target, convention);
          const mtp = await generateMtp(target, assistantSource(asst), prompt, K, {
            maxNew: 310,
            draftPosition: convention,
          });
          expect(mtp.tokens, `assistant K=${K} ${convention}`).toEqual(classic.tokens);
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
        const mtp = await generateMtp(target, oracle, prompt, K, { maxNew: 310 });
        expect(mtp.tokens, `oracle K=${K}`).toEqual(classic.tokens);
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
