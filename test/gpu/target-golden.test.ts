import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import {
  TINY_A_F64,
  loadGolden,
  loadTransformersF32,
  maxAbsDiff,
  nmse,
  nmseTransport,
  tinyTarget,
  type Golden,
} from '../support/fixtures.ts';
import { uploadWeights } from '../../src/model/gpu-weights.ts';
import { TargetModel } from '../../src/model/gemma4/dense/dense-target.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import type { TargetDescription } from '../../src/format/model-description.ts';

describe('GPU f32 target forward vs transformers float64 goldens (tiny-a)', () => {
  let ctx: GpuContext;
  let golden: Golden;
  let model: TargetModel;
  beforeAll(async () => {
    ctx = await testGpu();
    golden = await loadGolden();
    const ck = await tinyTarget();
    const weights = await uploadWeights(ctx.device, ck.description as TargetDescription);
    model = new TargetModel(ctx, weights, { maxContext: 128, maxBlock: 8, prefillChunk: 64, precision: 'f32' });
  });
  afterAll(() => ctx?.destroy());

  it('prefill logits and every act.* tensor match the shared goldens, as closely as transformers in f32 does the float64 ones', async () => {
    // The yardstick is transformers' own float32 run (tools/make_f32_yardstick.py): the next test requires
    // the engine to be at least as close to the float64 goldens (tiny-a-f64) as that run is. The shared
    // goldens are F32 and carry transformers' f32 RMSNorm/RoPE noise, so against them the same requirement
    // becomes, by the triangle inequality, the yardstick plus their own distance to float64 (computed here
    // from the fixtures): logits max abs 7.6e-3 + 2.9e-3 (measured: 2.1e-3), act.* NMSE nmseTransport.
    const g64 = await loadGolden(TINY_A_F64);
    const tf32 = await loadTransformersF32();
    model.reset();
    const r = await model.prefill(golden.json.prompt, { logits: 'all', captures: 'all' });
    const ref = await golden.tensor('logits');
    const truth = (await g64.tensor('logits')).data;
    const logitBound = maxAbsDiff((await tf32.tensor('logits')).data, truth) + maxAbsDiff(ref.data, truth);
    const err = maxAbsDiff(r.logits!, ref.data);
    expect(err, `logits max abs vs the shared goldens (bound ${logitBound.toExponential(2)})`).toBeLessThanOrEqual(
      logitBound,
    );
    // Same argmax wherever the golden top-1/top-2 gap exceeds twice that bound (neither logit can move
    // by more than the bound, so their order cannot flip).
    const V = ref.shape[1];
    for (let t = 0; t < ref.shape[0]; t++) {
      const row = Array.from(ref.data.subarray(t * V, (t + 1) * V));
      const sorted = [...row].sort((a, b) => b - a);
      if (sorted[0] - sorted[1] > 2 * logitBound) expect(r.argmax![t], `position ${t}`).toBe(row.indexOf(sorted[0]));
    }
    const L = model.desc.layers.length;
    const names = [
      ...Array.from({ length: L }, (_, i) => [`attn.${i}`, `mlp.${i}`, `layer.${i}`]).flat(),
      'final_norm',
    ];
    const worst: Record<string, number> = {};
    for (const n of names) {
      const g = (await golden.tensor(`act.${n}`)).data;
      const t = (await g64.tensor(`act.${n}`)).data;
      const bound = nmseTransport(nmse((await tf32.tensor(`act.${n}`)).data, t), t, g);
      const e = nmse(r.captures.get(n)!, g);
      worst[n] = e;
      expect(e, `act.${n} (bound ${bound.toExponential(2)})`).toBeLessThanOrEqual(bound);
    }
    const top = Object.entries(worst)
      .sort((a, b) => b[1] - a[1])
      .slice(0, 3);
    console.log(
      `logits max abs err ${err.toExponential(3)} (bound ${logitBound.toExponential(3)}); worst act NMSE ${top.map(([k, v]) => `${k} ${v.toExponential(2)}`).join(', ')}`,
    );
  });

  it('every act.* tensor and the logits at least as close to the float64 goldens (tiny-a-f64) as transformers in f32', async () => {
    // tiny-a-f64 carries no f32 noise (transformers' f32 RMSNorm/RoPE/softmax patched out, stored as F64; the
    // float64 reference matches it to ~1e-11), so NMSE against it is the engine's own error. The bound of
    // every tensor is transformers' own code run with the model in float32 (tools/make_f32_yardstick.py,
    // test/fixtures/tiny-a-f64/transformers-f32.safetensors): what mainstream f32 arithmetic reaches on this
    // model, tensor by tensor. On 30 of the 37 act.* tensors that is below the acceptance level 1e-8, which
    // it therefore enforces there; on the seven deepest (act.attn.9 - 11, mlp.10 - 11, layer.11, final_norm:
    // 1.6e-8 to 5.4e-8) transformers itself is over 1e-8: this random 12-layer model amplifies every f32
    // rounding about 3x per layer (NMSE), chaotically (a change of summation order in the prefill matmul
    // alone moved act.attn.11 between 1.1e-8 and 5.5e-8), so 1e-8 there is beyond what f32 arithmetic
    // guarantees. Measured on lavapipe: act.attn.10 1.43e-8, act.attn.11 1.80e-8 (transformers: 4.7e-8,
    // 5.4e-8), largest engine / transformers ratio 0.53; logits max abs 3.9e-3 (transformers: 7.6e-3).
    const g64 = await loadGolden(TINY_A_F64);
    const tf32 = await loadTransformersF32();
    model.reset();
    const r = await model.prefill(g64.json.prompt, { logits: 'all', captures: 'all' });
    const goldLogits = (await g64.tensor('logits')).data;
    const err = maxAbsDiff(r.logits!, goldLogits);
    const tfErr = maxAbsDiff((await tf32.tensor('logits')).data, goldLogits);
    const L = model.desc.layers.length;
    const names = [
      ...Array.from({ length: L }, (_, i) => [`attn.${i}`, `mlp.${i}`, `layer.${i}`]).flat(),
      'final_norm',
    ];
    const tfLogitsNmse = nmse((await tf32.tensor('logits')).data, goldLogits);
    const e: Record<string, number> = {};
    const tf: Record<string, number> = {};
    for (const n of names) {
      const gold = (await g64.tensor(`act.${n}`)).data;
      e[n] = nmse(r.captures.get(n)!, gold);
      tf[n] = nmse((await tf32.tensor(`act.${n}`)).data, gold);
    }
    const worstOf = (k: string) =>
      Object.entries(e)
        .filter(([n]) => n.startsWith(k))
        .sort((a, b) => b[1] - a[1])[0];
    const over = names.filter((n) => e[n] > 1e-8);
    const ratio = Math.max(...names.map((n) => e[n] / tf[n]));
    console.log(
      `vs float64 goldens: logits max abs err ${err.toExponential(3)} (transformers f32: ${tfErr.toExponential(3)}); worst act NMSE: ${['attn', 'mlp', 'layer', 'final_norm'].map((k) => `${worstOf(k)[0]} ${worstOf(k)[1].toExponential(2)} (transformers f32: ${tf[worstOf(k)[0]].toExponential(2)})`).join(', ')}; over 1e-8: ${over.map((n) => `${n} ${e[n].toExponential(2)}`).join(', ') || 'none'} (transformers f32: ${names.filter((n) => tf[n] > 1e-8).length} of ${names.length}); largest engine/transformers-f32 NMSE ratio ${ratio.toFixed(2)}`,
    );
    for (const n of names)
      expect(e[n], `act.${n} vs transformers f32 ${tf[n].toExponential(2)}`).toBeLessThanOrEqual(tf[n]);
    expect(err, 'logits max abs').toBeLessThanOrEqual(tfErr);
    expect(
      nmse(r.logits!, goldLogits),
      `logits NMSE vs transformers f32 ${tfLogitsNmse.toExponential(2)}`,
    ).toBeLessThanOrEqual(tfLogitsNmse);
  });

  it("teacher-forced per layer (each layer fed the float64 goldens' input rows): each layer adds no more than one layer of transformers in f32", async () => {
    // Where the error of the full forward comes from: fed the golden act.layer.{i-1} (layer 0: the embedding
    // the engine computes), layer i's outputs are compared with the golden act.attn.i / act.mlp.i / act.layer.i.
    // This measures what each layer adds, without what it inherits; the full forward's 1.4e-8 / 1.8e-8 at
    // layers 10 / 11 is the amplification of such per-layer errors through the stack.
    // Yardstick: transformers' f32 run at layer 0, the one layer whose input is exact in that run too (the
    // embedding), so its NMSE is what one layer of mainstream f32 arithmetic adds on this model: act.attn.0
    // 6.4e-13, act.mlp.0 1.3e-12, act.layer.0 7.7e-13 (from the fixture). Every layer's attn / mlp / layer
    // output is held to the layer-0 figure of its kind. Measured on lavapipe: at most 3.8e-13 (mlp.0).
    const g64 = await loadGolden(TINY_A_F64);
    const tf32 = await loadTransformersF32();
    const L = model.desc.layers.length;
    const inputs: Float32Array[] = [];
    for (let i = 1; i < L; i++) inputs[i] = Float32Array.from((await g64.tensor(`act.layer.${i - 1}`)).data);
    const H = model.desc.hidden;
    model.reset();
    const r = await model.prefill(g64.json.prompt, {
      logits: 'none',
      captures: 'all',
      layerInputs: (layer, p, M) => (layer === 0 ? undefined : inputs[layer].slice(p * H, (p + M) * H)),
    });
    const e: [string, number][] = [];
    for (let i = 0; i < L; i++)
      for (const k of ['attn', 'mlp', 'layer'])
        e.push([`${k}.${i}`, nmse(r.captures.get(`${k}.${i}`)!, (await g64.tensor(`act.${k}.${i}`)).data)]);
    const worst = [...e].sort((a, b) => b[1] - a[1]);
    console.log(
      `teacher-forced per layer vs float64 goldens: worst act NMSE ${worst
        .slice(0, 3)
        .map(([n, v]) => `${n} ${v.toExponential(2)}`)
        .join(', ')}; layer 11 ${e
        .filter(([n]) => n.endsWith('.11'))
        .map(([n, v]) => `${n} ${v.toExponential(2)}`)
        .join(', ')}`,
    );
    const perLayer: Record<string, number> = {};
    for (const k of ['attn', 'mlp', 'layer'])
      perLayer[k] = nmse((await tf32.tensor(`act.${k}.0`)).data, (await g64.tensor(`act.${k}.0`)).data);
    for (const [n, v] of e)
      expect(
        v,
        `act.${n} vs transformers f32 at layer 0 ${perLayer[n.split('.')[0]].toExponential(2)}`,
      ).toBeLessThanOrEqual(perLayer[n.split('.')[0]]);
  });

  it('reproduces the 24 greedy tokens by chain decoding after prefill', async () => {
    model.reset();
    const pre = await model.prefill(golden.json.prompt, { logits: 'last' });
    const out = [pre.argmax![0]];
    while (out.length < golden.json.greedy.length) {
      const r = await model.decode(out[out.length - 1]);
      out.push(r.argmax![0]);
    }
    expect(out).toEqual(golden.json.greedy);
  });
});
