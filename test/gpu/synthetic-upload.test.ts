import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import { openCheckpoint } from '../../src/format/checkpoint.ts';
import type { TargetDescription } from '../../src/format/model-description.ts';
import { synthGeometry, syntheticCheckpoint } from '../../src/format/synthetic.ts';
import { readBytes } from '../../src/gpu/buffers.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import { uploadWeights } from '../../src/model/gpu-weights.ts';
import { checkMemory, planMemory } from '../../src/model/memory-budget.ts';

describe('streaming upload of a synthetic checkpoint (Dawn)', () => {
  let ctx: GpuContext;
  beforeAll(async () => {
    ctx = await testGpu();
  });
  afterAll(() => ctx?.destroy());

  it('the planned checkpoint fits, uploads from virtual files, and the GPU holds the file bytes', async () => {
    const d = (await openCheckpoint(syntheticCheckpoint(synthGeometry('tiny'), { seed: 9 }).target))
      .description as TargetDescription;
    const limits = {
      maxBufferSize: ctx.device.limits.maxBufferSize,
      maxStorageBufferBindingSize: ctx.device.limits.maxStorageBufferBindingSize,
    };
    checkMemory(planMemory(d, { maxContext: 256, maxBlock: 8, prefillChunk: 64 }, limits), 1e9);
    const progress: number[] = [];
    const w = await uploadWeights(ctx.device, d, (p) => progress.push(p.done));
    try {
      expect(progress[progress.length - 1]).toBe(w.bytes);
      for (const t of [d.embed.kind === 'affine' ? d.embed.scales : d.embed.weight, d.layers[5].down.weight]) {
        const gpu = t === d.layers[5].down.weight ? w.layers[5].down.weight : w.embed.scales!;
        expect(gpu.parts).toHaveLength(1);
        const bytes = await readBytes(ctx.device, gpu.parts[0].buffer, t.byteLength);
        expect(Buffer.compare(bytes, await t.file.read(t.offset, t.byteLength)), t.name).toBe(0);
      }
    } finally {
      w.destroy();
    }
  });
});
