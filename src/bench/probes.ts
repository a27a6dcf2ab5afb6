/**
 * The adapter's own yardsticks, measured in the same run as the kernels so that kernel figures can be
 * given as ratios: streaming copy bandwidth (vec4 read + write over a large buffer) and multiply-add
 * throughput (independent fma chains, f32 and, with shader-f16, f16). Browser-safe; the WGSL lives
 * here because these kernels are the benchmark's, not the engine's.
 */
import { uniformBuffer } from '../gpu/buffers.ts';
import type { GpuTimer, Timing } from './timer.ts';

const WG = 256;

const COPY_WGSL = /* wgsl */ `
struct Params { n: u32, _a: u32, _b: u32, _c: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<f32>>;
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x) * ${WG}u + lid;
  if (i < P.n) { dst[i] = src[i]; }
}
`;

// CHAINS independent vec4 fma chains per invocation, `iters` rounds: 2 * 4 * CHAINS flops per round.
const CHAINS = 8;
function fmaWgsl(t: 'f32' | 'f16'): string {
  const v = `vec4<${t}>`;
  const decl = Array.from(
    { length: CHAINS },
    (_, c) => `  var a${c} = ${v}(${t}(seed) * ${t}(${(c + 1) * 0.001}));`,
  ).join('\n');
  const step = Array.from({ length: CHAINS }, (_, c) => `    a${c} = fma(a${c}, b, k);`).join('\n');
  const sum = Array.from({ length: CHAINS }, (_, c) => `a${c}`).join(' + ');
  return /* wgsl */ `${t === 'f16' ? 'enable f16;' : ''}
struct Params { iters: u32, n: u32, b: f32, k: f32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x) * ${WG}u + lid;
  if (i >= P.n) { return; }
  let seed = f32(i & 255u) * 0.0039 + 0.5;
  let b = ${v}(${t}(P.b));
  let k = ${v}(${t}(P.k));
${decl}
  for (var it = 0u; it < P.iters; it++) {
${step}
  }
  let s = ${sum};
  out[i] = f32(s.x + s.y + s.z + s.w);
}
`;
}

export interface ProbeResult {
  name: string;
  /** GB/s (copy) or GFLOP/s (fma). */
  value: number;
  unit: 'GB/s' | 'GFLOP/s';
  timing: Timing;
  detail: string;
}

const pipelines = new WeakMap<GPUDevice, Map<string, GPUComputePipeline>>();
/** The benchmark's own pipelines (not engine shaders, so not in the engine's kernel cache). */
function pipeline(device: GPUDevice, name: string, code: string): GPUComputePipeline {
  let m = pipelines.get(device);
  if (!m) pipelines.set(device, (m = new Map()));
  let p = m.get(name);
  if (!p) {
    p = device.createComputePipeline({
      label: name,
      layout: 'auto',
      compute: { module: device.createShaderModule({ label: name, code }), entryPoint: 'main' },
    });
    m.set(name, p);
  }
  return p;
}

/** Copy bandwidth: bytes read + bytes written per second over `mib` MiB (capped by the binding limit). */
export async function copyBandwidth(timer: GpuTimer, mib: number): Promise<ProbeResult> {
  const device = timer.device;
  const limit = Math.min(device.limits.maxStorageBufferBindingSize, device.limits.maxBufferSize);
  const bytes = Math.floor(Math.min(mib * 2 ** 20, limit) / 16) * 16;
  const n = bytes / 16;
  const U = GPUBufferUsage;
  const src = device.createBuffer({ label: 'bench-copy-src', size: bytes, usage: U.STORAGE | U.COPY_DST });
  const dst = device.createBuffer({ label: 'bench-copy-dst', size: bytes, usage: U.STORAGE });
  const params = uniformBuffer(device, Uint32Array.of(n, 0, 0, 0), 'bench-copy-params');
  try {
    const timing = await timer.measureDispatches([
      {
        pipeline: pipeline(device, 'bench-copy', COPY_WGSL),
        bindings: [params, src, dst],
        workgroups: Math.ceil(n / WG),
      },
    ]);
    const gbs = (2 * bytes) / timing.seconds / 1e9;
    return {
      name: 'copy',
      value: gbs,
      unit: 'GB/s',
      timing,
      detail: `vec4 read+write over ${(bytes / 2 ** 20).toFixed(0)} MiB`,
    };
  } finally {
    src.destroy();
    dst.destroy();
    params.destroy();
  }
}

/** fma throughput in GFLOP/s (one fma = 2 flops) over `invocations` invocations of `rounds` rounds. */
export async function fmaThroughput(
  timer: GpuTimer,
  type: 'f32' | 'f16',
  invocations: number,
  rounds: number,
): Promise<ProbeResult> {
  const device = timer.device;
  const name = `bench-fma-${type}`;
  const out = device.createBuffer({ label: name, size: invocations * 4, usage: GPUBufferUsage.STORAGE });
  const p = new ArrayBuffer(16);
  new Uint32Array(p, 0, 2).set([rounds, invocations]);
  new Float32Array(p, 8, 2).set([0.999, 0.001]);
  const params = uniformBuffer(device, p, `${name}-params`);
  try {
    const timing = await timer.measureDispatches([
      {
        pipeline: pipeline(device, name, fmaWgsl(type)),
        bindings: [params, out],
        workgroups: Math.ceil(invocations / WG),
      },
    ]);
    const flops = 2 * 4 * CHAINS * rounds * invocations;
    return {
      name: `fma ${type}`,
      value: flops / timing.seconds / 1e9,
      unit: 'GFLOP/s',
      timing,
      detail: `${invocations} invocations x ${CHAINS} vec4 chains x ${rounds} rounds`,
    };
  } finally {
    out.destroy();
    params.destroy();
  }
}

/** What warmGpu did: the wall time it kept the GPU busy, the dispatches it took, and its last batch's rate. */
export interface Warmup {
  ms: number;
  dispatches: number;
  /**
   * f32 GFLOP/s of the last batch by the wall clock (submit to done): against the FMA yardstick, how far up the
   * GPU's clocks were when the warm-up ended.
   */
  lastGflops: number;
}

/** Dispatches per warm-up submit at most (on the H200 1024 of them take ~25 ms at 1980 MHz). */
const MAX_WARM_BATCH = 1024;

/**
 * Keeps the GPU busy for at least `ms` of wall time with fma dispatches (batches doubling until one takes
 * ~20 ms or holds MAX_WARM_BATCH), so that what is timed next runs at the GPU's working clocks. Why: a GPU's
 * driver lowers its clocks when the GPU idles and raises them only under sustained load. Seen on the H200
 * (nvidia-smi; docs/PERFORMANCE.md, end to end): 1.5 s after the bench's yardsticks, while it built the
 * end-to-end model on the CPU, the SM clock fell from 1980 to 345 MHz; the chain tokens and verify blocks
 * timed next ran there, every kernel ~5.5 x slower than at 1980 MHz (a chain token of 2 layers 5.9 ms, 3.4 ms
 * of it GPU; at 1980 MHz 2.8 ms, 0.8 of it GPU), and those few milliseconds of work did not raise it. The FMA
 * yardstick's kernel: it allocates nothing large.
 */
export async function warmGpu(device: GPUDevice, ms: number, invocations = 65536, rounds = 256): Promise<Warmup> {
  const out = device.createBuffer({ label: 'bench-warm', size: invocations * 4, usage: GPUBufferUsage.STORAGE });
  const p = new ArrayBuffer(16);
  new Uint32Array(p, 0, 2).set([rounds, invocations]);
  new Float32Array(p, 8, 2).set([0.999, 0.001]);
  const params = uniformBuffer(device, p, 'bench-warm-params');
  const pipe = pipeline(device, 'bench-fma-f32', fmaWgsl('f32'));
  const bindGroup = device.createBindGroup({
    layout: pipe.getBindGroupLayout(0),
    entries: [
      { binding: 0, resource: { buffer: params } },
      { binding: 1, resource: { buffer: out } },
    ],
  });
  const t0 = performance.now();
  let dispatches = 0;
  let batch = 1;
  let lastGflops = 0;
  const flops = 2 * 4 * CHAINS * rounds * invocations; // per dispatch
  try {
    do {
      const enc = device.createCommandEncoder({ label: 'bench-warm' });
      const pass = enc.beginComputePass();
      pass.setPipeline(pipe);
      pass.setBindGroup(0, bindGroup);
      for (let i = 0; i < batch; i++) pass.dispatchWorkgroups(Math.ceil(invocations / WG));
      pass.end();
      const t = performance.now();
      device.queue.submit([enc.finish()]);
      await device.queue.onSubmittedWorkDone();
      dispatches += batch;
      const took = performance.now() - t;
      lastGflops = (flops * batch) / (took / 1000) / 1e9;
      if (took < 20 && batch < MAX_WARM_BATCH) batch *= 2;
    } while (performance.now() - t0 < ms);
    return { ms: performance.now() - t0, dispatches, lastGflops };
  } finally {
    out.destroy();
    params.destroy();
  }
}
