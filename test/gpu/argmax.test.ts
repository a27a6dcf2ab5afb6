/**
 * argmax.wgsl through op.argmax against a CPU scan (the first index of the maximum, NaN never wins, an
 * all-NaN row gives 0), for a row short enough for one workgroup and for vocabularies cut into ranges
 * (`parts` + `merge`): ties across ranges, NaNs, the maximum at either end of the row.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import { KernelCache } from '../../src/gpu/kernels.ts';
import { Recorder } from '../../src/gpu/recorder.ts';
import { readBytes, storageBuffer, uploadBuffer } from '../../src/gpu/buffers.ts';
import * as op from '../../src/model/ops.ts';

function cpuArgmax(row: Float32Array): number {
  let best = -1;
  for (let i = 0; i < row.length; i++) if (!Number.isNaN(row[i]) && (best < 0 || row[i] > row[best])) best = i;
  return Math.max(best, 0);
}

/** Rows of V logits: random; a maximum tied at two far-apart indices; NaNs around a maximum at the end; all NaN. */
function rows(V: number): Float32Array {
  let s = V;
  const next = () => {
    s = (s * 1103515245 + 12345) >>> 0;
    return s / 2 ** 32 - 0.5;
  };
  const x = new Float32Array(4 * V).map(() => next() * 20);
  x[V + 3] = 50; // row 1: a tie between index 3 and a later range
  x[V + V - 7] = 50;
  for (let i = 0; i < V; i += 97) x[2 * V + i] = Number.NaN; // row 2: NaNs, the maximum last
  x[2 * V + V - 1] = 60;
  x.fill(Number.NaN, 3 * V, 4 * V); // row 3: all NaN
  return x;
}

describe('argmax (argmax.wgsl)', () => {
  let ctx: GpuContext;
  beforeAll(async () => {
    ctx = await testGpu();
  });
  afterAll(() => ctx?.destroy());

  // 1000: one workgroup per row; 70001: 18 ranges of 4096; 1048576 + 4097: ranges widened so that a row
  // has at most 256 of them (merge's workgroup).
  for (const V of [1000, 70001, 1048576 + 4097]) {
    it(`V = ${V}: the CPU scan's index for every row`, async () => {
      const device = ctx.device;
      const x = rows(V);
      const logits = uploadBuffer(device, x, 'logits');
      const ids = storageBuffer(device, 16, 'ids');
      const rec = new Recorder(device, new KernelCache(device), 'argmax-test');
      op.argmax(rec, logits, ids, 4, V);
      rec.submit();
      const got = Array.from(new Uint32Array((await readBytes(device, ids, 16)).buffer));
      const want = [0, 1, 2, 3].map((m) => cpuArgmax(x.subarray(m * V, (m + 1) * V)));
      expect(want.slice(1)).toEqual([3, V - 1, 0]);
      expect(got).toEqual(want);
      logits.destroy();
      ids.destroy();
    });
  }
});
