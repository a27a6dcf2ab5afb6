import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import { tinyModel, tinyWeights } from './tiny-model.ts';
import {
  TINY_A,
  TINY_A_F64,
  kvHeadMajor,
  loadGolden,
  loadTransformersF32,
  maxAbsDiff,
  nmse,
  nmseTransport,
  tinyAssistant,
} from '../support/fixtures.ts';
import { uploadWeights } from '../../src/model/gpu-weights.ts';
import { AssistantModel } from '../../src/model/gemma4/assistant.ts';
import type { AssistantDescription } from '../../src/format/model-description.ts';
import type { GpuContext } from '../../src/gpu/device.ts';

describe('GPU assistant (drafter) vs transformers goldens (tiny-a draft.*)', () => {
  let ctx: GpuContext;
  beforeAll(async () => {
    ctx = await testGpu();
  });
  afterAll(() => ctx?.destroy());

  it('drafts the three golden tokens with close logits and projected hidden states', async () => {
    // Against the shared F32 goldens. The bounds are the yardstick of the last test (transformers' own f32
    // run vs the float64 goldens, which the engine must meet) moved onto the shared goldens by the triangle
    // inequality (nmseTransport; max abs: the yardstick plus the shared goldens' own distance to float64),
    // all computed from the fixtures.
    const golden = await loadGolden();
    const g64 = await loadGolden(TINY_A_F64);
    const tf32 = await loadTransformersF32();
    const yard = async (name: string) => {
      const truth = (await g64.tensor(name)).data,
        shared = (await golden.tensor(name)).data,
        tf = (await tf32.tensor(name)).data;
      return {
        shared,
        nmse: nmseTransport(nmse(tf, truth), truth, shared),
        maxAbs: maxAbsDiff(tf, truth) + maxAbsDiff(shared, truth),
      };
    };
    const seedY = await yard('draft.seed_hidden');
    const hiddenY = await yard('draft.hidden');
    const logitsY = await yard('draft.logits');
    const target = tinyModel(ctx, await tinyWeights(ctx), 'f32');
    const aw = await uploadWeights(ctx.device, (await tinyAssistant()).description as AssistantDescription);
    const asst = new AssistantModel(ctx, aw, target, 'hf');
    const pre = await target.prefill(golden.json.prompt, { logits: 'last', finalHidden: true });
    const H = target.desc.hidden;
    const P = golden.json.prompt.length;
    expect(pre.argmax![0]).toBe(golden.json.bonus_token);
    expect(asst.position()).toBe(golden.json.draft.position_id);
    const seed = pre.finalHidden!.slice((P - 1) * H, P * H);
    const seedNmse = nmse(seed, seedY.shared);
    expect(seedNmse, `seed hidden NMSE (bound ${seedY.nmse.toExponential(2)})`).toBeLessThanOrEqual(seedY.nmse);
    const r = await asst.draft(golden.json.bonus_token, seed, 3, { capture: true });
    expect(r.tokens).toEqual(golden.json.draft.tokens);
    const logitErr = maxAbsDiff(r.logits!, logitsY.shared);
    const hiddenNmse = nmse(r.hidden!, hiddenY.shared);
    // From the shared golden seed only the K/V (the GPU target's cache) carry the engine's f32 error; the
    // yardstick, whose seed and K/V both do, still bounds it.
    const gseed = Float32Array.from(seedY.shared);
    const r2 = await asst.draft(golden.json.bonus_token, gseed, 3, { capture: true });
    expect(r2.tokens).toEqual(golden.json.draft.tokens);
    const fromSeed = nmse(r2.hidden!, hiddenY.shared);
    console.log(
      `vs the shared goldens: seed hidden NMSE ${seedNmse.toExponential(3)} (bound ${seedY.nmse.toExponential(3)}); draft logits max abs err ${logitErr.toExponential(3)} (bound ${logitsY.maxAbs.toExponential(3)}), hidden NMSE ${hiddenNmse.toExponential(3)}, from the golden seed ${fromSeed.toExponential(3)} (bound for both ${hiddenY.nmse.toExponential(3)})`,
    );
    expect(logitErr, 'draft logits max abs').toBeLessThanOrEqual(logitsY.maxAbs);
    expect(hiddenNmse, 'projected hidden NMSE').toBeLessThanOrEqual(hiddenY.nmse);
    expect(fromSeed, 'projected hidden NMSE from the golden seed').toBeLessThanOrEqual(hiddenY.nmse);
    asst.destroy();
    target.destroy();
  });

  // The shared F32 file stores its sliding shared_kv entries token-major (kvHeadMajor in test/support/fixtures.ts).
  it.each([
    { name: 'tiny-a (shared, F32)', dir: TINY_A, slidingTokenMajor: true },
    { name: 'tiny-a-f64', dir: TINY_A_F64, slidingTokenMajor: false },
  ])(
    'the assistant forward alone, on the golden inputs (seed hidden and target K/V) of $name: tokens, logits and projected hidden within NMSE 1e-8',
    async ({ dir, slidingTokenMajor }) => {
      // The assistant's inputs are the seed hidden state and the target's last sliding / last full layer K/V.
      // Here both come from the goldens (rounded once to f32 where they enter GPU buffers), so what is
      // measured is the assistant forward itself, as the CPU reference's "golden inputs" check does; the
      // end-to-end figures (next test) add the GPU target's own error to its inputs. Bound: the acceptance
      // level NMSE 1e-8 of every tensor of a forward, met here by the projected hidden state and by the
      // logits (measured on lavapipe: hidden 2.6e-13 / 1.3e-12, logits max abs 8.6e-6 / 1.8e-5; shared / f64).
      // With exact inputs nothing amplifies earlier layers' error, as in the target's teacher-forced test.
      const g64 = await loadGolden(dir);
      const target = tinyModel(ctx, await tinyWeights(ctx), 'f32');
      const aw = await uploadWeights(ctx.device, (await tinyAssistant()).description as AssistantDescription);
      const asst = new AssistantModel(ctx, aw, target, 'hf');
      const P = g64.json.prompt.length;
      await target.prefill(g64.json.prompt, { logits: 'last' }); // sets the cache state (positions, ring base)
      const cache = target.cache;
      const W = cache.window;
      const lastOf = (type: 'sliding' | 'full') => target.desc.layers.map((l) => l.type).lastIndexOf(type);
      for (const type of ['sliding', 'full'] as const) {
        const li = lastOf(type);
        const { numKvHeads: kvh, headDim: d } = target.desc.layers[li];
        const layer = cache.layers[li];
        const rowBytes = kvh * d * 4;
        for (const [which, buf, evicted] of [
          ['keys', layer.k, layer.kEvicted],
          ['values', layer.v, layer.vEvicted],
        ] as const) {
          const g = await g64.tensor(`shared_kv.${type}_attention.${which}`); // labelled [kv_heads, T, head_dim]
          expect(g.shape).toEqual([kvh, P, d]);
          const kv = type === 'sliding' && slidingTokenMajor ? kvHeadMajor(g.data, kvh, P, d) : g.data;
          for (let t = 0; t < P; t++) {
            const row = new Float32Array(kvh * d); // the cache's row: [kv_heads, head_dim] of one position
            for (let h = 0; h < kvh; h++) for (let i = 0; i < d; i++) row[h * d + i] = kv[(h * P + t) * d + i];
            if (type === 'full') ctx.device.queue.writeBuffer(buf, t * rowBytes, row);
            else if (t >= P - W) ctx.device.queue.writeBuffer(buf, cache.slotOf(t) * rowBytes, row);
            else if (t === P - 1 - W) ctx.device.queue.writeBuffer(evicted, 0, row); // the (W + 1)-th key the assistant reads
          }
        }
      }
      const seed = Float32Array.from((await g64.tensor('draft.seed_hidden')).data);
      const r = await asst.draft(g64.json.bonus_token, seed, 3, { capture: true });
      expect(r.tokens).toEqual(g64.json.draft.tokens);
      const hiddenNmse = nmse(r.hidden!, (await g64.tensor('draft.hidden')).data);
      const logits = (await g64.tensor('draft.logits')).data;
      const logitErr = maxAbsDiff(r.logits!, logits);
      const logitNmse = nmse(r.logits!, logits);
      console.log(
        `assistant forward on the golden inputs of ${dir.split('/').pop()}: projected hidden NMSE ${hiddenNmse.toExponential(3)}, logits NMSE ${logitNmse.toExponential(3)} (max abs ${logitErr.toExponential(3)})`,
      );
      expect(hiddenNmse, 'projected hidden NMSE').toBeLessThanOrEqual(1e-8);
      expect(logitNmse, 'draft logits NMSE').toBeLessThanOrEqual(1e-8);
      asst.destroy();
      target.destroy();
    },
  );

  it('end to end and from the golden seed (inputs from the GPU target): projected hidden states vs the float64 goldens (tiny-a-f64), at least as close as transformers in f32', async () => {
    // tiny-a-f64: the same calls as the shared goldens, float64 throughout, stored as F64 (no f32 noise).
    const g64 = await loadGolden(TINY_A_F64);
    const target = tinyModel(ctx, await tinyWeights(ctx), 'f32');
    const aw = await uploadWeights(ctx.device, (await tinyAssistant()).description as AssistantDescription);
    const asst = new AssistantModel(ctx, aw, target, 'hf');
    const pre = await target.prefill(g64.json.prompt, { logits: 'last', finalHidden: true });
    const H = target.desc.hidden;
    const P = g64.json.prompt.length;
    expect(pre.argmax![0]).toBe(g64.json.bonus_token);
    const hidden = (await g64.tensor('draft.hidden')).data;
    const logits = (await g64.tensor('draft.logits')).data;
    const goldenSeed = (await g64.tensor('draft.seed_hidden')).data;
    const seed = pre.finalHidden!.slice((P - 1) * H, P * H);
    const seedNmse = nmse(seed, goldenSeed);
    const r = await asst.draft(g64.json.bonus_token, seed, 3, { capture: true });
    expect(r.tokens).toEqual(g64.json.draft.tokens);
    const e2e = nmse(r.hidden!, hidden);
    const e2eLogits = maxAbsDiff(r.logits!, logits);
    // From the golden seed (K/V still the GPU target's own cache).
    const r2 = await asst.draft(g64.json.bonus_token, Float32Array.from(goldenSeed), 3, { capture: true });
    expect(r2.tokens).toEqual(g64.json.draft.tokens);
    const fromSeed = nmse(r2.hidden!, hidden);
    const seedLogits = maxAbsDiff(r2.logits!, logits);
    // transformers' own code with the model in float32, end to end (tools/make_f32_yardstick.py).
    const tf32 = await loadTransformersF32();
    const tfHidden = nmse((await tf32.tensor('draft.hidden')).data, hidden);
    const tfSeed = nmse((await tf32.tensor('draft.seed_hidden')).data, goldenSeed);
    const tfLogits = maxAbsDiff((await tf32.tensor('draft.logits')).data, logits);
    console.log(
      `vs float64 goldens: seed hidden NMSE ${seedNmse.toExponential(3)} (transformers f32: ${tfSeed.toExponential(3)}); draft hidden NMSE end to end ${e2e.toExponential(3)} (transformers f32: ${tfHidden.toExponential(3)}; logits max abs ${e2eLogits.toExponential(3)}, transformers f32: ${tfLogits.toExponential(3)}), from the golden seed ${fromSeed.toExponential(3)} (logits max abs ${seedLogits.toExponential(3)})`,
    );
    // The yardstick is transformers' own code with the model in float32 (tools/make_f32_yardstick.py): seed
    // 1.8e-7, projected hidden 4.5e-7, logits max abs 9.8e-3 end to end; the engine must be at least that
    // close. From the golden seed only the K/V (the GPU target's cache) carry the engine's error; the
    // end-to-end yardstick, whose seed and K/V both do, still bounds it.
    // The acceptance level 1e-8 holds for the assistant forward on exact inputs (test above: 2.6e-13 /
    // 1.3e-12); end to end its inputs carry the target's f32 error, which the projected state amplifies
    // (seed NMSE x ~4: the float64 reference with f32 RMSNorm/RoPE, numerics 'transformers', fed golden seed
    // + golden K/V lands at 4e-13, fed its own seed (2.1e-8) at 7.6e-8). Measured on lavapipe: seed 1.6e-8,
    // projected hidden 1.4e-7 end to end, 2.6e-8 from the golden seed; logits 5.7e-3 / 2.5e-3.
    expect(seedNmse, 'seed hidden NMSE').toBeLessThanOrEqual(tfSeed);
    expect(e2e, 'projected hidden NMSE end to end').toBeLessThanOrEqual(tfHidden);
    expect(e2eLogits, 'draft logits max abs end to end').toBeLessThanOrEqual(tfLogits);
    expect(fromSeed, 'projected hidden NMSE from the golden seed').toBeLessThanOrEqual(tfHidden);
    expect(seedLogits, 'draft logits max abs from the golden seed').toBeLessThanOrEqual(tfLogits);
    asst.destroy();
    target.destroy();
  });
});
