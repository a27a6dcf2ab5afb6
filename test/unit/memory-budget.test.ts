import { describe, expect, it } from 'vitest';
import { openCheckpoint } from '../../src/format/checkpoint.ts';
import type { AssistantDescription, TargetDescription } from '../../src/format/model-description.ts';
import { synthGeometry, syntheticCheckpoint } from '../../src/format/synthetic.ts';
import { uploadWeights } from '../../src/model/gpu-weights.ts';
import { gpuTensorsOf } from '../../src/model/gemma4/model-tensors.ts';
import { GpuError } from '../../src/gpu/errors.ts';
import { checkMemory, fmtBytes, planMemory } from '../../src/model/memory-budget.ts';
import { attentionScratchBytes } from '../../src/model/attention-op.ts';

const lavapipe = { maxBufferSize: 4294967295, maxStorageBufferBindingSize: 134217728 };
const open = async (p: 'tiny' | '12b' | 'e2b-tiny' | '26b-a4b-tiny') => {
  const pair = syntheticCheckpoint(synthGeometry(p));
  return {
    t: (await openCheckpoint(pair.target)).description as TargetDescription,
    a: (await openCheckpoint(pair.assistant!)).description as AssistantDescription,
  };
};

// Refusals (over budget, oversize buffers) are in bad-input.test.ts.
describe('memory plan', () => {
  it('tiny: weights are the tensor bytes (rounded per buffer), caches follow the ring/linear layout', async () => {
    const { t } = await open('tiny');
    const o = { maxContext: 128, maxBlock: 8, prefillChunk: 64 };
    const plan = planMemory(t, o, lavapipe);
    const refs = gpuTensorsOf(t);
    expect(plan.weights).toBe(refs.reduce((a, r) => a + Math.max(16, Math.ceil(r.byteLength / 4) * 4), 0));
    // 10 sliding layers: 16 window slots of 2 x 64 floats + 8 staging rows; 2 full: 128 rows of 1 x 128 + 1 staging row; K and V
    expect(plan.cache).toBe(2 * 4 * (10 * (16 + 8) * 2 * 64 + 2 * (128 + 1) * 128));
    expect(plan.total).toBe(plan.weights + plan.cache + plan.workspace);
    expect(plan.oversize).toEqual([]);
    expect(checkMemory(plan, plan.total)).toBe(plan);
  });

  it('weights match, buffer for buffer, what uploadWeights allocates when it splits tensors by rows', async () => {
    // Dense, E-series (per-layer inputs, per-layer table, centroid head) and MoE (router, experts, the router
    // norm the upload computes) targets and assistants. Until the plan and the upload shared modelTensors, the
    // plan left out the E-series' per-layer weights and the MoE router, experts and router norm.
    // A recording stand-in for a device with tiny limits: every tensor over 4 KiB gets split.
    const limits = { maxBufferSize: 6000, maxStorageBufferBindingSize: 4096 };
    const sizes: number[] = [];
    (globalThis as any).GPUBufferUsage ??= {
      STORAGE: 0x80,
      COPY_SRC: 0x4,
      COPY_DST: 0x8,
      UNIFORM: 0x40,
      MAP_READ: 0x1,
    };
    const device = {
      limits,
      createBuffer: ({ size }: { size: number }) => {
        sizes.push(size);
        return { size, destroy() {} };
      },
      queue: { writeBuffer() {} },
      pushErrorScope() {},
      popErrorScope: async () => null,
    } as unknown as GPUDevice;
    for (const preset of ['tiny', 'e2b-tiny', '26b-a4b-tiny'] as const) {
      const { t, a } = await open(preset);
      for (const d of [t, a]) {
        sizes.length = 0;
        await uploadWeights(device, d, undefined, undefined, { layout: 'mlx' });
        const plan = planMemory(d, { maxContext: 64, maxBlock: 4, prefillChunk: 16 }, limits);
        expect(plan.weights, `${preset} ${d.role}`).toBe(sizes.reduce((x, y) => x + y, 0));
        expect(Math.max(...sizes)).toBeLessThanOrEqual(4096);
      }
      // the family's own tensors are among them
      const names = gpuTensorsOf(t).map((r) => r.name);
      const own = { tiny: /q_proj/, 'e2b-tiny': /per_layer/, '26b-a4b-tiny': /experts/ }[preset];
      expect(names.some((n) => own.test(n))).toBe(true);
    }
  });

  it('a plan in the k-major layout counts its rewrite: the largest tensor part, held twice while copied', async () => {
    const { t } = await open('12b');
    const o = { maxContext: 1024, maxBlock: 4, prefillChunk: 64 };
    const kMajor = planMemory(t, { ...o, layout: 'k-major' }, lavapipe);
    // lavapipe's 128 MiB bindings: the embedding's codes [262144, 3840] 4-bit split into parts of 69905 rows
    // (134217728 / 1920 bytes a row), 134217600 bytes each, the largest part of any linear
    expect(kMajor.rewrite).toBe(Math.floor(134217728 / 1920) * 1920);
    expect(planMemory(t, { ...o, layout: 'mlx' }, lavapipe).rewrite).toBe(0);
    expect(planMemory(t, o, lavapipe).rewrite).toBe(0);
    const refused = (() => {
      try {
        checkMemory(kMajor, kMajor.total);
      } catch (e) {
        return e as Error;
      }
    })();
    expect(refused).toBeInstanceOf(GpuError);
    expect(refused?.message).toMatch(
      /, plus 0\.13 GB while it rewrites its largest tensor part into the k-major layout, but the memory budget is /,
    );
    expect(checkMemory(kMajor, kMajor.total + kMajor.rewrite)).toBe(kMajor);
  });

  it('workspace counts the attention scratch as target.ts and assistant.ts size it (attentionScratchBytes)', async () => {
    const { t, a } = await open('tiny');
    const o = { maxContext: 4096, maxBlock: 8, prefillChunk: 64 };
    const widths = (d: TargetDescription | AssistantDescription) => ({
      heads: Math.max(...d.layers.map((l) => l.numHeads)),
      qWidth: Math.max(...d.layers.map((l) => l.numHeads * l.headDim)),
    });
    const total = (b: { scores: number; stats: number; partial: number }) => b.scores + b.stats + b.partial;
    // target.ts: prefill rows (R = 64) in one segment, step rows (maxBlock) in up to SEG_MAX
    const target = attentionScratchBytes({
      ...widths(t),
      maxKeys: Math.max(t.window, o.maxContext),
      prefillRows: 64,
      stepRows: 8,
    });
    // at a long context the scores ([64 rows, heads, 4096 keys] x 2) are the largest buffer of all
    const plan = planMemory(t, o, lavapipe);
    expect(plan.largest.bytes).toBe(target.scores);
    expect(plan.largest.what).toMatch(/^attention scores of the target/);
    // a binding limit just under it refuses that buffer, and only it, before anything is allocated
    const tight = planMemory(t, o, { ...lavapipe, maxStorageBufferBindingSize: target.scores - 4 });
    expect(tight.oversize.map((x) => x.bytes)).toEqual([target.scores]);
    // assistant.ts: one query row over the target's caches. Its estimate does not depend on the
    // context, so its share of the workspace grows with the context exactly as its scratch does.
    const share = (maxContext: number) =>
      planMemory(t, { ...o, maxContext }, lavapipe, a).workspace -
      planMemory(t, { ...o, maxContext }, lavapipe).workspace;
    const asst = (maxContext: number) =>
      total(
        attentionScratchBytes({
          ...widths(a),
          maxKeys: Math.max(maxContext, t.window + 1),
          prefillRows: 0,
          stepRows: 1,
        }),
      );
    expect(share(2 * o.maxContext) - share(o.maxContext)).toBe(asst(2 * o.maxContext) - asst(o.maxContext));
    expect(share(o.maxContext)).toBeGreaterThan(asst(o.maxContext));
  });

  it('12b: the embedding is split by rows to fit a 128 MiB binding; totals match docs/MODEL.md section 1', async () => {
    const { t, a } = await open('12b');
    const plan = planMemory(t, { maxContext: 8192, maxBlock: 8, prefillChunk: 64 }, lavapipe, a);
    expect(plan.models).toEqual(['gemma4_unified', 'gemma4_unified_assistant']);
    expect(plan.oversize).toEqual([]);
    expect(plan.largest.bytes).toBeLessThanOrEqual(lavapipe.maxStorageBufferBindingSize);
    // the assistant's 4-bit embedding rows are 512 bytes: 262144 of them fill a binding exactly
    expect(plan.largest).toEqual({ what: 'model.embed_tokens.weight[0:262144]', bytes: 134217728 });
    // the target's rows are 1920 bytes: 69905 per part
    expect(planMemory(t, { maxContext: 8192, maxBlock: 8, prefillChunk: 64 }, lavapipe).largest.what).toBe(
      'language_model.model.embed_tokens.weight[0:69905]',
    );
    // the published 12B's 8-bit MLP projections (the preset's per-module entries): 6.94 GB with them at 4 bits
    expect(fmtBytes(plan.weights)).toBe('11.18 GB');
    // 40 sliding x 1024 slots x 8 x 256 + 8 full x 8192 rows x 1 x 512 floats, K and V (+ staging)
    expect(plan.cache).toBeGreaterThan(2 * 4 * (40 * 1024 * 2048 + 8 * 8192 * 512));
    expect(plan.cache).toBeLessThan(2 * 4 * (40 * 1032 * 2048 + 8 * 8193 * 512) + 1);
  });
});
