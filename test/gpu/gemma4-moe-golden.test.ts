/**
 * The MoE GPU target (src/model/gemma4/moe/moe-target.ts) in f32 against the float64 transformers goldens of
 * gemma4-moe-tiny (8 experts, top-4, a dense MLP beside them, 8-bit router; window 16, so the 24-token prompt and
 * the 16 greedy tokens wrap the ring). The family's acceptance: logits within 0.05, greedy tokens equal where the
 * golden top-1 gap allows (the smallest is 0.0013), and the activations transformers' own f32 run has
 * (act.layer.i, act.final_norm, act.router_scores.i) at least as close to float64 as that run.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TargetDescription } from '../../src/format/model-description.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import { ETargetModel } from '../../src/model/gemma4/e-series/e-target.ts';
import { MoETargetModel } from '../../src/model/gemma4/moe/moe-target.ts';
import { uploadWeights, type GpuWeights } from '../../src/model/gpu-weights.ts';
import { TargetModel } from '../../src/model/gemma4/dense/dense-target.ts';
import { openCheckpointDir } from '../../src/node/file-source.ts';
import { loadReferenceWeights, referenceForward } from '../../src/reference/index.ts';
import {
  GEMMA4_MOE_TINY,
  loadGolden,
  loadTransformersF32,
  maxAbsDiff,
  nmse,
  type Golden,
} from '../support/fixtures.ts';
import { testGpu } from './gpu-context.ts';

const LOGIT_TOL = 0.05;
/** The goldens' router convention (transformers: (norm(h1) * scale) * root, softmax over E, top-k, renormalise). */
const OPTS = {
  maxContext: 64,
  maxBlock: 8,
  prefillChunk: 64,
  precision: 'f32' as const,
  router: 'transformers' as const,
};

/** Rows whose golden top-1 / top-2 gap exceeds `margin`: there the argmax must agree. */
function decided(gold: Float64Array, V: number, margin: number): { row: number; top: number }[] {
  const out: { row: number; top: number }[] = [];
  for (let t = 0; t < gold.length / V; t++) {
    const row = Array.from(gold.subarray(t * V, (t + 1) * V));
    const sorted = [...row].sort((a, b) => b - a);
    if (sorted[0] - sorted[1] > margin) out.push({ row: t, top: row.indexOf(sorted[0]) });
  }
  return out;
}

describe('GPU f32 MoE target vs transformers float64 goldens (gemma4-moe-tiny)', () => {
  let ctx: GpuContext;
  let golden: Golden;
  let weights: GpuWeights<TargetDescription>;
  let model: MoETargetModel;
  beforeAll(async () => {
    ctx = await testGpu();
    golden = await loadGolden(GEMMA4_MOE_TINY);
    const ck = await openCheckpointDir(path.join(GEMMA4_MOE_TINY, 'target'));
    weights = await uploadWeights(ctx.device, ck.description as TargetDescription);
    model = new MoETargetModel(ctx, weights, OPTS);
  });
  afterAll(() => {
    model?.destroy();
    weights?.destroy();
    ctx?.destroy();
  });

  it('uploads every layer MoE block (stacked experts, 8-bit router); the dense and E-series engines refuse it', () => {
    for (const l of weights.layers) {
      expect(l.moe?.numExperts).toBe(8);
      expect(l.moe?.topK).toBe(4);
      expect(l.moe?.gate.weight.rows).toBe(8); // one stacked tensor of 8 experts
      expect(l.moe?.routerProj.desc).toMatchObject({ kind: 'affine', bits: 8 });
    }
    expect(() => new TargetModel(ctx, weights, OPTS)).toThrow(
      /mixture-of-experts blocks \(8 experts, top 4\), which the dense Gemma 4 engine does not run/,
    );
    expect(() => new ETargetModel(ctx, weights, OPTS)).toThrow(/mixture-of-experts targets/);
  });

  it('prefill logits within 0.05 of float64; layers, router scores and final norm as close as transformers in f32', async () => {
    const tf32 = await loadTransformersF32(GEMMA4_MOE_TINY);
    model.reset();
    const r = await model.prefill(golden.json.prompt, { logits: 'all', captures: 'all' });
    const gold = (await golden.tensor('logits')).data;
    const err = maxAbsDiff(r.logits!, gold);
    const tfErr = maxAbsDiff((await tf32.tensor('logits')).data, gold);
    const L = model.desc.layers.length;
    const pairs: [string, string][] = [['final_norm', 'final_norm']];
    for (let i = 0; i < L; i++) pairs.push([`layer.${i}`, `layer.${i}`], [`router.${i}`, `router_scores.${i}`]);
    const e: Record<string, number> = {};
    const tf: Record<string, number> = {};
    for (const [ours, theirs] of pairs) {
      const g = (await golden.tensor(`act.${theirs}`)).data;
      e[ours] = nmse(r.captures.get(ours)!, g);
      tf[ours] = nmse((await tf32.tensor(`act.${theirs}`)).data, g);
    }
    // the experts' and dense MLP's outputs, which the yardstick lacks: float64 alone
    const extra: Record<string, number> = {};
    for (let i = 0; i < L; i++)
      for (const k of ['attn', 'mlp', 'experts'])
        extra[`${k}.${i}`] = nmse(r.captures.get(`${k}.${i}`)!, (await golden.tensor(`act.${k}.${i}`)).data);
    const worstExtra = Object.entries(extra).sort((a, b) => b[1] - a[1])[0];
    const ratio = Math.max(...pairs.map(([n]) => e[n] / tf[n]));
    console.log(
      `gemma4-moe-tiny GPU f32 vs float64: logits max abs ${err.toExponential(3)} (transformers f32 ${tfErr.toExponential(3)}); layer.5 NMSE ${e['layer.5'].toExponential(2)} (tf ${tf['layer.5'].toExponential(2)}), router.5 ${e['router.5'].toExponential(2)} (tf ${tf['router.5'].toExponential(2)}), final_norm ${e.final_norm.toExponential(2)} (tf ${tf.final_norm.toExponential(2)}); largest engine/transformers NMSE ratio ${ratio.toFixed(2)}; worst attn/mlp/experts NMSE ${worstExtra[0]} ${worstExtra[1].toExponential(2)}`,
    );
    expect(err, 'logits max abs').toBeLessThanOrEqual(LOGIT_TOL);
    for (const [n] of pairs)
      expect(e[n], `${n} vs transformers f32 ${tf[n].toExponential(2)}`).toBeLessThanOrEqual(tf[n]);
    for (const [n, v] of Object.entries(extra)) expect(v, `act.${n}`).toBeLessThan(1e-8);
    const V = model.desc.vocab;
    const rows = decided(gold, V, 2 * err);
    expect(rows.length).toBeGreaterThan(golden.json.prompt.length / 2);
    for (const { row, top } of rows) expect(r.argmax![row], `position ${row}`).toBe(top);
  });

  it('the router conventions choose the golden experts; only MLX bf16 scale product moves scores past close gaps', async () => {
    // Teacher-forced (each layer fed the float64 input rows), so every layer's router sees the golden h1 up to f32.
    const L = model.desc.layers.length;
    const H = model.desc.hidden;
    const T = golden.json.prompt.length;
    const k = 4;
    const inputs: Float32Array[] = [];
    for (let i = 1; i < L; i++) inputs[i] = Float32Array.from((await golden.tensor(`act.layer.${i - 1}`)).data);
    const rowsOf = (a: ArrayLike<number>) =>
      Array.from({ length: T }, (_, t) => Array.from(a).slice(t * k, (t + 1) * k));
    const lines: string[] = [];
    const configs = [
      { router: 'transformers', routerScale: 'transformers' },
      { router: 'mlx', routerScale: 'transformers' },
      { router: 'mlx', routerScale: 'mlx-bf16' },
    ] as const;
    for (const cfg of configs) {
      const m = new MoETargetModel(ctx, weights, { ...OPTS, ...cfg });
      const r = await m.prefill(golden.json.prompt, {
        logits: 'all',
        captures: 'all',
        layerInputs: (layer, p, M) => (layer === 0 ? undefined : inputs[layer].slice(p * H, (p + M) * H)),
      });
      m.destroy();
      let scoreErr = 0;
      let weightErr = 0;
      const changed: string[] = [];
      for (let i = 0; i < L; i++) {
        const c = r.captures.get(`router_ids.${i}`)!;
        const ids = rowsOf(new Uint32Array(c.buffer, c.byteOffset, c.length));
        const gold = rowsOf((await golden.tensor(`act.router_experts.${i}`)).data);
        const scores = r.captures.get(`router.${i}`)!;
        const gs = (await golden.tensor(`act.router_scores.${i}`)).data;
        const e = maxAbsDiff(scores, gs);
        scoreErr = Math.max(scoreErr, e);
        const w = rowsOf(r.captures.get(`router_weights.${i}`)!);
        const gw = rowsOf((await golden.tensor(`act.router_weights.${i}`)).data);
        for (let t = 0; t < T; t++) {
          const same = [...ids[t]].sort().join() === [...gold[t]].sort().join();
          // the golden gap between the k-th and the (k+1)-th score of this row
          const sorted = Array.from(gs.subarray(t * 8, (t + 1) * 8)).sort((a, b) => b - a);
          if (!same) {
            changed.push(`layer ${i} row ${t} (golden gap ${(sorted[k - 1] - sorted[k]).toExponential(1)})`);
            expect(sorted[k - 1] - sorted[k], `${cfg.routerScale} layer ${i} row ${t}: a clear gap`).toBeLessThan(
              2 * e,
            );
            continue;
          }
          // torch.topk's order (descending score) and the weights matched by expert id
          if (cfg.routerScale === 'transformers') expect(ids[t], `layer ${i} row ${t}`).toEqual(gold[t]);
          ids[t].forEach((x, j) => (weightErr = Math.max(weightErr, Math.abs(w[t][j] - gw[t][gold[t].indexOf(x)]))));
        }
      }
      const logitErr = maxAbsDiff(r.logits!, (await golden.tensor('logits')).data);
      lines.push(
        `order ${cfg.router}, scale ${cfg.routerScale}: scores max abs ${scoreErr.toExponential(2)}, weights (same experts) ${weightErr.toExponential(2)}, logits ${logitErr.toExponential(2)}; other experts on ${changed.length} of ${L * T} rows${changed.length ? `: ${changed.join(', ')}` : ''}`,
      );
      if (cfg.routerScale === 'transformers') {
        expect(changed).toEqual([]);
        expect(scoreErr).toBeLessThan(1e-4);
        expect(weightErr).toBeLessThan(1e-5);
        expect(logitErr).toBeLessThanOrEqual(LOGIT_TOL);
      } else {
        // bf16(scale x root) is off scale x root by up to 2^-9 relative: the scores move by ~1e-2 here
        expect(scoreErr).toBeGreaterThan(1e-3);
        expect(weightErr).toBeLessThan(2e-2);
      }
    }
    console.log(`gemma4-moe-tiny router conventions (teacher-forced):\n  ${lines.join('\n  ')}`);
  });

  it("the default (MLX) router against its CPU twin: float64 reference with order 'mlx', scaleProduct 'mlx-bf16'", async () => {
    // The goldens follow transformers' router; MLX's convention (bf16 weight product) is checked against the float64
    // reference run with the same convention: same experts on every row and layer, logits within 0.05.
    const tw = await loadReferenceWeights(model.desc);
    const ref = referenceForward(tw, golden.json.prompt, {
      captures: true,
      numerics: 'exact',
      router: { order: 'mlx', scaleProduct: 'mlx-bf16' },
    });
    const m = new MoETargetModel(ctx, weights, { ...OPTS, router: 'mlx' });
    const r = await m.prefill(golden.json.prompt, { logits: 'all', captures: 'all' });
    m.destroy();
    const err = maxAbsDiff(r.logits!, ref.logits);
    const T = golden.json.prompt.length;
    for (let i = 0; i < model.desc.layers.length; i++) {
      const c = r.captures.get(`router_ids.${i}`)!;
      const ids = new Uint32Array(c.buffer, c.byteOffset, c.length);
      const want = ref.acts!.get(`act.router_experts.${i}`)!;
      for (let t = 0; t < T; t++)
        expect([...ids.subarray(t * 4, t * 4 + 4)].sort(), `layer ${i} row ${t}`).toEqual(
          [...want.subarray(t * 4, t * 4 + 4)].sort(),
        );
    }
    console.log(
      `gemma4-moe-tiny GPU f32 (MLX router) vs float64 reference (MLX router): logits max abs ${err.toExponential(3)}`,
    );
    expect(err).toBeLessThanOrEqual(LOGIT_TOL);
  });

  it('cached greedy decode: every step whose golden top-1 gap allows picks the golden token', async () => {
    // Teacher-forced on the golden tokens, so one close call cannot derail the steps after it.
    const greedy = golden.json.greedy;
    const V = model.desc.vocab;
    const gl = (await golden.tensor('greedy_logits')).data;
    model.reset();
    const pre = await model.prefill(golden.json.prompt, { logits: 'last' });
    const rows = [pre.logits!];
    for (let i = 0; i + 1 < greedy.length; i++) rows.push((await model.decode(greedy[i])).logits!);
    const all = new Float32Array(greedy.length * V);
    rows.forEach((r, i) => all.set(r, i * V));
    const err = maxAbsDiff(all, gl);
    const ok = decided(gl, V, 2 * err);
    let argmaxEqual = 0;
    for (let t = 0; t < greedy.length; t++) {
      const row = all.subarray(t * V, (t + 1) * V);
      if (row.indexOf(Math.max(...row)) === greedy[t]) argmaxEqual++;
    }
    console.log(
      `gemma4-moe-tiny cached decode: greedy_logits max abs ${err.toExponential(3)}; ${ok.length} of ${greedy.length} steps decided by the gap, argmax equals the golden token at ${argmaxEqual} of ${greedy.length}`,
    );
    expect(err).toBeLessThanOrEqual(LOGIT_TOL);
    expect(ok.length).toBeGreaterThanOrEqual(greedy.length - 2);
    for (const { row } of ok) {
      const r = all.subarray(row * V, (row + 1) * V);
      expect(r.indexOf(Math.max(...r)), `step ${row}`).toBe(greedy[row]);
    }
  });
});
