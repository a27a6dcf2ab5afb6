/**
 * Attention decode as `npm run bench` measures it (the 12B sliding ring of 1024 slots at d 256, the full
 * cache of 4096 keys at d 512; M = 1 and 4), alone and with the timer's longer target, so that kernel
 * variants can be compared on a device in alternating processes:
 *
 *   for d in base variant base variant; do
 *     RINGSIDE_SHADERS=dir/$d node --import tsx --import ./scripts/wgsl-hooks.mjs scripts/attention-microbench.ts
 *   done
 *
 * (RINGSIDE_SHADERS: see scripts/wgsl-hooks.mjs; an empty or missing directory is the working tree's kernel.)
 */
import { nodeGpuContext } from '../src/cli/node-gpu.ts';
import { GpuTimer } from '../src/bench/timer.ts';
import { copyBandwidth } from '../src/bench/probes.ts';
import { BENCH_SHAPES, benchAttention } from '../src/bench/kernels.ts';

const ctx = await nodeGpuContext();
const timer = new GpuTimer(ctx.device, { targetSeconds: 0.2, maxIters: 5000, timestamps: true });
const copy = await copyBandwidth(timer, 256);
const y = { copyGBps: copy.value, fmaGflops: 1 };
const S = BENCH_SHAPES['12b'];
const tag = process.env.RINGSIDE_SHADERS ?? 'working tree';
const show = (r: { name: string; M: number; seconds: number; bwRatio: number }) =>
  console.log(`${tag}: ${r.name} M=${r.M}: ${(r.seconds * 1e6).toFixed(1)} us, ${r.bwRatio.toFixed(3)} x copy`);
const cases = [
  {
    label: `sliding ${S.window}, d ${S.headDim}`,
    mode: 'physical' as const,
    kvHeads: S.kvHeads,
    d: S.headDim,
    keys: S.window,
  },
  {
    label: `full 4096, d ${S.globalHeadDim}`,
    mode: 'linear' as const,
    kvHeads: S.globalKvHeads,
    d: S.globalHeadDim,
    keys: 4096,
  },
];
for (const c of cases)
  await benchAttention(timer, '12b', { ...c, heads: S.heads, window: S.window, Ms: [1, 4] }, y, show);
ctx.destroy();
