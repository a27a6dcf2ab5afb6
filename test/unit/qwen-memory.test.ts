import { describe, expect, it } from 'vitest';
import { openQwen35Checkpoint } from '../../src/format/qwen3_5/index.ts';
import { qwenSynthGeometry, syntheticQwen } from '../../src/format/qwen3_5/synthetic.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import { GpuError } from '../../src/gpu/errors.ts';
import { checkMemory } from '../../src/model/memory-budget.ts';
import { planQwenMemory } from '../../src/model/qwen3_5/memory.ts';
import { QwenTargetModel } from '../../src/model/qwen3_5/target.ts';
import { type QwenGpuWeights, qwenGpuTensors } from '../../src/model/qwen3_5/weights.ts';

/**
 * The Qwen3.5 memory plan (src/model/qwen3_5/memory.ts): the verify block's per-token recurrent states are counted
 * (1.2 GB at K = 8 for the Qwen3.6-27B geometry), weights are the uploaded tensors, and QwenTargetModel refuses
 * a buffer over the adapter's limits or a total over the budget before allocating anything.
 */
const H200 = { maxBufferSize: 2 ** 36, maxStorageBufferBindingSize: 2 ** 32 - 4 };
const lavapipe = { maxBufferSize: 4294967295, maxStorageBufferBindingSize: 134217728 };
const open = async (p: 'qwen36-27b' | 'qwen-tiny') =>
  (await openQwen35Checkpoint(syntheticQwen(qwenSynthGeometry(p)).target, p)).description;
const round = (n: number) => Math.max(16, Math.ceil(n / 4) * 4);

describe('Qwen3.5 memory plan', () => {
  it('qwen36-27b at K = 8: staged states 1.21 GB, weights = the uploaded tensors (small vectors widened to f32)', async () => {
    const d = await open('qwen36-27b');
    const o = { maxContext: 4096, maxBlock: 8, prefillChunk: 512 };
    const plan = planQwenMemory(d, o, H200);
    const widened = new Set(
      d.layers.flatMap((l) => (l.type === 'linear' ? [l.conv, l.dtBias, l.aLog, l.gatedNorm] : [])),
    );
    const weights = qwenGpuTensors(d).reduce(
      (a, t) => a + (widened.has(t) ? round(t.shape.reduce((x, y) => x * y, 1) * 4) : round(t.byteLength)),
      0,
    );
    expect(plan.weights).toBe(weights);
    const staged = 48 * 8 * 48 * 128 * 128 * 4;
    expect(staged / 1e9).toBeCloseTo(1.21, 2);
    // 16 full layers + the MTP head: K and V of 4096 x 4 x 256 f32; 48 linear layers: windows, S, raw rows, staged
    const kv = 17 * 2 * 4096 * 4 * 256 * 4;
    const lin = 48 * (2 * 3 * 10240 * 4 + 48 * 128 * 128 * 4 + 8 * 10240 * 4);
    expect(plan.cache).toBe(kv + lin + staged);
    expect(plan.oversize).toEqual([]);
    expect(plan.total).toBe(plan.weights + plan.cache + plan.workspace);
    expect(() => checkMemory(plan, plan.total - 1)).toThrow(GpuError);
    expect(() => checkMemory(plan, plan.total - 1)).toThrow(/qwen3_5 needs .* but the memory budget is/);
    // on an adapter with lavapipe's 128 MiB binding limit, the prefill attention scores of 512 rows x 24 heads x
    // 4096 keys cannot be one buffer: named before allocation
    const tight = planQwenMemory(d, o, lavapipe);
    expect(tight.oversize.map((x) => x.what)).toEqual([expect.stringMatching(/^attention scores/)]);
  });

  it('QwenTargetModel refuses before allocating: a buffer over the adapter limit, a total over the budget', async () => {
    const d = await open('qwen-tiny');
    // Nothing is allocated before the check: a device with only limits is enough to reach it
    const ctx = { device: { limits: lavapipe } } as unknown as GpuContext;
    const weights = { desc: d } as QwenGpuWeights;
    const opts = { maxContext: 1 << 22, maxBlock: 8, prefillChunk: 16, precision: 'f32' as const };
    expect(() => new QwenTargetModel(ctx, weights, opts)).toThrow(
      /K cache of layer 2 \(full, 4194304 positions x 2 x 64\) needs 2147483648 bytes in one buffer, over this adapter's maxStorageBufferBindingSize/,
    );
    const small = { ...opts, maxContext: 64, memoryBudget: 1e6 };
    expect(() => new QwenTargetModel(ctx, weights, small)).toThrow(/needs .* but the memory budget is 1\.0 MB/);
  });
});
