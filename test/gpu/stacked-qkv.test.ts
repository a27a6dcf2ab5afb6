/**
 * A target layer's q, k and v projections are uploaded stacked in one buffer (GpuStackedQkv), the three
 * linears being views of it, and on GPUs a decode step or verify block runs them as ONE matmul_coop.wgsl
 * dispatch (ops.stackedQkvMatmul) whose segments the q/k/v norms read as views. Neither may move a bit:
 * a forward over stacked weights gives the logits and captures of a forward over the three separate
 * uploads, for the GPU kernel class (one dispatch) and the software class (three matmuls binding views),
 * in f32 and bf16, for a chain step and a verify block, and under a policy that runs MLX's kernels (per
 * projection, on the views).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import { tokens } from './tiny-model.ts';
import { tinyTarget } from '../support/fixtures.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import { forceKernelClass, type KernelClass } from '../../src/gpu/kernel-class.ts';
import type { TargetDescription } from '../../src/format/model-description.ts';
import { uploadWeights, type GpuWeights } from '../../src/model/gpu-weights.ts';
import type { Precision } from '../../src/model/target.ts';
import { TargetModel } from '../../src/model/gemma4/dense/dense-target.ts';
import { policyByName } from '../../src/model/policy-registry.ts';
import { stackedQkvBlocks } from '../../src/model/ops.ts';

describe('stacked q, k, v projections', () => {
  let ctx: GpuContext;
  let stacked: GpuWeights<TargetDescription>;
  let apart: GpuWeights<TargetDescription>;
  beforeAll(async () => {
    ctx = await testGpu();
    const d = (await tinyTarget()).description as TargetDescription;
    stacked = await uploadWeights(ctx.device, d);
    apart = await uploadWeights(ctx.device, d, undefined, undefined, { stackQkv: false });
  });
  afterAll(() => {
    forceKernelClass(undefined);
    stacked?.destroy();
    apart?.destroy();
    ctx?.destroy();
  });

  it('uploads every target layer stacked, q, k and v as views of one buffer per tensor', () => {
    for (const [i, l] of stacked.layers.entries()) {
      const qkv = l.qkv;
      expect(qkv, `layer ${i}`).toBeDefined();
      const withV = l.desc.vProj !== null;
      expect(qkv!.rows).toEqual(
        withV
          ? [l.qProj.desc.outFeatures, l.kProj!.desc.outFeatures, l.vProj!.desc.outFeatures]
          : [l.qProj.desc.outFeatures, l.kProj!.desc.outFeatures],
      );
      const whole = qkv!.lin.weight.parts[0].buffer;
      const views = [l.qProj, l.kProj!, ...(withV ? [l.vProj!] : [])].map((x) => x.weight.parts[0]);
      expect(views.every((p) => p.buffer === whole)).toBe(true);
      // back to back, in order, covering the whole buffer
      expect(views.map((p) => p.view!.offset)).toEqual(
        views.map((_, j) => views.slice(0, j).reduce((a, p) => a + p.view!.size, 0)),
      );
      expect(views.reduce((a, p) => a + p.view!.size, 0)).toBe(whole.size);
      expect(apart.layers[i].qkv).toBeUndefined();
    }
  });

  it('places each projection of M rows as matmul_coop.wgsl y_index does (256-byte offsets)', () => {
    expect(stackedQkvBlocks(3, [256, 128, 128])).toEqual([
      { offset: 0, floats: 768 },
      { offset: 768, floats: 384 },
      { offset: 1152, floats: 384 },
    ]);
    expect(stackedQkvBlocks(1, [100, 30, 30])).toEqual([
      { offset: 0, floats: 100 },
      { offset: 128, floats: 30 },
      { offset: 192, floats: 30 },
    ]);
  });

  /** Logits of a chain step and a verify block of 4 after a 20-token prompt (the ring wrapped), and dispatches per step. */
  async function run(
    w: GpuWeights<TargetDescription>,
    cls: KernelClass,
    precision: Precision,
    policy?: string,
  ): Promise<{ logits: Float32Array[]; dispatches: number }> {
    forceKernelClass(cls);
    const model = new TargetModel(ctx, w, { maxContext: 64, maxBlock: 8, prefillChunk: 32, precision });
    forceKernelClass(undefined);
    try {
      const o = { logits: 'all' as const, ...(policy ? { policy: policyByName(policy) } : {}) };
      await model.prefill(tokens(20, 5), { logits: 'none' });
      const d0 = model.stats.dispatches;
      const one = await model.step(tokens(1, 6), o);
      const dispatches = model.stats.dispatches - d0;
      model.commit(1);
      const block = await model.step(tokens(4, 7), o);
      return { logits: [one.logits!, block.logits!], dispatches };
    } finally {
      model.destroy();
    }
  }

  const bytes = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
  // llvmpipe compiles matmul_coop.wgsl's pipelines in minutes when its shader cache is cold (a fresh CI machine):
  // the stacked linears' segment constants make pipelines of their own.
  const COLD_COMPILE_MS = 900_000;

  for (const precision of ['f32', 'bf16'] as const) {
    it(
      `GPU kernels, ${precision}: one dispatch for q, k, v, the bytes of three`,
      async () => {
        const a = await run(stacked, 'gpu', precision);
        const b = await run(apart, 'gpu', precision);
        a.logits.forEach((x, i) => expect(bytes(x).equals(bytes(b.logits[i])), `logits ${i}`).toBe(true));
        // two dispatches fewer per layer with a v projection, one per k_eq_v layer
        const saved = stacked.layers.reduce((n, l) => n + (l.desc.vProj ? 2 : 1), 0);
        expect(b.dispatches - a.dispatches).toBe(saved);
      },
      COLD_COMPILE_MS,
    );
  }

  it(
    'software kernels and an MLX policy: the views give the bytes of the separate buffers',
    async () => {
      for (const [cls, policy] of [
        ['software', undefined],
        ['gpu', 'mlx-m3plus'],
      ] as const) {
        const a = await run(stacked, cls, 'f32', policy);
        const b = await run(apart, cls, 'f32', policy);
        a.logits.forEach((x, i) =>
          expect(bytes(x).equals(bytes(b.logits[i])), `${cls} ${policy} logits ${i}`).toBe(true),
        );
        expect(a.dispatches).toBe(b.dispatches); // the three matmuls run apart
      }
    },
    COLD_COMPILE_MS,
  );
});
