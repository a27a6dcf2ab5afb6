/**
 * The decode step's norm and x-sum kernels as a chain token runs them on the 12B geometry (hidden 3840,
 * MLP 15360, group size 64), each replayed back to back in one timed pass (GpuTimer), so that kernel
 * variants can be compared on a device in alternating processes, as scripts/attention-microbench.ts:
 *
 *   for d in base variant base variant; do
 *     RINGSIDE_SHADERS=dir/$d node --import tsx --import ./scripts/wgsl-hooks.mjs scripts/norm-microbench.ts
 *   done
 *
 * Why not the bench's profile: it timestamps each dispatch alone, at the adapter's timestamp granularity
 * (about 0.1 ms per dispatch on the H200 through Dawn), coarser than these kernels.
 */
import { nodeGpuContext } from '../src/cli/node-gpu.ts';
import { GpuTimer } from '../src/bench/timer.ts';
import { storageBuffer, uploadBuffer } from '../src/gpu/buffers.ts';
import { syntheticAffine } from '../src/bench/synthetic-gpu.ts';
import * as op from '../src/model/ops.ts';

const ctx = await nodeGpuContext();
const device = ctx.device;
const timer = new GpuTimer(device, { targetSeconds: 0.2, maxIters: 5000, timestamps: true });
const tag = process.env.RINGSIDE_SHADERS || 'working tree';
const D = 3840;
const FF = 15360;
const rand = (n: number) => Float32Array.from({ length: n }, (_, i) => Math.sin(i * 12.9898) * 0.5);
const M = 4;
const a = uploadBuffer(device, rand(M * FF), 'a');
const h = uploadBuffer(device, rand(M * D), 'h');
const wbits = new Uint32Array(FF).fill(0x3f803f80); // bf16 pairs of 1.0
const w1 = uploadBuffer(device, wbits, 'w1');
const w2 = uploadBuffer(device, wbits, 'w2');
const xn = storageBuffer(device, M * FF * 4, 'xn');
const dummy = storageBuffer(device, 16, 'dummy');
const next = syntheticAffine(device, 'next', 64, D, 4, 64, 3);
const down = syntheticAffine(device, 'down', 64, FF, 4, 64, 3);
const show = (name: string, rows: number, seconds: number) =>
  console.log(`${tag}: ${name} M=${rows}: ${(seconds * 1e6).toFixed(2)} us`);
for (const rows of [1, M]) {
  const R: op.Rows = { M: rows, round: false };
  const base = { rows, D, eps: 1e-6, round: false };
  const fused = await timer.measure((rec) => {
    op.rmsnorm(rec, a, w1, h, dummy, {
      ...base,
      residual: { postScale: 0.75 },
      nextNorm: { weight: w2, out: xn },
      sums: { lin: next, rows: R, slot: 'bench' },
    });
  });
  show('residual norm + next norm + group sums (rows_wg)', rows, fused.seconds);
  const plain = await timer.measure((rec) => {
    op.rmsnorm(rec, a, w1, xn, dummy, base);
  });
  show('norm alone (rows_wg)', rows, plain.seconds);
  for (const [name, lin, K] of [
    ['x sums, K 3840', next, D],
    ['x sums, K 15360', down, FF],
  ] as const) {
    const t = await timer.measure((rec) => {
      op.groupSums(rec, lin, a, R, K, 'bench');
    });
    show(`${name} (affine_xsum)`, rows, t.seconds);
  }
}
[a, h, w1, w2, xn, dummy].forEach((b) => b.destroy());
next.destroy();
down.destroy();
ctx.destroy();
