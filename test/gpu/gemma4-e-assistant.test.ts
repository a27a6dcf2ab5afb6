/**
 * The E-series assistant on the GPU (AssistantModel with the centroid head, src/model/gemma4/e-series/centroid-head-op.ts,
 * reading the donors' K/V of an ETargetModel) against gemma4-e-tiny: its draft tokens, the scored tokens of its
 * centroid head (transformers' order) and its logits against the float64 goldens (transformers' f32 run as the
 * yardstick), the assistant forward alone on the golden inputs, and the CPU reference (src/reference/gemma4/draft.ts) at
 * positions past the window wrap, where the sliding donor's ring and its evicted entry (the W + 1-th key) are read.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AssistantDescription, TargetDescription } from '../../src/format/model-description.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import { AssistantModel } from '../../src/model/gemma4/assistant.ts';
import { ETargetModel } from '../../src/model/gemma4/e-series/e-target.ts';
import type { GpuWeights } from '../../src/model/gpu-weights.ts';
import { openCheckpointDir } from '../../src/node/file-source.ts';
import {
  loadReferenceWeights,
  referenceDraft,
  referenceForward,
  type AssistantWeights,
  type TargetWeights,
} from '../../src/reference/index.ts';
import { GEMMA4_E_TINY, loadTransformersF32, maxAbsDiff, nmse, type Golden } from '../support/fixtures.ts';
import { fixtureOnGpu, type FixtureOnGpu } from './helpers/fixture-on-gpu.ts';

/** The family fixtures' acceptance bound on GPU f32 logits against float64 (as gemma4-e-golden.test.ts). */
const LOGIT_TOL = 0.05;
const OPTS = { maxContext: 64, maxBlock: 8, prefillChunk: 64, precision: 'f32' as const };

describe('GPU E-series assistant (centroid head, donors K/V) vs gemma4-e-tiny', () => {
  let fixture: FixtureOnGpu;
  let ctx: GpuContext;
  let golden: Golden;
  let tw: GpuWeights<TargetDescription>;
  let aw: GpuWeights<AssistantDescription>;
  let target: ETargetModel;
  let asst: AssistantModel;
  const g = async (name: string) => (await golden.tensor(name)).data;

  beforeAll(async () => {
    fixture = await fixtureOnGpu(GEMMA4_E_TINY);
    ({ ctx, golden, tw, aw } = fixture);
    target = new ETargetModel(ctx, tw, OPTS);
    asst = new AssistantModel(ctx, aw, target, 'hf');
  });
  afterAll(() => {
    asst?.destroy();
    target?.destroy();
    fixture?.destroy();
  });

  it('uploads the centroid head (16 centroids, top 4 of 32 tokens each) and reads the donors 5 and 4', () => {
    const ch = aw.centroidHead!;
    expect([ch.numCentroids, ch.topK, ch.orderingStride]).toEqual([16, 4, 1]);
    expect(ch.centroids.desc.outFeatures).toBe(16);
    // the last sliding (8) and last full (9) layers are KV-shared: the assistant reads their donors' caches
    expect(target.donors[8]).toBe(5);
    expect(target.donors[9]).toBe(4);
  });

  it('end to end: the golden draft tokens and scored tokens, logits within 0.05 and as close as transformers f32', async () => {
    const tf32 = await loadTransformersF32(GEMMA4_E_TINY);
    const P = golden.json.prompt.length;
    const H = target.desc.hidden;
    target.reset();
    const pre = await target.prefill(golden.json.prompt, { logits: 'last', finalHidden: true });
    expect(pre.argmax![0]).toBe(golden.json.bonus_token);
    expect(asst.position()).toBe(golden.json.draft.position_id);
    const seed = pre.finalHidden!.slice((P - 1) * H, P * H);
    const steps = golden.json.draft.tokens.length;
    const r = await asst.draft(golden.json.bonus_token, seed, steps, { capture: true });
    expect(r.tokens).toEqual(golden.json.draft.tokens);
    expect([...r.centroid!.selected]).toEqual([...(await g('draft.selected_tokens'))]);
    const err = {
      logits: maxAbsDiff(r.logits!, await g('draft.logits')), // incl. the min - 1 fill outside the scored tokens
      centroid: maxAbsDiff(r.centroid!.centroidLogits, await g('draft.centroid_logits')),
      hidden: nmse(r.hidden!, await g('draft.hidden')),
    };
    const tf = {
      logits: maxAbsDiff((await tf32.tensor('draft.logits')).data, await g('draft.logits')),
      centroid: maxAbsDiff((await tf32.tensor('draft.centroid_logits')).data, await g('draft.centroid_logits')),
      hidden: nmse((await tf32.tensor('draft.hidden')).data, await g('draft.hidden')),
    };
    console.log(
      `gemma4-e-tiny GPU f32 draft vs float64: tokens ${r.tokens.join(',')}; logits max abs ${err.logits.toExponential(3)} (transformers f32 ${tf.logits.toExponential(3)}), centroid logits ${err.centroid.toExponential(3)} (tf ${tf.centroid.toExponential(3)}), projected hidden NMSE ${err.hidden.toExponential(3)} (tf ${tf.hidden.toExponential(3)})`,
    );
    expect(err.logits, 'draft logits max abs').toBeLessThanOrEqual(LOGIT_TOL);
    for (const k of ['logits', 'centroid', 'hidden'] as const) expect(err[k], k).toBeLessThanOrEqual(tf[k]);
  });

  it('the assistant forward alone on the golden inputs (seed hidden, donors K/V): NMSE 1e-8, same tokens', async () => {
    // The donors' caches are overwritten with the golden shared K/V (rounded once to f32), so what is measured is
    // the assistant forward itself, as assistant.test.ts does for the dense assistant.
    const P = golden.json.prompt.length;
    target.reset();
    await target.prefill(golden.json.prompt, { logits: 'last' }); // sets the cache state (positions, ring base)
    const cache = target.cache;
    const W = cache.window;
    for (const [type, li] of [
      ['sliding', 5],
      ['full', 4],
    ] as const) {
      const { numKvHeads: kvh, headDim: d } = target.desc.layers[li];
      const layer = cache.layers[li];
      const rowBytes = kvh * d * 4;
      for (const [which, buf, evicted] of [
        ['keys', layer.k, layer.kEvicted],
        ['values', layer.v, layer.vEvicted],
      ] as const) {
        const t = await golden.tensor(`shared_kv.${type}_attention.${which}`); // [kv_heads, T, head_dim]
        expect(t.shape).toEqual([kvh, P, d]);
        for (let p = 0; p < P; p++) {
          const row = new Float32Array(kvh * d);
          for (let h = 0; h < kvh; h++) for (let i = 0; i < d; i++) row[h * d + i] = t.data[(h * P + p) * d + i];
          if (type === 'full') ctx.device.queue.writeBuffer(buf, p * rowBytes, row);
          else if (p >= P - W) ctx.device.queue.writeBuffer(buf, cache.slotOf(p) * rowBytes, row);
          else if (p === P - 1 - W) ctx.device.queue.writeBuffer(evicted, 0, row);
        }
      }
    }
    const seed = Float32Array.from(await g('draft.seed_hidden'));
    const r = await asst.draft(golden.json.bonus_token, seed, golden.json.draft.tokens.length, { capture: true });
    expect(r.tokens).toEqual(golden.json.draft.tokens);
    expect([...r.centroid!.selected]).toEqual([...(await g('draft.selected_tokens'))]);
    const e = {
      hidden: nmse(r.hidden!, await g('draft.hidden')),
      logits: nmse(r.logits!, await g('draft.logits')),
      centroid: nmse(r.centroid!.centroidLogits, await g('draft.centroid_logits')),
    };
    console.log(
      `gemma4-e-tiny assistant forward on the golden inputs: NMSE projected hidden ${e.hidden.toExponential(3)}, logits ${e.logits.toExponential(3)}, centroid logits ${e.centroid.toExponential(3)}`,
    );
    for (const [k, v] of Object.entries(e)) expect(v, k).toBeLessThanOrEqual(1e-8);
  });

  it('matches the CPU reference draft at positions 24, 31 and 40 (the ring wrapped, its evicted entry read)', async () => {
    // The GPU target decodes the greedy tokens; at each checked position the CPU reference (float64, numerics
    // 'exact') drafts from its own forward over the same sequence. Tokens and scored tokens must be equal where the
    // reference's top-2 gap exceeds twice the logit error bound; logits within 0.05.
    const t = await openCheckpointDir(path.join(GEMMA4_E_TINY, 'target'));
    const a = await openCheckpointDir(path.join(GEMMA4_E_TINY, 'assistant'));
    const rt: TargetWeights = await loadReferenceWeights(t.description as TargetDescription);
    const ra: AssistantWeights = await loadReferenceWeights(a.description as AssistantDescription);
    const H = target.desc.hidden;
    const V = target.desc.vocab;
    const prompt = golden.json.prompt;
    target.reset();
    const pre = await target.prefill(prompt, { logits: 'last', finalHidden: true });
    const seq = [...prompt];
    let bonus = pre.argmax![0];
    let seed = pre.finalHidden!.slice((prompt.length - 1) * H, prompt.length * H);
    const lines: string[] = [];
    for (const at of [24, 31, 40]) {
      while (seq.length < at) {
        const r = await target.step([bonus], { logits: 'argmax', finalHidden: true });
        target.commit(1);
        seq.push(bonus);
        bonus = r.argmax![0];
        seed = r.finalHidden!.slice(0, H);
      }
      const steps = 3;
      const gpu = await asst.draft(bonus, seed, steps, { capture: true });
      const fwd = referenceForward(rt, seq, { numerics: 'exact' });
      const ref = referenceDraft(rt, ra, {
        bonusToken: bonus,
        seedHidden: fwd.finalHidden.slice((seq.length - 1) * H, seq.length * H),
        positionId: seq.length,
        sharedKv: fwd.sharedKv,
        steps,
        numerics: 'exact',
      });
      const err = maxAbsDiff(gpu.logits!, ref.logits);
      const hidden = nmse(gpu.hidden!, ref.hidden);
      lines.push(
        `position ${at}: tokens ${gpu.tokens.join(',')} (reference ${ref.tokens.join(',')}), logits max abs ${err.toExponential(2)}, hidden NMSE ${hidden.toExponential(2)}`,
      );
      expect(err, `position ${at}: draft logits max abs`).toBeLessThanOrEqual(LOGIT_TOL);
      // Each step's token depends on the previous one: compare while the reference's choice is decided.
      for (let s = 0; s < steps; s++) {
        const sel = ref.centroid!.selected.length / steps;
        const row = [...ref.logits.subarray(s * V, (s + 1) * V)].sort((x, y) => y - x);
        if (row[0] - row[1] <= 2 * LOGIT_TOL) break;
        expect(gpu.tokens[s], `position ${at}, step ${s}`).toBe(ref.tokens[s]);
        expect(
          [...gpu.centroid!.selected.subarray(s * sel, (s + 1) * sel)],
          `position ${at}, step ${s}: scored`,
        ).toEqual([...ref.centroid!.selected.subarray(s * sel, (s + 1) * sel)]);
      }
    }
    console.log(`gemma4-e-tiny GPU vs CPU reference draft:\n  ${lines.join('\n  ')}`);
  });
});
