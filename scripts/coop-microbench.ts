/**
 * A/B microbenchmark of shaders/matmul_coop.wgsl on the 12B linear shapes: the working tree's kernel
 * against a baseline revision of it, per row count and workgroup size, as GB/s of weights and the
 * ratio to this adapter's own copy bandwidth (the bench's yardstick). How the shared-x staging of
 * verify blocks was chosen (README, "Figures"); meant for real GPUs (on lavapipe it takes minutes).
 *
 *   git show REV:shaders/matmul_coop.wgsl > /tmp/coop-base.wgsl
 *   node --import tsx --import ./scripts/wgsl-hooks.mjs scripts/coop-microbench.ts \
 *     [--baseline /tmp/coop-base.wgsl] [--variants a.wgsl,b.wgsl] [--shapes gateup:15360:3840:4,...]
 *     [--rows 1,4,8] [--wg 128,256] [--threads 8,16,32] [--cold MB]
 *
 * --variants adds more kernel files (named by their file name) to the comparison; --threads tries other
 * invocation counts per feature than the engine's; --cold cycles through copies of the weights.
 *
 * Shapes are name:N:K:bits (group size 64); a name starting with "gateup" runs the fused gate_up entry
 * over two matrices, the others `main`. Weights, scales and x are random: the kernel's time does not
 * depend on the values.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { nodeGpuContext } from '../src/cli/node-gpu.ts';
import { shaderSource } from '../src/gpu/shaders.ts';
import { paramsBytes, paramsLayout } from '../src/gpu/params-layout.ts';
import { GpuTimer } from '../src/bench/timer.ts';
import { copyBandwidth } from '../src/bench/probes.ts';
import { coopFeatures, coopThreads } from '../src/model/ops.ts';

const { values } = parseArgs({
  options: {
    baseline: { type: 'string' },
    shapes: {
      type: 'string',
      default: 'gateup:15360:3840:4,down:3840:15360:4,head:262144:3840:4,gateup8:15360:3840:8',
    },
    rows: { type: 'string', default: '1,2,4,8' },
    wg: { type: 'string', default: '256' },
    variants: { type: 'string' },
    threads: { type: 'string' },
    cold: { type: 'string', default: '0' },
  },
});

/** A kernel file's text with its `//#include`s expanded from the working tree's shaders. */
function expandIncludes(text: string): string {
  const seen = new Set<string>();
  return text.replace(/^\/\/#include "([^"]+)"\s*$/gm, (_m, inc: string) =>
    seen.has(inc) ? '' : shaderSource(inc, seen),
  );
}

const ctx = await nodeGpuContext();
const device = ctx.device;
const timer = new GpuTimer(device, { targetSeconds: 0.05, maxIters: 2000, timestamps: true });
const copy = await copyBandwidth(timer, 256);
console.log(`adapter copy bandwidth ${copy.value.toFixed(0)} GB/s (${copy.detail}); timing by ${timer.method}`);

const kernels: [string, string][] = [['tree', shaderSource('matmul_coop.wgsl')]];
if (values.baseline) kernels.unshift(['baseline', expandIncludes(readFileSync(values.baseline, 'utf8'))]);
for (const file of values.variants?.split(',') ?? [])
  kernels.push([file.replace(/^.*\//, '').replace(/\.wgsl$/, ''), expandIncludes(readFileSync(file, 'utf8'))]);
// Invocations per feature to try (default: the engine's choice). Past 16, a block of 4 rows cannot stage a
// round of groups in 16 KiB (see matmul_coop.wgsl), so larger T run single rows only.
const threadCounts = values.threads?.split(',').map(Number) ?? [coopThreads()];
// --cold MB: cycle through copies of the weights totalling at least this much, so that every dispatch reads
// its weights from memory (an H200's 50 MB L2 holds one 30 MB MLP linear), as `npm run bench` does.
const coldBytes = Number(values.cold) * 2 ** 20;
const U = GPUBufferUsage;
const storage = (size: number) => device.createBuffer({ size, usage: U.STORAGE | U.COPY_DST });
const GS = 64;
const MAX_ROWS = 8;

for (const shape of values.shapes.split(',')) {
  const [name, n, k, b] = shape.split(':');
  const [N, K, bits] = [Number(n), Number(k), Number(b)];
  const fused = name.startsWith('gateup');
  const words = (N * K * bits) / 32;
  const perCopy = words * 4 * (fused ? 2 : 1);
  const copies = Math.max(1, Math.min(16, Math.ceil(coldBytes / perCopy)));
  const mats = Array.from({ length: copies * (fused ? 2 : 1) }, () => storage(words * 4));
  const noise = new Uint32Array(1 << 22).map(() => (Math.random() * 2 ** 32) >>> 0);
  for (const w of mats)
    for (let o = 0; o < words; o += noise.length)
      device.queue.writeBuffer(w, o * 4, noise, 0, Math.min(noise.length, words - o));
  const groups = (N * K) / GS;
  const scales = storage(groups * 2);
  device.queue.writeBuffer(scales, 0, new Uint32Array(groups / 2).fill(0x3c003c00));
  const x = storage(MAX_ROWS * K * 4);
  device.queue.writeBuffer(
    x,
    0,
    new Float32Array(MAX_ROWS * K).map(() => Math.random() - 0.5),
  );
  const xs = storage(MAX_ROWS * (K / GS) * 4);
  device.queue.writeBuffer(
    xs,
    0,
    new Float32Array(MAX_ROWS * (K / GS)).map(() => Math.random()),
  );
  const y = storage(MAX_ROWS * N * 4);
  const weightBytes = perCopy;
  for (const M of values.rows.split(',').map(Number)) {
    const params = device.createBuffer({ size: 256, usage: U.UNIFORM | U.COPY_DST });
    const fields = { M, N, K, group_size: GS, n_offset: 0, x_stride: K, y_stride: N, round: 0 };
    device.queue.writeBuffer(params, 0, paramsBytes(paramsLayout('matmul_coop.wgsl'), fields));
    for (const [label, code] of kernels)
      for (const WG of values.wg.split(',').map(Number))
        for (const T of threadCounts) {
          if (T > 16 && M > 1) continue;
          const R = coopFeatures(N);
          const pipeline = device.createComputePipeline({
            layout: 'auto',
            compute: {
              module: device.createShaderModule({ code }),
              entryPoint: fused ? 'gate_up' : 'main',
              constants: { BITS: bits, WG, T, R, GS },
            },
          });
          const per = fused ? 2 : 1;
          const dispatches = Array.from({ length: copies }, (_, c) => {
            const w = mats[c * per];
            const up = mats[c * per + per - 1];
            const bindings = [params, undefined, undefined, y, scales, scales, xs, x, w, up, scales, scales];
            return { pipeline, bindings, workgroups: Math.ceil(N / (R * (WG / T))) };
          });
          const timing = await timer.measureDispatches(dispatches);
          const seconds = timing.seconds / copies;
          const gbs = weightBytes / seconds / 1e9;
          console.log(
            `${name.padEnd(8)} M ${M} ${label.padEnd(14)} WG ${WG} T ${String(T).padStart(2)}${copies > 1 ? ' cold' : ''}: ${(seconds * 1e6).toFixed(1).padStart(8)} us ` +
              `${gbs.toPrecision(4).padStart(6)} GB/s ${(gbs / copy.value).toFixed(3)} x copy`,
          );
        }
    params.destroy();
  }
  for (const buffer of [...mats, scales, x, xs, y]) buffer.destroy();
}
ctx.destroy();
