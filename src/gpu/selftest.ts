import type { GpuContext } from './device.ts';
import { KernelCache, dispatch } from './kernels.ts';
import { readF32, readU32, storageBuffer, uniformBuffer, uploadBuffer } from './buffers.ts';
import { withErrorScopes } from './device.ts';
import { fmtInt } from '../util/number-format.ts';

/**
 * A quick proof that WGSL runs on this adapter and computes the right numbers: an fma kernel
 * dispatched with more workgroups than one dimension allows (exercises 2-D folding), and, when the
 * adapter has them, an f16 kernel and a subgroup reduction. Results are checked on the CPU.
 */
export interface SelfTestCheck {
  name: string;
  ok: boolean;
  skipped?: string;
  detail: string;
}
export interface SelfTestResult {
  ok: boolean;
  checks: SelfTestCheck[];
  ms: number;
}

/**
 * Pseudo-random multiples of 1/256 in [-0.5, 0.5): products and sums stay exact in f32, so the
 * expected result does not depend on whether the adapter fuses the multiply-add.
 */
function pseudoRandom(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = ((s >>> 24) - 128) / 256;
  }
  return out;
}

async function fmaCheck(ctx: GpuContext, kernels: KernelCache): Promise<SelfTestCheck> {
  const { device } = ctx;
  const maxPerDim = device.limits.maxComputeWorkgroupsPerDimension;
  // WG = 1 forces more workgroups than one dimension allows, so the 2-D fold is exercised.
  const n = maxPerDim + 1000;
  const a = pseudoRandom(n, 1);
  const b = pseudoRandom(n, 2);
  const c = 0.25;
  const params = new ArrayBuffer(8);
  new Uint32Array(params, 0, 1)[0] = n;
  new Float32Array(params, 4, 1)[0] = c;
  const bufs = [uploadBuffer(device, a, 'a'), uploadBuffer(device, b, 'b'), storageBuffer(device, n * 4, 'out')];
  const ubuf = uniformBuffer(device, params, 'params');
  const out = await withErrorScopes(device, 'running the self-test fma kernel', async () => {
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    dispatch(device, pass, kernels.pipeline('selftest.wgsl', { WG: 1 }), [...bufs, ubuf], n);
    pass.end();
    device.queue.submit([enc.finish()]);
    return readF32(device, bufs[2], n);
  });
  let bad = 0;
  for (let i = 0; i < n; i++) if (out[i] !== a[i] * b[i] + c) bad++;
  [...bufs, ubuf].forEach((x) => x.destroy());
  return {
    name: 'f32 fma, 2-D dispatch',
    ok: bad === 0,
    detail: `${fmtInt(n)} elements over ${fmtInt(n)} workgroups, ${fmtInt(bad)} wrong`,
  };
}

async function f16Check(ctx: GpuContext, kernels: KernelCache): Promise<SelfTestCheck> {
  const name = 'shader-f16';
  if (!ctx.has('shader-f16')) return { name, ok: true, skipped: 'adapter has no shader-f16', detail: 'not available' };
  const { device } = ctx;
  const n = 256;
  const a = new Float32Array(n).map((_, i) => (i - 128) / 8); // exact in f16
  const inBuf = uploadBuffer(device, a, 'a16');
  const outBuf = storageBuffer(device, n * 4, 'out16');
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass();
  dispatch(device, pass, kernels.pipeline('selftest_f16.wgsl'), [inBuf, outBuf], n / 64);
  pass.end();
  device.queue.submit([enc.finish()]);
  const out = await readF32(device, outBuf, n);
  let bad = 0;
  for (let i = 0; i < n; i++) if (out[i] !== a[i] * 2) bad++;
  inBuf.destroy();
  outBuf.destroy();
  return { name, ok: bad === 0, detail: `${fmtInt(n)} f16 multiplies, ${fmtInt(bad)} wrong` };
}

async function subgroupCheck(ctx: GpuContext, kernels: KernelCache): Promise<SelfTestCheck> {
  const name = 'subgroups';
  if (!ctx.has('subgroups')) return { name, ok: true, skipped: 'adapter has no subgroups', detail: 'not available' };
  const { device } = ctx;
  const n = 64;
  const a = new Float32Array(n).map((_, i) => i); // small integers: sums are exact in any order
  const inBuf = uploadBuffer(device, a, 'asg');
  const outBuf = storageBuffer(device, n * 4, 'outsg');
  const sizeBuf = storageBuffer(device, n * 4, 'sizes');
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass();
  dispatch(device, pass, kernels.pipeline('selftest_subgroup.wgsl'), [inBuf, outBuf, sizeBuf], 1);
  pass.end();
  device.queue.submit([enc.finish()]);
  const out = await readF32(device, outBuf, n);
  const sizes = await readU32(device, sizeBuf, n);
  const sg = sizes[0];
  let bad = 0;
  for (let i = 0; i < n; i++) {
    const start = Math.floor(i / sg) * sg; // subgroups of a 1-D workgroup are consecutive invocations
    let expect = 0;
    for (let j = start; j < start + sg; j++) expect += j;
    if (out[i] !== expect) bad++;
  }
  [inBuf, outBuf, sizeBuf].forEach((x) => x.destroy());
  return { name, ok: bad === 0 && sg > 0, detail: `subgroup size ${sg}, ${fmtInt(bad)} of ${fmtInt(n)} sums wrong` };
}

export async function runSelfTest(ctx: GpuContext): Promise<SelfTestResult> {
  const t0 = performance.now();
  const kernels = new KernelCache(ctx.device);
  const checks = [await fmaCheck(ctx, kernels), await f16Check(ctx, kernels), await subgroupCheck(ctx, kernels)];
  return { ok: checks.every((c) => c.ok), checks, ms: performance.now() - t0 };
}
