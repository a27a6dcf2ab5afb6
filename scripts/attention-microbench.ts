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
 * With --alone it then times each of the engine's attention dispatches alone too (replayed back to back as the
 * bench replays them; M = 1, 4, 8): how much of the total the second dispatch (combine_fused on GPUs) takes.
 */
import { nodeGpuContext } from '../src/cli/node-gpu.ts';
import { CaptureRecorder, GpuTimer } from '../src/bench/timer.ts';
import { copyBandwidth } from '../src/bench/probes.ts';
import { BENCH_SHAPES, benchAttention } from '../src/bench/kernels.ts';
import { createAttentionScratch } from '../src/model/attention-op.ts';
import * as op from '../src/model/ops.ts';
import { storageBuffer } from '../src/gpu/buffers.ts';
import { randomF32 } from '../src/bench/synthetic-gpu.ts';

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
if (process.argv.includes('--alone')) await dispatchesAlone();
ctx.destroy();

/** The sliding case's dispatches, each timed alone, at M = 1, 4, 8 (inputs: any values; the time does not depend on them). */
async function dispatchesAlone(): Promise<void> {
  const device = ctx.device;
  const { heads, kvHeads, headDim: d, window } = S;
  const row = kvHeads * d;
  const scratch = createAttentionScratch(
    device,
    { heads, qWidth: heads * d, maxKeys: window, prefillRows: 0, stepRows: 8 },
    'alone',
  );
  const [q, kCache, vCache, kStage, vStage] = [8 * heads * d, window * row, window * row, 8 * row, 8 * row].map(
    (n, i) => randomF32(device, n, `alone-${i}`, 3 + i),
  );
  const out = storageBuffer(device, 8 * heads * d * 4, 'alone-out');
  for (const M of [1, 4, 8]) {
    const rec = new CaptureRecorder(device, timer.kernels, 'alone');
    op.attention(rec, {
      M,
      heads,
      kvHeads,
      d,
      mode: 'physical',
      window,
      base: 0,
      p: 2 * window + 5,
      round: false,
      split: 0,
      q,
      kCache,
      vCache,
      kStage,
      vStage,
      out,
      scratch: scratch.step,
    });
    const all = (await timer.measureDispatches(rec.captured)).seconds;
    const parts: string[] = [];
    for (const one of rec.captured)
      parts.push(`${one.key?.split('#')[1]} ${((await timer.measureDispatches([one])).seconds * 1e6).toFixed(1)}`);
    console.log(
      `${tag}: sliding ${window}, d ${d} M=${M}: ${(all * 1e6).toFixed(1)} us; alone: ${parts.join(', ')} us`,
    );
    rec.release();
  }
}
