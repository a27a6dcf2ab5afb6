import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import { tinyModel, tinyWeights } from './tiny-model.ts';
import { TINY_A, TINY_A_F64, kvHeadMajor, loadGolden, loadTransformersF32, maxAbsDiff, nmse, tinyAssistant } from '../support/fixtures.ts';
import { uploadWeights } from '../../src/model/gpu-weights.ts';
import { AssistantModel } from '../../src/model/assistant.ts';
import type { AssistantDescription } from '../../src/format/model-description.ts';
import type { GpuContext } from '../../src/gpu/device.ts';

describe('GPU assistant (drafter) vs transformers goldens (tiny-a draft.*)', () => {
  let ctx: GpuContext;
  beforeAll(async () => {
    ctx = await testGpu();
  });
  afterAll(() => ctx?.destroy());

  it('drafts the three golden tokens with close logits and projected hidden states', async () => {
    const golden = await loadGolden();
    const target = tinyModel(ctx, await tinyWeights(ctx), 'f32');
    const aw = await uploadWeights(ctx.device, (await tinyAssistant()).description as AssistantDescription);
    const asst = new AssistantModel(ctx, aw, target, 'hf');
    const pre = await target.prefill(golden.json.prompt, { logits: 'last', finalHidden: true });
    const H = target.desc.hidden;
    const P = golden.json.prompt.length;
    expect(pre.argmax![0]).toBe(golden.json.bonus_token);
    expect(asst.position()).toBe(golden.json.draft.position_id);
    const seed = pre.finalHidden!.slice((P - 1) * H, P * H);
    expect(nmse(seed, (await golden.tensor('draft.seed_hidden')).data)).toBeLessThan(1e-7);
    const r = await asst.draft(golden.json.bonus_token, seed, 3, { capture: true });
    expect(r.tokens).toEqual(golden.json.draft.tokens);
    const logitErr = maxAbsDiff(r.logits!, (await golden.tensor('draft.logits')).data);
    const hiddenNmse = nmse(r.hidden!, (await golden.tensor('draft.hidden')).data);
    console.log(`draft logits max abs err ${logitErr.toExponential(3)}, hidden NMSE ${hiddenNmse.toExponential(3)}`);
    expect(logitErr).toBeLessThanOrEqual(0.05);
    // The projected state amplifies the seed's error: the float64 reference itself lands at 2.7e-8
    // end to end (test/unit/reference.test.ts), because the goldens carry f32 noise (see
    // target-golden.test.ts). With the golden seed the GPU drafter alone is at ~6e-8.
    expect(hiddenNmse).toBeLessThanOrEqual(5e-7);
    const gseed = Float32Array.from((await golden.tensor('draft.seed_hidden')).data);
    const r2 = await asst.draft(golden.json.bonus_token, gseed, 3, { capture: true });
    expect(r2.tokens).toEqual(golden.json.draft.tokens);
    expect(nmse(r2.hidden!, (await golden.tensor('draft.hidden')).data)).toBeLessThanOrEqual(1e-7);
    asst.destroy();
    target.destroy();
  });

  // The shared F32 file stores its sliding shared_kv entries token-major (kvHeadMajor in test/support/fixtures.ts).
  it.each([
    { name: 'tiny-a (shared, F32)', dir: TINY_A, slidingTokenMajor: true },
    { name: 'tiny-a-f64', dir: TINY_A_F64, slidingTokenMajor: false },
  ])('the assistant forward alone, on the golden inputs (seed hidden and target K/V) of $name: tokens, logits, projected hidden within NMSE 1e-8', async ({ dir, slidingTokenMajor }) => {
    // The assistant's inputs are the seed hidden state and the target's last sliding / last full layer K/V.
    // Here both come from the float64 goldens (rounded once to f32 where they enter GPU buffers), so what
    // is measured is the assistant forward itself, as the CPU reference's "golden inputs" check does; the
    // end-to-end figures (next test) add the GPU target's own error to its inputs.
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
      for (const [which, buf, evicted] of [['keys', layer.k, layer.kEvicted], ['values', layer.v, layer.vEvicted]] as const) {
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
    const logitErr = maxAbsDiff(r.logits!, (await g64.tensor('draft.logits')).data);
    console.log(`assistant forward on the golden inputs of ${dir.split('/').pop()}: projected hidden NMSE ${hiddenNmse.toExponential(3)}, logits max abs ${logitErr.toExponential(3)}`);
    expect(hiddenNmse).toBeLessThanOrEqual(1e-8);
    expect(logitErr).toBeLessThanOrEqual(0.05);
    asst.destroy();
    target.destroy();
  });

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
    console.log(`vs float64 goldens: seed hidden NMSE ${seedNmse.toExponential(3)} (transformers f32: ${tfSeed.toExponential(3)}); draft hidden NMSE end to end ${e2e.toExponential(3)} (transformers f32: ${tfHidden.toExponential(3)}; logits max abs ${e2eLogits.toExponential(3)}, transformers f32: ${tfLogits.toExponential(3)}), from the golden seed ${fromSeed.toExponential(3)} (logits max abs ${seedLogits.toExponential(3)})`);
    expect(seedNmse).toBeLessThanOrEqual(tfSeed);
    expect(e2e).toBeLessThanOrEqual(tfHidden);
    expect(e2eLogits).toBeLessThanOrEqual(tfLogits);
    // The acceptance bound 1e-8 for the projected hidden state holds for the assistant forward on the golden
    // inputs (test above: 2.6e-13 / 1.3e-12); end to end, where its inputs carry the GPU target's f32 error,
    // it is not reached on lavapipe. Measured: seed (target's
    // post-norm hidden, last prompt row) NMSE 1.6e-8; projected hidden end to end 1.4e-7, from the golden seed
    // 2.6e-8 (with the previous prefill matmul, whose only difference is its summation order: 2.7e-8, 9.9e-8,
    // 1.7e-8; before the quantized matmuls used centred codes: 1.0e-7, 5.6e-7, 9.3e-8). The drafter itself is
    // not the cause: the float64 reference with f32 RMSNorm/RoPE (numerics 'transformers') fed golden seed +
    // golden K/V lands at 4e-13, but the state amplifies its inputs' error (seed NMSE x ~4; golden seed + that
    // reference's own K/V: 6.9e-9; its own seed (2.1e-8): 7.6e-8). transformers itself in float32 lands at
    // seed 1.8e-7 and projected hidden 4.5e-7 end to end: the engine must stay at least that close.
    // Held to two to four times the measured values so the gap stays visible and cannot grow unnoticed.
    expect(seedNmse).toBeLessThanOrEqual(6e-8);
    expect(e2e).toBeLessThanOrEqual(3e-7);
    expect(fromSeed).toBeLessThanOrEqual(6e-8);
    asst.destroy();
    target.destroy();
  });
});
