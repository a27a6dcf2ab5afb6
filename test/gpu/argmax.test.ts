/**
 * argmax.wgsl through op.argmax against a CPU scan (the first index of the maximum; a row that holds any NaN gives
 * NAN_ROW_ID), for a row short enough for one workgroup and for vocabularies cut into ranges (`parts` + `merge`):
 * ties across ranges, NaNs (everywhere, or one in the last range while the others hold the maximum), the maximum at
 * either end of the row.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import { KernelCache } from '../../src/gpu/kernels.ts';
import { Recorder } from '../../src/gpu/recorder.ts';
import { readBytes, storageBuffer, uploadBuffer } from '../../src/gpu/buffers.ts';
import * as op from '../../src/model/ops.ts';
import { NAN_ROW_ID } from '../../src/model/nan-row.ts';

function cpuArgmax(row: Float32Array): number {
  if (row.some(Number.isNaN)) return NAN_ROW_ID;
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
  return best;
}

const ROWS = 5;
/**
 * Rows of V logits: random; a maximum tied at two far-apart indices; NaNs around a maximum at the end; all NaN; one
 * NaN at the last index, after a maximum at index 0 (a NaN must win over the other ranges' candidates).
 */
function rows(V: number): Float32Array {
  let s = V;
  const next = () => {
    s = (s * 1103515245 + 12345) >>> 0;
    return s / 2 ** 32 - 0.5;
  };
  const x = new Float32Array(ROWS * V).map(() => next() * 20);
  x[V + 3] = 50; // row 1: a tie between index 3 and a later range
  x[V + V - 7] = 50;
  for (let i = 0; i < V; i += 97) x[2 * V + i] = Number.NaN; // row 2: NaNs, the maximum last
  x[2 * V + V - 1] = 60;
  x.fill(Number.NaN, 3 * V, 4 * V); // row 3: all NaN
  x[4 * V] = 70; // row 4: the maximum first, one NaN last
  x[5 * V - 1] = Number.NaN;
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
      const ids = storageBuffer(device, 4 * ROWS, 'ids');
      const rec = new Recorder(device, new KernelCache(device), 'argmax-test');
      op.argmax(rec, logits, ids, ROWS, V);
      rec.submit();
      const got = Array.from(new Uint32Array((await readBytes(device, ids, 4 * ROWS)).buffer));
      const want = [...Array(ROWS).keys()].map((m) => cpuArgmax(x.subarray(m * V, (m + 1) * V)));
      expect(want.slice(1)).toEqual([3, NAN_ROW_ID, NAN_ROW_ID, NAN_ROW_ID]);
      expect(got).toEqual(want);
      logits.destroy();
      ids.destroy();
    });
  }
});
