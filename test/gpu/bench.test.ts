/**
 * Smoke test of the benchmark module (src/bench): it runs end to end on tiny shapes and returns
 * finite, positive figures and ratios. No timing assertions: timings belong to `npm run bench`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import { defaultBenchOptions, formatBench, runBench, type BenchOptions } from '../../src/bench/run.ts';
import { benchEndToEnd } from '../../src/bench/e2e.ts';
import type { BenchShapes } from '../../src/bench/kernels.ts';
import { detectKernelClass, isSoftwareAdapter } from '../../src/gpu/kernel-class.ts';

const TINY: BenchShapes = {
  name: 'tiny',
  hidden: 256,
  intermediate: 512,
  vocab: 1024,
  heads: 4,
  kvHeads: 2,
  headDim: 64,
  globalKvHeads: 1,
  globalHeadDim: 128,
  window: 16,
  groupSize: 64,
  fullKeys: 64,
};

const finitePositive = (v: number | undefined) => typeof v === 'number' && Number.isFinite(v) && v > 0;

describe('bench module (tiny shapes)', () => {
  let ctx: GpuContext;
  beforeAll(async () => {
    ctx = await testGpu();
  });
  afterAll(() => ctx?.destroy());

  it('measures yardsticks, every kernel class and end to end, with finite ratios', async () => {
    const opts: BenchOptions = {
      ...defaultBenchOptions(true),
      models: [TINY],
      targetSeconds: 0.001,
      maxIters: 2,
      matmulRows: [1, 4],
      bits: [4, 8],
      compareKernels: ['lanes', 'tile', 'affine', 'coop'],
      compareRows: [1, 4],
      compareHead: true,
      prefillRows: 16,
      attentionRows: [1, 4],
      headRows: [1, 4],
      copyMiB: 1,
      fmaInvocations: 4096,
      fmaRounds: 16,
      e2e: { preset: 'tiny', layers: 2, promptTokens: 5, chainTokens: 1, blocks: 1, block: 4 },
    };
    const lines: string[] = [];
    const report = await runBench(ctx, { ...opts, log: (l) => lines.push(l) });

    expect(['timestamp-query', 'wall-clock']).toContain(report.timing);
    // the adapter's class picks the matvec family (RINGSIDE_KERNELS=gpu forces the GPU kernels here)
    expect(report.engineKernel).toBe(detectKernelClass(ctx.report) === 'gpu' ? 'coop' : 'lanes');
    expect(report.prefillKernel).toBe('tile');
    expect(report.yardsticks.length).toBeGreaterThanOrEqual(2);
    for (const y of report.yardsticks) expect(finitePositive(y.value), `${y.name} = ${y.value}`).toBe(true);

    expect(new Set(report.kernels.map((k) => k.class))).toEqual(new Set(['matmul', 'prefill', 'attention', 'lm-head']));
    for (const k of report.kernels) {
      const what = `${k.class} ${k.name} M=${k.M} ${k.kernel}`;
      for (const v of [k.seconds, k.gbPerS, k.gflopPerS, k.bwRatio, k.flopRatio])
        expect(finitePositive(v), `${what}: ${v}`).toBe(true);
    }
    // every compared kernel ran, and exactly one of them is marked as the engine's
    const gate = report.kernels.filter(
      (k) => k.class === 'matmul' && k.name.startsWith('mlp.gate/up 4-bit') && k.M === 1,
    );
    expect(new Set(gate.map((k) => k.kernel))).toEqual(new Set(['lanes', 'tile', 'affine', 'coop']));
    expect(gate.filter((k) => k.engine).map((k) => k.kernel)).toEqual([report.engineKernel]);
    expect(report.kernels.find((k) => k.class === 'prefill')?.M).toBe(16);

    const e = report.e2e!;
    for (const v of [
      e.prefill.tokensPerSecond,
      e.chain.msPerToken,
      e.verify.msPerBlock,
      e.chain.dispatchesPerToken,
      e.chain.submitsPerToken,
      e.blockVsChain,
    ])
      expect(finitePositive(v)).toBe(true);
    // the probe on the e2e model, by phase: exact passes without localization, mlx-metal fails and localizes
    expect(e.probe.map((p) => [p.policy, p.verdict])).toEqual([
      ['exact', 'equal'],
      ['mlx-metal', 'diverges'],
    ]);
    for (const p of e.probe)
      for (const v of [p.prefillMs, p.chainMs, p.blockMs, p.totalMs]) expect(finitePositive(v)).toBe(true);
    expect(e.probe[0].localizeMs).toBe(0);
    expect(finitePositive(e.probe[1].localizeMs)).toBe(true);
    const s = report.summary;
    for (const v of [
      s.copyGBps,
      s.fmaF32Gflops,
      s.matvec4bitBwRatio,
      s.k4VsM1,
      s.gateUp4bitBwRatio,
      s.gateUpK4VsM1,
      s.prefillFlopRatio,
      s.msPerChainToken,
    ])
      expect(finitePositive(v)).toBe(true);
    // decode traffic, effective bandwidth and the projection are consistent with each other
    expect(e.chain.effectiveGBps).toBeCloseTo(e.chain.bytesPerToken! / (e.chain.minMs / 1000) / 1e9, 6);
    expect(s.decodeBwRatio).toBeCloseTo(e.chain.effectiveGBps! / s.copyGBps, 6);
    // a CPU adapter's efficiency says nothing about a GPU: no projection, and a note that says why
    expect(isSoftwareAdapter(ctx.report)).toBe(true);
    expect(s.projection).toBeUndefined();
    expect(report.notes.some((n) => n.startsWith('no decode projection'))).toBe(true);
    // the chain token's breakdown: CPU phases measured, bind groups cached after the first token
    const bd = e.chain.breakdown;
    for (const v of [bd.encodeMs!, bd.submitMs, bd.waitMs!]) expect(v >= 0 && Number.isFinite(v)).toBe(true);
    expect(bd.bindGroupsPerToken).toBe(0);
    // ... and the verify block's, printed beside it
    const vw = e.verify.wall!;
    for (const v of [vw.encodeMs!, vw.submitMs, vw.waitMs!]) expect(v >= 0 && Number.isFinite(v)).toBe(true);
    expect(formatBench(report)).toMatch(/verify block breakdown \(wall ms per block of \d+\): recording \d/);
    // timed blocks are steady state: the untimed first block made their bind groups
    expect(e.verify.bindGroupsPerBlock).toBe(0);
    // a software adapter has no GPU clock to raise: no warm-up, and the report says so
    expect(e.warmup).toBeNull();
    expect(s.e2eWarmupFmaRatio).toBeUndefined();
    expect(formatBench(report)).toContain('no warm-up: a software adapter has no GPU clock to raise');
    if (ctx.device.features.has('timestamp-query') && !bd.gpuNote) {
      expect(bd.kernels!.length).toBeGreaterThan(3);
      expect(bd.kernels!.some((k) => k.kernel.startsWith('attention.'))).toBe(true);
      expect(bd.gpuMs).toBeCloseTo(
        bd.kernels!.reduce((a, k) => a + k.ms, 0),
        9,
      );
      // every dispatch of a profiled token is attributed to a kernel
      expect(bd.kernels!.reduce((a, k) => a + k.dispatches, 0)).toBeCloseTo(e.chain.dispatchesPerToken, 9);
      // ... and, within a kernel, to its workgroup counts
      for (const k of bd.kernels!) {
        expect(k.byWorkgroups.reduce((a, w) => a + w.dispatches, 0)).toBeCloseTo(k.dispatches, 9);
        expect(k.byWorkgroups.reduce((a, w) => a + w.ms, 0)).toBeCloseTo(k.ms, 9);
      }
      // a profiled verify block: every dispatch attributed too, its total in the summary
      const vb = e.verify.gpu!;
      expect(vb.kernels!.reduce((a, k) => a + k.dispatches, 0)).toBeCloseTo(e.verify.dispatchesPerBlock, 9);
      expect(vb.gpuMs).toBeCloseTo(
        vb.kernels!.reduce((a, k) => a + k.ms, 0),
        9,
      );
      expect(s.breakdown?.blockGpuMs).toBe(vb.gpuMs);
      expect(formatBench(report)).toMatch(/GPU time per chain token .*; per verify block of \d+: /);
    }
    // yardsticks are the best of the two measurements, and every ratio is against them
    for (const k of report.kernels) expect(k.bwRatio).toBeCloseTo(k.gbPerS / s.copyGBps, 9);

    const text = formatBench(report);
    expect(text).toContain('summary:');
    expect(text).toContain('x copy');
    expect(text).toContain('probe (wall ms, summed over draws)');
    expect(JSON.parse(JSON.stringify(report)).version).toBe(report.version);
    expect(lines.length).toBeGreaterThan(5);
  });

  // GPUs move their clocks with the load (the H200 from 1980 to 345 MHz within 1.5 s of idling), and the bench
  // timed its chain tokens and then its verify blocks right after building the model on the CPU: ~5 x slow,
  // and the two phases at different clocks (block / token ratios from 0.41 to 1.83 on one build). It now keeps
  // the GPU busy first and times the two in turns.
  it('keeps the GPU busy for the asked wall time, then times chain tokens and verify blocks in turns', async () => {
    const lines: string[] = [];
    const e = await benchEndToEnd(ctx, {
      preset: 'tiny',
      layers: 1,
      promptTokens: 5,
      chainTokens: 2,
      blocks: 2,
      block: 2,
      probe: false,
      warmupMs: 40,
      log: (l) => lines.push(l),
    });
    expect(e.warmup!.ms).toBeGreaterThanOrEqual(40);
    expect(e.warmup!.dispatches).toBeGreaterThan(0);
    expect(e.warmup!.lastGflops).toBeGreaterThan(0);
    const at = (re: RegExp) => lines.findIndex((l) => re.test(l));
    // the warm-up right before the timed steps, which come in turns: token, block, token, block
    const order = [
      /GPU work .* before the timed steps/,
      /chain token 1\/2/,
      /verify block 1\/2/,
      /chain token 2\/2/,
      /verify block 2\/2/,
    ];
    const where = order.map(at);
    expect(
      where.every((i) => i >= 0),
      lines.join('\n'),
    ).toBe(true);
    expect([...where].sort((a, b) => a - b)).toEqual(where);
    expect(e.chain.tokens).toBe(2);
    expect(e.verify.blocks).toBe(2);
    // the steps in turns are counted apart: each kind records the same dispatches every time
    expect(Number.isInteger(e.chain.dispatchesPerToken) && e.chain.dispatchesPerToken > 0).toBe(true);
    expect(Number.isInteger(e.verify.dispatchesPerBlock) && e.verify.dispatchesPerBlock > 0).toBe(true);
    expect(e.chain.breakdown.bindGroupsPerToken).toBe(0);
    expect(e.verify.bindGroupsPerBlock).toBe(0);
  });
});
