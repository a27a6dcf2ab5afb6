/**
 * The E-series GPU target (src/model/gemma4/e-series/e-target.ts) in f32 against the float64 transformers goldens of
 * gemma4-e-tiny (per-layer embeddings, 4 KV-shared layers reading their donors 5 and 4, double-wide MLPs on them;
 * window 16, so the 24-token prompt and the 16 greedy tokens wrap the ring). The family's acceptance: logits within
 * 0.05, greedy tokens equal, and every activation the yardstick has (transformers' own f32 run,
 * transformers-f32.safetensors: act.ple_inputs, act.layer.i, act.final_norm) at least as close to float64.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GpuContext } from '../../src/gpu/device.ts';
import type { TargetDescription } from '../../src/format/model-description.ts';
import { ETargetModel } from '../../src/model/gemma4/e-series/e-target.ts';
import { uploadWeights, type GpuWeights } from '../../src/model/gpu-weights.ts';
import { TargetModel } from '../../src/model/gemma4/dense/dense-target.ts';
import { TensorUploader } from '../../src/gpu/upload.ts';
import { openCheckpointDir } from '../../src/node/file-source.ts';
import { GEMMA4_E_TINY, loadGolden, loadTransformersF32, maxAbsDiff, nmse, type Golden } from '../support/fixtures.ts';
import { testGpu } from './gpu-context.ts';

const LOGIT_TOL = 0.05;

describe('GPU f32 E-series target vs transformers float64 goldens (gemma4-e-tiny)', () => {
  let ctx: GpuContext;
  let golden: Golden;
  let weights: GpuWeights<TargetDescription>;
  let model: ETargetModel;
  beforeAll(async () => {
    ctx = await testGpu();
    golden = await loadGolden(GEMMA4_E_TINY);
    const ck = await openCheckpointDir(path.join(GEMMA4_E_TINY, 'target'));
    weights = await uploadWeights(ctx.device, ck.description as TargetDescription);
    model = new ETargetModel(ctx, weights, { maxContext: 64, maxBlock: 8, prefillChunk: 64, precision: 'f32' });
  });
  afterAll(() => {
    model?.destroy();
    weights?.destroy();
    ctx?.destroy();
  });

  it('uploads the per-layer embeddings, and only the first L - N layers own caches', () => {
    expect(weights.perLayer?.width).toBe(64);
    expect(weights.layers.every((l) => l.perLayerInput)).toBe(true);
    expect(model.donors).toEqual([0, 1, 2, 3, 4, 5, 5, 5, 5, 4]);
    expect(model.cache.layers.length).toBe(6);
    // the double-wide MLPs of the shared layers
    expect(weights.layers.map((l) => l.gate.desc.outFeatures)).toEqual([
      128, 128, 128, 128, 128, 128, 256, 256, 256, 256,
    ]);
  });

  it('the dense engine refuses the E-series target instead of running it as a dense model', () => {
    expect(
      () => new TargetModel(ctx, weights, { maxContext: 64, maxBlock: 8, prefillChunk: 64, precision: 'f32' }),
    ).toThrow(
      /per-layer embeddings \(P = 64\), 4 KV-shared layers, double-wide MLP, which the dense Gemma 4 engine does not run/,
    );
  });

  it('prefill logits within 0.05 of float64, every yardstick activation as close as transformers in f32', async () => {
    const tf32 = await loadTransformersF32(GEMMA4_E_TINY);
    model.reset();
    const r = await model.prefill(golden.json.prompt, { logits: 'all', captures: 'all' });
    const gold = (await golden.tensor('logits')).data;
    const err = maxAbsDiff(r.logits!, gold);
    const tfErr = maxAbsDiff((await tf32.tensor('logits')).data, gold);
    const L = model.desc.layers.length;
    const names = ['ple_inputs', ...Array.from({ length: L }, (_, i) => `layer.${i}`), 'final_norm'];
    const e: Record<string, number> = {};
    const tf: Record<string, number> = {};
    for (const n of names) {
      const g = (await golden.tensor(`act.${n}`)).data;
      e[n] = nmse(r.captures.get(n)!, g);
      tf[n] = nmse((await tf32.tensor(`act.${n}`)).data, g);
    }
    // activations the yardstick lacks, compared with float64 alone (reported, and bounded loosely below)
    const extra: Record<string, number> = {};
    for (let i = 0; i < L; i++)
      for (const k of ['attn', 'mlp', 'ple'])
        extra[`${k}.${i}`] = nmse(r.captures.get(`${k}.${i}`)!, (await golden.tensor(`act.${k}.${i}`)).data);
    const worstExtra = Object.entries(extra).sort((a, b) => b[1] - a[1])[0];
    const ratio = Math.max(...names.map((n) => e[n] / tf[n]));
    console.log(
      `gemma4-e-tiny GPU f32 vs float64: logits max abs ${err.toExponential(3)} (transformers f32 ${tfErr.toExponential(3)}); ple_inputs NMSE ${e.ple_inputs.toExponential(2)} (tf ${tf.ple_inputs.toExponential(2)}), layer.9 ${e['layer.9'].toExponential(2)} (tf ${tf['layer.9'].toExponential(2)}), final_norm ${e.final_norm.toExponential(2)} (tf ${tf.final_norm.toExponential(2)}); largest engine/transformers NMSE ratio ${ratio.toFixed(2)}; worst attn/mlp/ple NMSE ${worstExtra[0]} ${worstExtra[1].toExponential(2)}`,
    );
    expect(err, 'logits max abs').toBeLessThanOrEqual(LOGIT_TOL);
    for (const n of names)
      expect(e[n], `act.${n} vs transformers f32 ${tf[n].toExponential(2)}`).toBeLessThanOrEqual(tf[n]);
    for (const [n, v] of Object.entries(extra)) expect(v, `act.${n}`).toBeLessThan(1e-8);
    // same argmax wherever the golden top-1 / top-2 gap exceeds twice the error
    const V = model.desc.vocab;
    for (let t = 0; t < golden.json.prompt.length; t++) {
      const row = Array.from(gold.subarray(t * V, (t + 1) * V));
      const sorted = [...row].sort((a, b) => b - a);
      if (sorted[0] - sorted[1] > 2 * err) expect(r.argmax![t], `position ${t}`).toBe(row.indexOf(sorted[0]));
    }
  });

  it('teacher-forced per layer (each layer fed the float64 input rows): no layer adds more than transformers f32 at layer 0', async () => {
    // As target-golden.test.ts: fed the golden act.layer.{i-1}, layer i's output shows what that layer adds (its
    // per-layer input and, on shared layers, the donor's K/V computed from forced inputs too). Yardstick: the
    // NMSE of transformers' f32 act.layer.0, the one layer whose input is exact in that run.
    const tf32 = await loadTransformersF32(GEMMA4_E_TINY);
    const L = model.desc.layers.length;
    const H = model.desc.hidden;
    const inputs: Float32Array[] = [];
    for (let i = 1; i < L; i++) inputs[i] = Float32Array.from((await golden.tensor(`act.layer.${i - 1}`)).data);
    model.reset();
    const r = await model.prefill(golden.json.prompt, {
      logits: 'none',
      captures: 'all',
      layerInputs: (layer, p, M) => (layer === 0 ? undefined : inputs[layer].slice(p * H, (p + M) * H)),
    });
    const bound = nmse((await tf32.tensor('act.layer.0')).data, (await golden.tensor('act.layer.0')).data);
    const e = await Promise.all(
      Array.from({ length: L }, async (_, i) =>
        nmse(r.captures.get(`layer.${i}`)!, (await golden.tensor(`act.layer.${i}`)).data),
      ),
    );
    console.log(
      `gemma4-e-tiny teacher-forced act.layer.i NMSE: worst ${Math.max(...e).toExponential(2)} (layer ${e.indexOf(Math.max(...e))}); transformers f32 layer 0: ${bound.toExponential(2)}`,
    );
    e.forEach((v, i) => expect(v, `act.layer.${i}`).toBeLessThanOrEqual(bound));
  });

  it('reproduces the 16 greedy tokens by chain decoding past the window, logits within 0.05 of float64', async () => {
    model.reset();
    const P = golden.json.prompt.length;
    const pre = await model.prefill(golden.json.prompt, { logits: 'last' });
    const full = (await golden.tensor('logits_full')).data;
    const V = model.desc.vocab;
    const out = [pre.argmax![0]];
    let worst = maxAbsDiff(pre.logits!, full.subarray((P - 1) * V, P * V));
    while (out.length < golden.json.greedy.length) {
      const r = await model.decode(out[out.length - 1]);
      const row = P + out.length - 1;
      worst = Math.max(worst, maxAbsDiff(r.logits!, full.subarray(row * V, (row + 1) * V)));
      out.push(r.argmax![0]);
    }
    console.log(
      `gemma4-e-tiny chain decode: greedy ${out.join(',')}; logits max abs vs logits_full ${worst.toExponential(3)}`,
    );
    expect(out).toEqual(golden.json.greedy);
    expect(worst).toBeLessThanOrEqual(LOGIT_TOL);
  });

  it('the per-layer table split by row ranges (as a large table is, to fit bindings) gives the same bytes', async () => {
    // E2B's table is [262144, 8960]: 1.2 GB at 4 bits, more than a browser binding holds, so TensorUploader
    // splits it by rows and embed.wgsl runs once per part. Here the tiny table is split by hand into 6 parts.
    const desc = weights.desc.perLayer!.table;
    if (desc.kind !== 'affine') throw new Error('gemma4-e-tiny: expected a quantized per-layer table');
    const up = new TensorUploader(ctx.device, 0);
    const split = {
      desc,
      weight: await up.upload(desc.weight, 100),
      scales: await up.upload(desc.scales, 100),
      biases: await up.upload(desc.biases, 100),
    };
    expect(split.weight.parts.map((p) => p.rows)).toEqual([100, 100, 100, 100, 100, 12]);
    const splitWeights = { ...weights, perLayer: { ...weights.perLayer!, table: split } };
    const m = new ETargetModel(ctx, splitWeights, { maxContext: 64, maxBlock: 8, prefillChunk: 64, precision: 'f32' });
    try {
      model.reset();
      const a = await model.prefill(golden.json.prompt, { logits: 'all', captures: new Set(['ple_inputs']) });
      const b = await m.prefill(golden.json.prompt, { logits: 'all', captures: new Set(['ple_inputs']) });
      const bytes = (x: Float32Array) => Buffer.from(x.buffer, x.byteOffset, x.byteLength);
      expect(bytes(b.captures.get('ple_inputs')!).equals(bytes(a.captures.get('ple_inputs')!))).toBe(true);
      expect(bytes(b.logits!).equals(bytes(a.logits!))).toBe(true);
    } finally {
      m.destroy();
      up.buffers.forEach((x) => x.destroy());
    }
  });

  it('chunked prefill (chunks of 5, the donors committing after their readers) gives the same greedy tokens', async () => {
    const chunked = new ETargetModel(ctx, weights, { maxContext: 64, maxBlock: 8, prefillChunk: 5, precision: 'f32' });
    try {
      const P = golden.json.prompt.length;
      const pre = await chunked.prefill(golden.json.prompt, { logits: 'all' });
      const gold = (await golden.tensor('logits')).data;
      const err = maxAbsDiff(pre.logits!, gold);
      expect(err, 'chunked prefill logits max abs').toBeLessThanOrEqual(LOGIT_TOL);
      expect(chunked.cache.state).toEqual({ nextPos: P, base: P });
      const out = [pre.argmax![P - 1]];
      while (out.length < golden.json.greedy.length) out.push((await chunked.decode(out[out.length - 1])).argmax![0]);
      expect(out).toEqual(golden.json.greedy);
    } finally {
      chunked.destroy();
    }
  });
});
