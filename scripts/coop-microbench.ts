/**
 * A/B microbenchmark of shaders/matmul_coop.wgsl on the 12B linear shapes: the working tree's kernel
 * against a baseline revision of it, per row count and workgroup size, as GB/s of weights and the
 * ratio to this adapter's own copy bandwidth (the bench's yardstick). How the shared-x staging of
 * verify blocks was chosen (docs/PERFORMANCE.md); meant for real GPUs (on lavapipe it takes minutes).
 *
 *   git show REV:shaders/matmul_coop.wgsl > /tmp/coop-base.wgsl
 *   node --import tsx --import ./scripts/wgsl-hooks.mjs scripts/coop-microbench.ts \
 *     [--baseline /tmp/coop-base.wgsl] [--variants a.wgsl,b.wgsl] [--shapes gateup:15360:3840:4,...]
 *     [--rows 1,4,8] [--wg 256,512] [--threads 8,16,32] [--features 1,2] [--cold MB]
 *     [--rounds 3] [--seconds 0.2] [--layout k-major|mlx]
 *
 * --variants adds more kernel files (named by their file name) to the comparison (file@WG:T:R runs that
 * file in that one configuration only: a kernel whose T and R mean something else); --threads tries other
 * invocation counts per feature than the engine's; --features other output features per invocation (R);
 * --wg other workgroup sizes than the engine's (ops.coopShape: a baseline from before workgroups of 512
 * has 16 KiB of workgroup memory, so run it at 256);
 * --layout: the weights' layout (src/gpu/weight-layout.ts; default k-major, the GPU class's) for kernels that have
 * one; --cold cycles through copies of the weights; --rounds times every configuration that many times,
 * interleaved, and keeps the fastest; --seconds is the GPU time aimed at per timing. Every kernel's output is compared byte for byte with the
 * first kernel's of the same M, T and R (variants meant as the same arithmetic must print "same bytes"), and a
 * variant with its own configuration with the first kernel's first configuration, by its largest difference.
 *
 * Shapes are name:N:K:bits (group size 64); a name starting with "gateup" runs the fused gate_up entry
 * over two matrices, the others `main`. Weights, scales and x are random: the kernel's time does not
 * depend on the values.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { nodeGpuContext } from '../src/cli/node-gpu.ts';
import { expandIncludes, shaderSource } from '../src/gpu/shaders.ts';
import { paramsBytes, paramsLayout } from '../src/gpu/params-layout.ts';
import { GpuTimer } from '../src/bench/timer.ts';
import type { Dispatch } from '../src/bench/timer.ts';
import { copyBandwidth } from '../src/bench/probes.ts';
import { coopShape } from '../src/model/ops.ts';

const { values } = parseArgs({
  options: {
    baseline: { type: 'string' },
    shapes: {
      type: 'string',
      default: 'gateup:15360:3840:4,down:3840:15360:4,head:262144:3840:4,gateup8:15360:3840:8',
    },
    rows: { type: 'string', default: '1,2,4,8' },
    wg: { type: 'string' },
    variants: { type: 'string' },
    threads: { type: 'string' },
    features: { type: 'string' },
    cold: { type: 'string', default: '0' },
    rounds: { type: 'string', default: '3' },
    layout: { type: 'string', default: 'k-major' },
    seconds: { type: 'string', default: '0.2' },
  },
});

const ctx = await nodeGpuContext();
const device = ctx.device;
const rounds = Number(values.rounds);
if (values.layout !== 'k-major' && values.layout !== 'mlx') throw new Error('--layout is k-major or mlx');
const wt = values.layout === 'k-major' ? 1 : 0;
const timer = new GpuTimer(device, { targetSeconds: Number(values.seconds), maxIters: 5000, timestamps: true });
const copy = await copyBandwidth(timer, 256);
console.log(`adapter copy bandwidth ${copy.value.toFixed(0)} GB/s (${copy.detail}); timing by ${timer.method}`);

/** A kernel to time: its label, its text, and its one configuration where the command line fixed it. */
type Kernel = [string, string, [number, number, number]?];
const kernels: Kernel[] = [['tree', shaderSource('matmul_coop.wgsl')]];
if (values.baseline) kernels.unshift(['baseline', expandIncludes(readFileSync(values.baseline, 'utf8'))]);
for (const spec of values.variants?.split(',') ?? []) {
  const [file, fixed] = spec.split('@');
  const label = file.replace(/^.*\//, '').replace(/\.wgsl$/, '');
  const config = fixed?.split(':').map(Number) as [number, number, number] | undefined;
  kernels.push([label, expandIncludes(readFileSync(file, 'utf8')), config]);
}
// Invocations per feature to try (default: the engine's choice for each shape). A block of 4 rows stages a round of T
// groups of x in the workgroup memory (16 KiB at 256, 32 KiB at 512; see matmul_coop.wgsl): past that, single rows only.
const threadCounts = values.threads?.split(',').map(Number);
// --cold MB: cycle through copies of the weights totalling at least this much, so that every dispatch reads
// its weights from memory (an H200's 50 MB L2 holds one 30 MB MLP linear), as `npm run bench` does.
const coldBytes = Number(values.cold) * 2 ** 20;
const U = GPUBufferUsage;
const storage = (size: number) => device.createBuffer({ size, usage: U.STORAGE | U.COPY_DST | U.COPY_SRC });

/** The first `bytes` of a buffer, read back. */
async function readBytes(buffer: GPUBuffer, bytes: number): Promise<Uint8Array> {
  const staging = device.createBuffer({ size: bytes, usage: U.MAP_READ | U.COPY_DST });
  const enc = device.createCommandEncoder();
  enc.copyBufferToBuffer(buffer, 0, staging, 0, bytes);
  device.queue.submit([enc.finish()]);
  await staging.mapAsync(GPUMapMode.READ);
  const out = new Uint8Array(staging.getMappedRange().slice(0));
  staging.destroy();
  return out;
}
const GS = 64;

/**
 * "same bytes", or how far a variant's outputs are from the reference's: a variant meant as other
 * arithmetic (another split of the reduction) is checked by its largest difference relative to the
 * largest reference output.
 */
function compareOutputs(out: Uint8Array, ref: Uint8Array): string {
  if (out.every((b, i) => b === ref[i])) return 'same bytes';
  const a = new Float32Array(out.buffer, out.byteOffset, out.length / 4);
  const b = new Float32Array(ref.buffer, ref.byteOffset, ref.length / 4);
  let diff = 0;
  let scale = 0;
  for (let i = 0; i < b.length; i++) {
    diff = Math.max(diff, Math.abs(a[i] - b[i]));
    scale = Math.max(scale, Math.abs(b[i]));
  }
  return `DIFFERENT BYTES (max diff ${(diff / scale).toExponential(1)} of max |y|)`;
}
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
    // Every configuration is built first, then timed in `rounds` interleaved rounds (the fastest
    // counts): on a shared GPU a few seconds' slow-down then hits every configuration, not one.
    interface Config {
      label: string;
      WG: number;
      T: number;
      R: number;
      fixed: boolean;
      dispatches: Dispatch[];
      best: number;
      runs: number[];
    }
    const configs: Config[] = [];
    const grid: [number, number, number][] = [];
    const engine = coopShape(device.limits, { outFeatures: N, inFeatures: K, bits }, fused ? 'gate_up' : 'main');
    for (const WG of values.wg?.split(',').map(Number) ?? [engine.WG])
      for (const T of threadCounts ?? [engine.T])
        for (const R of values.features?.split(',').map(Number) ?? [engine.R])
          if (T * (GS / 4) * 4 <= Math.max(1024, 4 * WG) || M === 1) grid.push([WG, T, R]);
    for (const [label, code, fixed] of kernels)
      for (const [WG, T, R] of fixed ? [fixed] : grid) {
        const pipeline = device.createComputePipeline({
          layout: 'auto',
          compute: {
            module: device.createShaderModule({ code }),
            entryPoint: fused ? 'gate_up' : 'main',
            // the weights' layout where the kernel has one (affine_layout.wgsl; random weights: only the loads move)
            constants: { BITS: bits, WG, T, R, GS, ...(code.includes('override WT') ? { WT: wt } : {}) },
          },
        });
        const per = fused ? 2 : 1;
        const dispatches = Array.from({ length: copies }, (_, c) => {
          const w = mats[c * per];
          const up = mats[c * per + per - 1];
          const bindings = [params, undefined, undefined, y, scales, scales, xs, x, w, up, scales, scales];
          return { pipeline, bindings, workgroups: Math.ceil(N / (R * (WG / T))) };
        });
        configs.push({ label, WG, T, R, fixed: fixed !== undefined, dispatches, best: Infinity, runs: [] });
      }
    const reference = new Map<string, Uint8Array>(); // first kernel's output per (T, R)
    const same = new Map<Config, string | undefined>();
    for (let round = 0; round < rounds; round++)
      for (const c of configs) {
        const seconds = (await timer.measureDispatches(c.dispatches)).seconds / copies;
        c.runs.push(seconds);
        c.best = Math.min(c.best, seconds);
        if (round > 0) continue;
        const out = await readBytes(y, M * N * 4);
        const key = c.fixed ? 'first' : `${c.T}:${c.R}`;
        const ref = reference.get(key);
        if (!ref) reference.set(key, out);
        if (!reference.has('first')) reference.set('first', out);
        same.set(c, ref ? compareOutputs(out, ref) : undefined);
      }
    for (const c of configs) {
      const gbs = weightBytes / c.best / 1e9;
      const check = same.get(c);
      console.log(
        `${name.padEnd(8)} M ${M} ${c.label.padEnd(14)} WG ${c.WG} T ${String(c.T).padStart(2)} R ${c.R}${copies > 1 ? ' cold' : ''}: ${(c.best * 1e6).toFixed(1).padStart(8)} us ` +
          `${gbs.toPrecision(4).padStart(6)} GB/s ${(gbs / copy.value).toFixed(3)} x copy` +
          (check === undefined ? '' : ` ${check}`) +
          (rounds > 1 ? ` (rounds: ${c.runs.map((r) => (r * 1e6).toFixed(1)).join(' ')} us)` : ''),
      );
    }
    params.destroy();
  }
  for (const buffer of [...mats, scales, x, xs, y]) buffer.destroy();
}
ctx.destroy();
