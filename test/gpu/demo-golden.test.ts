/**
 * The page's demo model (public/demo: a 12-layer model of Gemma 4's structure trained by tools/demo, q4 variant)
 * against its own transformers goldens (test/fixtures/demo, compacted by tools/demo/extract_goldens.py from the
 * device run's float64 goldens and transformers' float32 run), as the tiny-a tests check the fixture:
 * logits within what transformers reaches in f32, the float64 greedy tokens, and MTP with the demo's assistant
 * emitting exactly classic's output. The acceptance counters are printed, not bounded here (a property of the
 * trained weights, not of the engine): 24 of 27 drafts on the golden prompt, whose continuation loops; the page's
 * e2e test (test/e2e/demo.test.ts) bounds the suggested prompt's acceptance by the demo model's
 * target of 40%.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import {
  DEMO,
  DEMO_F64,
  demoAssistant,
  demoTarget,
  loadGolden,
  loadTransformersF32,
  maxAbsDiff,
  nmse,
  type Golden,
} from '../support/fixtures.ts';
import { uploadWeights, type GpuWeights } from '../../src/model/gpu-weights.ts';
import { TargetModel } from '../../src/model/gemma4/dense/dense-target.ts';
import { AssistantModel } from '../../src/model/gemma4/assistant.ts';
import { assistantSource, generateClassic, generateMtp, roundEmitted } from '../../src/model/generate.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import type { AssistantDescription, TargetDescription } from '../../src/format/model-description.ts';

describe('demo model (public/demo) vs its transformers goldens (test/fixtures/demo)', () => {
  let ctx: GpuContext;
  let golden: Golden;
  let tw: GpuWeights<TargetDescription>;
  let aw: GpuWeights<AssistantDescription>;
  let model: TargetModel;
  beforeAll(async () => {
    ctx = await testGpu();
    golden = await loadGolden(DEMO_F64);
    tw = await uploadWeights(ctx.device, (await demoTarget()).description as TargetDescription);
    aw = await uploadWeights(ctx.device, (await demoAssistant()).description as AssistantDescription);
    model = new TargetModel(ctx, tw, { maxContext: 128, maxBlock: 8, prefillChunk: 64, precision: 'f32' });
  });
  afterAll(() => ctx?.destroy());

  it("the goldens are those of the shipped files (golden.json's checkpoint sha256)", () => {
    const sums = golden.json.checkpoint!;
    expect(Object.keys(sums).sort()).toEqual(['assistant/model.safetensors', 'target/model.safetensors']);
    for (const [file, sha] of Object.entries(sums))
      expect(
        createHash('sha256')
          .update(readFileSync(path.join(DEMO, file)))
          .digest('hex'),
        file,
      ).toBe(sha);
  });

  it('prefill logits and act.final_norm at least as close to the float64 goldens as transformers in f32', async () => {
    // The demo's goldens keep 25 of the 48 prompt rows (every 4th before the 32-slot ring wraps, every one from
    // position 31 on) and act.final_norm; the yardstick is transformers' own float32 run on the same rows
    // (tools/make_f32_yardstick.py): logits max abs 6.5e-6, NMSE 1.5e-13; act.final_norm NMSE 4.8e-13. A trained
    // model amplifies f32 roundings far less than the random tiny-a (logits max abs 7.6e-3 there).
    const tf32 = await loadTransformersF32(DEMO_F64);
    const rows = Array.from((await golden.tensor('logits_rows')).data);
    const gold = await golden.tensor('logits');
    const V = gold.shape[1];
    model.reset();
    const r = await model.prefill(golden.json.prompt, { logits: 'all', captures: new Set(['final_norm']) });
    expect(r.logits!.length).toBe(golden.json.prompt.length * V);
    const mine = new Float64Array(rows.length * V);
    rows.forEach((t, i) => mine.set(r.logits!.subarray(t * V, (t + 1) * V), i * V));
    const yard = (await tf32.tensor('logits')).data;
    const err = maxAbsDiff(mine, gold.data);
    const tfErr = maxAbsDiff(yard, gold.data);
    const e = nmse(mine, gold.data);
    const tfE = nmse(yard, gold.data);
    const fnGold = (await golden.tensor('act.final_norm')).data;
    const fnE = nmse(r.captures.get('final_norm')!, fnGold);
    const fnTf = nmse((await tf32.tensor('act.final_norm')).data, fnGold);
    console.log(
      `demo vs float64 goldens (${rows.length} rows): logits max abs ${err.toExponential(3)} (transformers f32 ${tfErr.toExponential(3)}), NMSE ${e.toExponential(2)} (${tfE.toExponential(2)}); act.final_norm NMSE ${fnE.toExponential(2)} (${fnTf.toExponential(2)})`,
    );
    expect(err, 'logits max abs').toBeLessThanOrEqual(tfErr);
    expect(e, 'logits NMSE').toBeLessThanOrEqual(tfE);
    expect(fnE, 'act.final_norm NMSE').toBeLessThanOrEqual(fnTf);
    // Same argmax wherever the golden top-1/top-2 gap exceeds twice the bound (the order cannot flip).
    let checked = 0;
    rows.forEach((t, i) => {
      const row = Array.from(gold.data.subarray(i * V, (i + 1) * V));
      const sorted = [...row].sort((a, b) => b - a);
      if (sorted[0] - sorted[1] > 2 * tfErr) {
        checked++;
        expect(r.argmax![t], `position ${t}`).toBe(row.indexOf(sorted[0]));
      }
    });
    expect(checked).toBe(rows.length);
  });

  it('reproduces the 32 float64 greedy tokens by chain decoding after prefill', async () => {
    model.reset();
    const pre = await model.prefill(golden.json.prompt, { logits: 'last' });
    const out = [pre.argmax![0]];
    while (out.length < golden.json.greedy.length) out.push((await model.decode(out[out.length - 1])).argmax![0]);
    expect(out).toEqual(golden.json.greedy);
  });

  it("MTP with the demo's assistant (K = 4, both draft positions) emits classic's bytes; first drafts = goldens' (hf)", async () => {
    const prompt = golden.json.prompt;
    const eosIds = model.desc.eosIds;
    const classic = await generateClassic(model, prompt, { maxNew: 32, eosIds });
    expect(classic.tokens).toEqual(golden.json.greedy);
    for (const pos of ['hf', 'mlxcel'] as const) {
      const asst = new AssistantModel(ctx, aw, model, pos);
      const mtp = await generateMtp(model, assistantSource(asst), prompt, 4, {
        maxNew: 32,
        eosIds,
        draftPosition: pos,
      });
      asst.destroy();
      expect(mtp.tokens, pos).toEqual(classic.tokens);
      expect(mtp.sha256, pos).toBe(classic.sha256);
      const c = mtp.counters!;
      const rounds = mtp.rounds!;
      expect(rounds.length).toBe(c.rounds);
      expect(c.drafted).toBe(3 * c.rounds);
      expect(rounds.reduce((a, r) => a + r.accepted, 0)).toBe(c.accepted);
      expect([mtp.tokens[0], ...rounds.flatMap(roundEmitted)].slice(0, mtp.tokens.length)).toEqual(mtp.tokens);
      if (pos === 'hf') {
        expect(rounds[0].pos).toBe(golden.json.draft.position_id + 1);
        expect(rounds[0].drafts).toEqual(golden.json.draft.tokens);
      }
      console.log(
        `demo MTP K=4 (${pos}) on the golden prompt: sha256 ${mtp.sha256.slice(0, 16)}… = classic; rounds ${c.rounds}, drafted ${c.drafted}, accepted ${c.accepted} (${(100 * c.acceptanceRate).toFixed(1)}%), histogram ${c.acceptedHistogram.join(',')}`,
      );
    }
  });
});
