/**
 * The GPU form of rmsnorm (rmsnorm.wgsl `rows_wg`) fuses what a layer does after a residual norm: the
 * next norm of the residual stream (NormArgs.then) and the group sums the next matmuls read
 * (NormArgs.sums). The fusion must not change a single bit: fused == the same steps as separate
 * dispatches, byte for byte, and row-invariant (M rows together == each row alone), for the GPU
 * kernel class (forced here, whatever the adapter) and the software class (separate dispatches).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import type { CoopTuning } from '../../src/gpu/coop-tuning.ts';
import { KernelCache, type PipelinePool } from '../../src/gpu/kernels.ts';
import { forceKernelClass, type KernelClass } from '../../src/gpu/kernel-class.ts';
import { Recorder } from '../../src/gpu/recorder.ts';
import { readBytes, storageBuffer, uploadBuffer } from '../../src/gpu/buffers.ts';
import { syntheticAffine } from '../../src/bench/synthetic-gpu.ts';
import * as op from '../../src/model/ops.ts';
import { createAttentionScratch, outSumsFit } from '../../src/model/attention-op.ts';
import { ropeTable } from '../../src/model/rope-tables.ts';
import type { RopeSpec } from '../../src/format/config.ts';

function rand(n: number, seed: number, scale = 1): Float32Array {
  let s = seed >>> 0 || 1;
  return Float32Array.from({ length: n }, () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return ((s >>> 0) / 2 ** 32 - 0.5) * 2 * scale;
  });
}
/** bf16 weights near 1, packed in pairs. */
function bf16Weights(n: number, seed: number): Uint32Array {
  const f = rand(n + (n % 2), seed, 0.5).map((v) => 1 + v);
  const bits = new Uint32Array(f.buffer).map((b) => b >>> 16);
  return Uint32Array.from({ length: bits.length / 2 }, (_, i) => (bits[2 * i] | (bits[2 * i + 1] << 16)) >>> 0);
}

/** The GPU of a describe block's tests: made before them, destroyed after (with any forced kernel class undone). */
function useTestGpu(): () => GpuContext {
  let ctx: GpuContext | undefined;
  beforeAll(async () => {
    ctx = await testGpu();
  });
  afterAll(() => {
    forceKernelClass(undefined);
    ctx?.destroy();
  });
  return () => {
    if (!ctx) throw new Error('no test GPU yet: use it inside a test');
    return ctx;
  };
}

/**
 * The pipelines of the tests' kernel caches, shared: caches that differ only in their coop tuning then compile
 * only the pipelines whose override constants differ (a coop compile takes minutes on a cold lavapipe).
 */
const pool: PipelinePool = { modules: new Map(), pipelines: new Map() };

/** A kernel cache of the given class (the class is read when the cache is made), with a coop tuning if given. */
function kernelsOf(device: GPUDevice, cls: KernelClass, coop?: CoopTuning): KernelCache {
  forceKernelClass(cls);
  try {
    return new KernelCache(device, { pool, ...(coop ? { coop } : {}) });
  } finally {
    forceKernelClass(undefined);
  }
}

describe('fused residual norm + next norm + group sums (rmsnorm rows_wg)', () => {
  const gpu = useTestGpu();

  // Long enough for rows_wg's batched loads (8 elements per invocation, 256 invocations), the last one partial.
  const D = 2240;
  // The M = 5 case's input rows (residual-norm input a, residual stream h); row m alone is its slice.
  const A = rand(5 * D, 11);
  const Hs = rand(5 * D, 12, 4);
  const run = async (cls: KernelClass, a0: Float32Array, h0: Float32Array, fused: boolean, round: boolean) => {
    const device = gpu().device;
    const M = a0.length / D;
    const kernels = kernelsOf(device, cls);
    const lin = syntheticAffine(device, 'next', 32, D, 4, 64, 3);
    const a = uploadBuffer(device, a0, 'a');
    const h = uploadBuffer(device, h0, 'h');
    const w1 = uploadBuffer(device, bf16Weights(D, 5), 'w1');
    const w2 = uploadBuffer(device, bf16Weights(D, 6), 'w2');
    const xn = storageBuffer(device, M * D * 4, 'xn');
    const dummy = storageBuffer(device, 16, 'dummy');
    const rows: op.Rows = { M, round };
    const rec = new Recorder(device, kernels, 'fused-norm-test');
    let sums: op.GroupSums | undefined;
    const base = { rows: M, D, eps: 1e-6, round, residual: { postScale: 0.75 } };
    if (fused) {
      sums = op.rmsnorm(rec, a, w1, h, dummy, {
        ...base,
        nextNorm: { weight: w2, out: xn },
        sums: { lin, rows, slot: 'test' },
      });
    } else {
      op.rmsnorm(rec, a, w1, h, dummy, base);
      op.rmsnorm(rec, h, w2, xn, dummy, { rows: M, D, eps: 1e-6, round });
      sums = op.groupSums(rec, lin, xn, rows, D, 'test');
    }
    rec.submit();
    expect(sums).toBeDefined();
    const out = {
      h: await readBytes(device, h, M * D * 4),
      xn: await readBytes(device, xn, M * D * 4),
      xs: await readBytes(device, sums!.buffer, M * (D / 64) * 4),
    };
    [a, h, w1, w2, xn, dummy].forEach((b) => b.destroy());
    lin.destroy();
    return out;
  };
  const same = (x: Uint8Array, y: Uint8Array) => Buffer.from(x).equals(Buffer.from(y));

  for (const cls of ['gpu', 'software'] as const) {
    for (const round of [false, true]) {
      it(`${cls} kernels, ${round ? 'bf16' : 'f32'}: fused == separate dispatches, and M = 5 rows together == each row alone`, async () => {
        const fused = await run(cls, A, Hs, true, round);
        const separate = await run(cls, A, Hs, false, round);
        for (const k of ['h', 'xn', 'xs'] as const)
          expect(same(fused[k], separate[k]), `${k}: fused vs separate`).toBe(true);
        // each row alone: the same random rows, generated for M = 5, taken one at a time
        for (let m = 0; m < 5; m++) {
          const one = await run(cls, A.subarray(m * D, (m + 1) * D), Hs.subarray(m * D, (m + 1) * D), true, round);
          expect(same(one.h, fused.h.subarray(m * D * 4, (m + 1) * D * 4)), `h row ${m}`).toBe(true);
          expect(same(one.xn, fused.xn.subarray(m * D * 4, (m + 1) * D * 4)), `xn row ${m}`).toBe(true);
          const xsRow = (D / 64) * 4; // bytes of one row's group sums (group size 64)
          expect(same(one.xs, fused.xs.subarray(m * xsRow, (m + 1) * xsRow)), `xs row ${m}`).toBe(true);
        }
      });
    }
  }
});

/**
 * The GPU form of the MLP's first half (matmul_coop.wgsl `gate_up`): gate and up projections and the
 * GeGLU in one dispatch, byte-equal to two coop matmuls and elementwise.wgsl geglu, and row-invariant.
 * Single rows (M = 1, and the last row of M = 5 and 13) take gate_up_row, both matrices in one loop in
 * another lane layout; blocks take two passes. K spans more groups than a feature has invocations
 * (17 or 34 groups, T = 16), so that some invocations take two or three groups; both R (features per
 * invocation) run, as the rule gives R = 2 to the real MLP shapes (8192 outputs or more).
 */
describe('fused gate/up/GeGLU (matmul_coop gate_up)', () => {
  const gpu = useTestGpu();

  for (const [bits, gs, R] of [
    [4, 64, 1],
    [4, 64, 2],
    [8, 32, 2],
  ] as const) {
    // 600 s, not the default 120: on lavapipe with a cold Mesa shader cache (every CI machine) compiling
    // the coop pipelines of one (BITS, R) pair (gate_up, main and the GeGLU, unrolled over up to four rows
    // and feature slots) took 60-120 s of this test's time on a 2-core machine, the comparisons seconds.
    it(`${bits}-bit gs ${gs}, R = ${R}: fused == separate, M = 1, 2, 4, 5, 8, 13 (f32 and bf16), and each row alone`, {
      timeout: 600_000,
    }, async () => {
      const kernels = kernelsOf(gpu().device, 'gpu', { features: R });
      const device = gpu().device;
      const N = 40,
        K = 1088;
      const gate = syntheticAffine(device, 'gate', N, K, bits, gs, 21);
      const up = syntheticAffine(device, 'up', N, K, bits, gs, 22);
      const xAll = rand(13 * K, 23);
      const compute = async (x: Float32Array, M: number, round: boolean, fused: boolean) => {
        const xb = uploadBuffer(device, x, 'x');
        const g = storageBuffer(device, M * N * 4, 'g');
        const u = storageBuffer(device, M * N * 4, 'u');
        const rec = new Recorder(device, kernels, 'gate-up-test');
        const rows: op.Rows = { M, round };
        if (fused) op.gateUp(rec, gate, up, xb, g, u, rows);
        else {
          op.matmul(rec, gate, xb, g, rows, K, N, 'coop');
          op.matmul(rec, up, xb, u, rows, K, N, 'coop');
          op.geglu(rec, g, u, M * N, round);
        }
        rec.submit();
        const out = await readBytes(device, g, M * N * 4);
        [xb, g, u].forEach((b) => b.destroy());
        return out;
      };
      for (const round of [false, true]) {
        for (const M of [1, 2, 4, 5, 8, 13]) {
          const x = xAll.subarray(0, M * K);
          const fused = await compute(x, M, round, true);
          expect(
            Buffer.from(fused).equals(Buffer.from(await compute(x, M, round, false))),
            `M=${M} round=${round}: fused vs separate`,
          ).toBe(true);
          for (const m of [0, M - 1]) {
            const alone = await compute(x.subarray(m * K, (m + 1) * K), 1, round, true);
            expect(
              Buffer.from(alone).equals(Buffer.from(fused.subarray(m * N * 4, (m + 1) * N * 4))),
              `M=${M} row ${m} alone`,
            ).toBe(true);
          }
        }
      }
      gate.destroy();
      up.destroy();
    });
  }
});

/**
 * The fused gate_up with the down projection's x group sums (matmul_coop.wgsl `gate_up_sums`, GPU class): its
 * output g byte-equal to gate_up's or to two coop matmuls and the GeGLU at the same invocations per feature,
 * and its sums byte-equal to matmul.wgsl affine_xsum over g; row-invariant through both (M = 5: a pass of four
 * rows and a single row). T = 8 with two features
 * per invocation gives a workgroup 64 consecutive features (the 12B's MLP, see ops.coopThreads): whole groups of
 * 64; T = 16 gives 32, whole groups of 32 (8-bit here). N = 192: three or six groups, over several workgroups.
 */
describe('fused gate/up/GeGLU + down x sums (matmul_coop gate_up_sums)', () => {
  const gpu = useTestGpu();

  // Each case compares with one reference (`how`), to keep the cold compiles on CPU adapters few (a coop
  // pipeline takes minutes there): the 12B's configuration with the separate matmuls at T = 8 (the strong
  // form: gate_up's arithmetic is main's), the 8-bit one with gate_up, whose pipeline the test above compiled.
  for (const [bits, gs, T, ref] of [
    [4, 64, 8, 'separate'],
    [8, 32, 16, 'fused'],
  ] as const) {
    // 600 s: cold lavapipe compiles of the coop pipelines (see the gate_up test above).
    it(`${bits}-bit gs ${gs}, T = ${T}: g == ${ref}, sums == affine_xsum, M = 1, 5, and the last row alone`, {
      timeout: 600_000,
    }, async () => {
      const device = gpu().device;
      expect(
        device.limits.maxStorageBuffersPerShaderStage,
        'the test adapter binds gate_up_sums',
      ).toBeGreaterThanOrEqual(10);
      const kernels = kernelsOf(device, 'gpu', { features: 2, threads: T });
      const N = 192,
        K = 1088;
      const gate = syntheticAffine(device, 'gate', N, K, bits, gs, 31);
      const up = syntheticAffine(device, 'up', N, K, bits, gs, 32);
      const down = syntheticAffine(device, 'down', 24, N, bits, gs, 33);
      const xAll = rand(5 * K, 34);
      const sumsFloats = (M: number) => M * (N / gs);
      // how: 'sums' gate_up_sums; 'fused' gate_up, then affine_xsum; 'separate' two matmuls, geglu, affine_xsum
      const compute = async (
        x: Float32Array,
        M: number,
        round: boolean,
        how: 'sums' | 'fused' | 'separate',
        cache = kernels,
      ) => {
        const xb = uploadBuffer(device, x, 'x');
        const g = storageBuffer(device, M * N * 4, 'g');
        const u = storageBuffer(device, M * N * 4, 'u');
        const rec = new Recorder(device, cache, 'gate-up-sums-test');
        const rows: op.Rows = { M, round };
        let sums: op.GroupSums | undefined;
        const xs = op.groupSums(rec, gate, xb, rows, K, 'x'); // the x sums gate and up read
        if (how === 'sums') {
          expect(op.downSumsFused(rec, gate, down, rows)).toBe(true);
          sums = op.gateUp(rec, gate, up, xb, g, u, rows, xs, down);
          expect(rec.dispatches, 'x sums, then gate_up_sums: one dispatch').toBe(2);
        } else {
          if (how === 'fused') expect(op.gateUp(rec, gate, up, xb, g, u, rows, xs)).toBeUndefined();
          else {
            op.matmul(rec, gate, xb, g, rows, K, N, 'coop');
            op.matmul(rec, up, xb, u, rows, K, N, 'coop');
            op.geglu(rec, g, u, M * N, round);
          }
          sums = op.groupSums(rec, down, g, rows, N, 'test');
        }
        rec.submit();
        const gOut = await readBytes(device, g, M * N * 4);
        const sOut = await readBytes(device, sums!.buffer, sumsFloats(M) * 4);
        [xb, g, u].forEach((b) => b.destroy());
        return { g: Buffer.from(gOut), s: Buffer.from(sOut) };
      };
      for (const round of [false, true]) {
        for (const M of [1, 5]) {
          const x = xAll.subarray(0, M * K);
          const got = await compute(x, M, round, 'sums');
          const want = await compute(x, M, round, ref);
          expect(got.g.equals(want.g), `M=${M} round=${round}: g vs ${ref}`).toBe(true);
          expect(got.s.equals(want.s), `M=${M} round=${round}: sums vs ${ref} + affine_xsum`).toBe(true);
          const m = M - 1;
          const alone = await compute(x.subarray(m * K, (m + 1) * K), 1, round, 'sums');
          const per = N / gs;
          expect(alone.s.equals(got.s.subarray(m * per * 4, (m + 1) * per * 4)), `M=${M} last row alone`).toBe(true);
        }
      }
      if (bits === 4) {
        // Workgroups of 512 (ops.coopWorkgroup: the 12B's 4-bit MLP on GPUs that allow them): 128 features a
        // workgroup, two of down's groups of sums each, the second workgroup half past N: the bytes of 256.
        const wide = kernelsOf(device, 'gpu', { features: 2, threads: T, workgroup: 512 });
        for (const M of [1, 5]) {
          const x = xAll.subarray(0, M * K);
          const small = await compute(x, M, false, 'sums');
          const big = await compute(x, M, false, 'sums', wide);
          expect(big.g.equals(small.g), `M=${M}: g in workgroups of 512 vs 256`).toBe(true);
          expect(big.s.equals(small.s), `M=${M}: sums in workgroups of 512 vs 256`).toBe(true);
        }
      }
      // where a workgroup's features are not whole groups of down, the sums are left to affine_xsum
      const single = kernelsOf(device, 'gpu', { features: 1, threads: T });
      expect(op.downSumsFused(new Recorder(device, single, 'probe'), gate, down, { M: 1, round: false })).toBe(false);
      [gate, up, down].forEach((l) => l.destroy());
    });
  }
});

/**
 * The q/k norm with its RoPE in one rows_wg dispatch (GPU class): byte-equal to the norm and then
 * rope.wgsl as separate dispatches, and row-invariant (M positions together == each position alone).
 */
describe('fused q/k norm + RoPE (rmsnorm rows_wg)', () => {
  const gpu = useTestGpu();

  const specs: [string, RopeSpec][] = [
    ['default', { ropeType: 'default', theta: 10000, partialRotary: 1 }],
    ['proportional 0.25', { ropeType: 'proportional', theta: 1e6, partialRotary: 0.25 }],
  ];
  for (const [name, spec] of specs) {
    for (const round of [false, true]) {
      it(`${name} RoPE, ${round ? 'bf16' : 'f32'}: fused == separate, 6 positions x 3 heads together == each position alone`, async () => {
        const kernels = kernelsOf(gpu().device, 'gpu');
        const device = gpu().device;
        const d = 128,
          heads = 3,
          M = 6,
          p0 = 37;
        const table = ropeTable(device, spec, d, 64);
        const w = uploadBuffer(device, bf16Weights(d, 9), 'qnorm');
        const dummy = storageBuffer(device, 16, 'dummy');
        const xAll = rand(M * heads * d, 31, 3);
        const compute = async (rowsOf: number, pos0: number, x: Float32Array, fused: boolean) => {
          const xb = uploadBuffer(device, x, 'raw-q');
          const out = storageBuffer(device, x.length * 4, 'q');
          const rec = new Recorder(device, kernels, 'norm-rope-test');
          const args = { rows: rowsOf * heads, D: d, eps: 1e-6, round };
          if (fused) op.rmsnorm(rec, xb, w, out, dummy, { ...args, rope: { table, heads, pos0 } });
          else {
            op.rmsnorm(rec, xb, w, out, dummy, args);
            op.rope(rec, out, table, heads, d, pos0, { M: rowsOf, round });
          }
          rec.submit();
          const b = await readBytes(device, out, x.length * 4);
          [xb, out].forEach((x) => x.destroy());
          return b;
        };
        const fused = await compute(M, p0, xAll, true);
        expect(Buffer.from(fused).equals(Buffer.from(await compute(M, p0, xAll, false))), 'fused vs separate').toBe(
          true,
        );
        const rowBytes = heads * d * 4;
        for (let m = 0; m < M; m++) {
          const alone = await compute(1, p0 + m, xAll.subarray(m * heads * d, (m + 1) * heads * d), true);
          expect(
            Buffer.from(alone).equals(Buffer.from(fused.subarray(m * rowBytes, (m + 1) * rowBytes))),
            `position ${p0 + m} alone`,
          ).toBe(true);
        }
        [w, dummy, table.cos, table.sin].forEach((b) => b.destroy());
      });
    }
  }
});

/**
 * rmsnorm.wgsl `qkv_rows` (op.qkvNorm on GPUs) runs an attention block's q norm + RoPE, k norm + RoPE and
 * weightless v norm in one dispatch. It must give the bytes of the three separate norms (the software
 * class's dispatches, and the GPU class's own rows_wg calls), with k_eq_v's v reading k's raw rows, and be
 * row-invariant (6 positions together == each position alone).
 */
describe('fused q + k + v norms (rmsnorm qkv_rows)', () => {
  const gpu = useTestGpu();

  const spec: RopeSpec = { ropeType: 'proportional', theta: 1e6, partialRotary: 0.25 };
  for (const round of [false, true]) {
    for (const kEqV of [false, true]) {
      it(`${round ? 'bf16' : 'f32'}${kEqV ? ', k_eq_v' : ''}: one dispatch == three norms, together == each position alone`, async () => {
        const device = gpu().device;
        const d = 128,
          qHeads = 4,
          kvHeads = 2,
          M = 6,
          p0 = 29;
        const table = ropeTable(device, spec, d, 64);
        const wq = uploadBuffer(device, bf16Weights(d, 5), 'qnorm');
        const wk = uploadBuffer(device, bf16Weights(d, 6), 'knorm');
        const dummy = storageBuffer(device, 16, 'dummy');
        const qAll = rand(M * qHeads * d, 41, 3);
        const kAll = rand(M * kvHeads * d, 42, 3);
        const vAll = rand(M * kvHeads * d, 43, 3);
        const slice = (a: Float32Array, m: number, rows: number, heads: number) =>
          a.subarray(m * heads * d, (m + rows) * heads * d);
        const compute = async (cls: KernelClass, rows: number, m0: number, separate: boolean) => {
          const kernels = kernelsOf(device, cls);
          const xq = uploadBuffer(device, slice(qAll, m0, rows, qHeads), 'raw-q');
          const xk = uploadBuffer(device, slice(kAll, m0, rows, kvHeads), 'raw-k');
          const xv = kEqV ? xk : uploadBuffer(device, slice(vAll, m0, rows, kvHeads), 'raw-v');
          const outs = [qHeads, kvHeads, kvHeads].map((h, i) => storageBuffer(device, rows * h * d * 4, `out${i}`));
          const rec = new Recorder(device, kernels, 'qkv-norm-test');
          const base = { D: d, eps: 1e-6, round };
          const pos0 = p0 + m0;
          if (separate) {
            op.rmsnorm(rec, xq, wq, outs[0], dummy, {
              ...base,
              rows: rows * qHeads,
              rope: { table, heads: qHeads, pos0 },
            });
            op.rmsnorm(rec, xk, wk, outs[1], dummy, {
              ...base,
              rows: rows * kvHeads,
              rope: { table, heads: kvHeads, pos0 },
            });
            op.rmsnorm(rec, xv, null, outs[2], dummy, { ...base, rows: rows * kvHeads });
          } else {
            op.qkvNorm(rec, dummy, {
              ...base,
              q: { x: xq, out: outs[0], rows: rows * qHeads, weight: wq, heads: qHeads },
              k: { x: xk, out: outs[1], rows: rows * kvHeads, weight: wk, heads: kvHeads },
              v: { x: xv, out: outs[2], rows: rows * kvHeads },
              rope: { table, pos0 },
            });
          }
          const dispatches = rec.dispatches;
          rec.submit();
          const bytes = await Promise.all(outs.map((o) => readBytes(device, o, o.size)));
          [xq, xk, xv, ...outs].forEach((b) => b.destroy());
          return { bytes: Buffer.concat(bytes.map((b) => Buffer.from(b))), dispatches };
        };
        const fused = await compute('gpu', M, 0, false);
        // the fused path is what GPUs run: this adapter's stage must take its ten storage bindings
        expect(fused.dispatches, 'one dispatch').toBe(1);
        expect(fused.bytes.equals((await compute('gpu', M, 0, true)).bytes), 'vs rows_wg norms').toBe(true);
        expect(fused.bytes.equals((await compute('software', M, 0, false)).bytes), 'vs software class').toBe(true);
        const parts = [qHeads, kvHeads, kvHeads].map((h) => h * d * 4); // bytes per position of q, k, v
        for (let m = 0; m < M; m++) {
          const alone = (await compute('gpu', 1, m, false)).bytes;
          let at = 0;
          parts.forEach((n, s) => {
            const whole = fused.bytes.subarray(at + m * n, at + (m + 1) * n);
            expect(
              alone
                .subarray(parts.slice(0, s).reduce((a, b) => a + b, 0))
                .subarray(0, n)
                .equals(whole),
              `position ${m}, part ${s}`,
            ).toBe(true);
            at += M * n;
          });
        }
        [wq, wk, dummy, table.cos, table.sin].forEach((b) => b.destroy());
      });
    }
  }
});

/**
 * attention.wgsl combine_fused with xs_group (op.attention's outSums) also writes the group sums o_proj's exact
 * kernels read: they must be the bytes matmul.wgsl affine_xsum (op.groupSums) computes from the attention
 * output, for whole and partial last workgroups and both group sizes, and the output itself must not move.
 */
describe('attention combine + o_proj group sums (attention combine_fused xs_group)', () => {
  const gpu = useTestGpu();

  // [M, heads, d]: 3 x 4 x 128 fills whole workgroups of 256 values; 3 x 3 x 96 leaves the last one partial
  const shapes = [
    { M: 3, heads: 4, d: 128, gs: 64 },
    { M: 3, heads: 3, d: 96, gs: 32 },
  ];
  for (const s of shapes) {
    for (const round of [false, true]) {
      it(`M ${s.M}, ${s.heads} heads x d ${s.d}, groups of ${s.gs}, ${round ? 'bf16' : 'f32'}: sums == affine_xsum, output unchanged`, async () => {
        const device = gpu().device;
        const kernels = kernelsOf(device, 'gpu');
        const keys = 70; // linear mode: row j reads keys 0 .. p + j
        const p = keys - s.M;
        const K = s.heads * s.d;
        expect(outSumsFit(s.heads, s.d, s.gs), 'the shape is one combine_fused can sum').toBe(true);
        const q = uploadBuffer(device, rand(s.M * K, 51, 2), 'q');
        const kc = uploadBuffer(device, rand(keys * s.d, 52, 2), 'k');
        const vc = uploadBuffer(device, rand(keys * s.d, 53, 2), 'v');
        const scratch = createAttentionScratch(
          device,
          { heads: s.heads, qWidth: K, maxKeys: keys, prefillRows: s.M, stepRows: s.M },
          'test-attn',
        );
        const lin = syntheticAffine(device, 'o', 8, K, 4, s.gs, 7);
        const run = async (withSums: boolean) => {
          const out = storageBuffer(device, s.M * K * 4, 'attn-out');
          const xs = storageBuffer(device, s.M * (K / s.gs) * 4, 'xs');
          const rec = new Recorder(device, kernels, 'combine-sums-test');
          const wrote = op.attention(rec, {
            M: s.M,
            heads: s.heads,
            kvHeads: 1,
            d: s.d,
            mode: 'linear',
            window: keys,
            base: 0,
            p,
            round,
            split: 0,
            q,
            kCache: kc,
            vCache: vc,
            kStage: kc,
            vStage: vc,
            out,
            scratch: scratch.step,
            fused: true,
            outSums: withSums ? { buffer: xs, groupSize: s.gs } : undefined,
          });
          const ref = op.groupSums(rec, lin, out, { M: s.M, round });
          rec.submit();
          const bytes = {
            out: Buffer.from(await readBytes(device, out, out.size)),
            sums: Buffer.from(await readBytes(device, xs, xs.size)),
            ref: Buffer.from(await readBytes(device, ref.buffer, xs.size)),
          };
          [out, xs].forEach((b) => b.destroy());
          return { wrote, ...bytes };
        };
        const fused = await run(true);
        expect(fused.wrote, 'attention wrote the sums').toBe(true);
        expect(fused.sums.equals(fused.ref), 'combine_fused sums vs affine_xsum').toBe(true);
        expect(fused.out.equals((await run(false)).out), 'output with and without the sums').toBe(true);
        [q, kc, vc, ...scratch.buffers].forEach((b) => b.destroy());
        lin.destroy();
      });
    }
  }
});
