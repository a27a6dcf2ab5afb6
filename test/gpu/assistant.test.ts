import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import { tinyModel, tinyWeights } from './tiny-model.ts';
import { loadGolden, maxAbsDiff, nmse, tinyAssistant } from '../support/fixtures.ts';
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
});
