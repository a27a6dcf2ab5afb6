/**
 * What a dispatch costs the GPU by itself, apart from its work: N dispatches of a kernel that does almost
 * nothing, recorded in ONE compute pass and timed by the pass's timestamps, per dispatch. Three chains:
 * - `dependent`: each dispatch reads the buffer the previous one wrote (what a decode step's dispatches
 *   mostly are; WebGPU orders them, Dawn puts a barrier between them);
 * - `independent`: each writes a buffer of its own that no other dispatch touches;
 * - `wide`: `dependent` with 264 workgroups (two per SM of an H200) instead of one, as a small matvec has.
 * The difference between a real step's profiled GPU time and the sum of its kernels' own times is made of
 * these gaps; this says how large one is on the adapter it runs on (docs/PERFORMANCE.md).
 *
 *   node --import tsx --import ./scripts/wgsl-hooks.mjs scripts/dispatch-microbench.ts [DISPATCHES] [ROUNDS]
 */
import { nodeGpuContext } from '../src/cli/node-gpu.ts';

const N = Number(process.argv[2] ?? 528);
const ROUNDS = Number(process.argv[3] ?? 5);
const ctx = await nodeGpuContext();
const device = ctx.device;
if (!device.features.has('timestamp-query')) throw new Error('dispatch-microbench needs timestamp-query');

const module = device.createShaderModule({
  code: `
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  if (g.x == 0u) { dst[0] = src[0] + 1u; }
}`,
});
const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
const buf = (i: number) =>
  device.createBuffer({ label: `b${i}`, size: 256, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
const ring = Array.from({ length: 2 }, (_, i) => buf(i));
const own = Array.from({ length: N }, (_, i) => buf(10 + i));
const source = buf(9);
const group = (a: GPUBuffer, b: GPUBuffer) =>
  device.createBindGroup({
    layout: pipeline.getBindGroupLayout(0),
    entries: [
      { binding: 0, resource: { buffer: a } },
      { binding: 1, resource: { buffer: b } },
    ],
  });
const chains: Record<string, { groups: GPUBindGroup[]; workgroups: number }> = {
  dependent: { groups: [group(ring[0], ring[1]), group(ring[1], ring[0])], workgroups: 1 },
  independent: { groups: own.map((b) => group(source, b)), workgroups: 1 },
  wide: { groups: [group(ring[0], ring[1]), group(ring[1], ring[0])], workgroups: 264 },
};
const query = device.createQuerySet({ type: 'timestamp', count: 2 });
const resolve = device.createBuffer({ size: 16, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
const read = device.createBuffer({ size: 16, usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.MAP_READ });

async function passMs(name: string, n: number): Promise<number> {
  const c = chains[name];
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass({
    timestampWrites: { querySet: query, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 },
  });
  pass.setPipeline(pipeline);
  for (let i = 0; i < n; i++) {
    pass.setBindGroup(0, c.groups[i % c.groups.length]);
    pass.dispatchWorkgroups(c.workgroups);
  }
  pass.end();
  enc.resolveQuerySet(query, 0, 2, resolve, 0);
  enc.copyBufferToBuffer(resolve, 0, read, 0, 16);
  device.queue.submit([enc.finish()]);
  await read.mapAsync(GPUMapMode.READ);
  const t = new BigUint64Array(read.getMappedRange().slice(0));
  read.unmap();
  return Number(t[1] - t[0]) / 1e6;
}

console.log(
  `adapter: ${ctx.report?.description ?? ctx.report?.device ?? 'unknown'}; ${N} dispatches per pass, best of ${ROUNDS}`,
);
for (const name of Object.keys(chains)) {
  await passMs(name, N); // warm-up
  let best = Infinity;
  for (let r = 0; r < ROUNDS; r++) best = Math.min(best, await passMs(name, N));
  let one = Infinity;
  for (let r = 0; r < 3; r++) one = Math.min(one, await passMs(name, 1));
  console.log(
    `${name.padEnd(12)} ${best.toFixed(3)} ms per pass = ${((1000 * best) / N).toFixed(2)} us per dispatch (one dispatch alone: ${(1000 * one).toFixed(2)} us)`,
  );
}
ctx.destroy();
