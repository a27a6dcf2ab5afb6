/**
 * The matmul kernels of src/model/ops.ts (op.matmul) against a CPU float64 computation of the same math,
 * on seeded random data and several small shapes, driven exactly as the engine drives them (Recorder +
 * the ops wrappers, weights uploaded from safetensors bytes by TensorUploader, split into row parts where
 * asked): affine-quantized linears through `affine` (shaders/matmul.wgsl), the exact kernels `lanes` and
 * `tile` (shaders/matmul_lanes*.wgsl) and `coop` (shaders/matmul_coop.wgsl), dense linears
 * (shaders/matmul_dense.wgsl), and the split-K variants of the inexact policies. The CPU twin of the
 * quantized kernels is src/reference/quantized-matmul.ts (dense: src/reference/ops.ts matvec).
 *
 * Error bounds: helpers/kernel-lab.ts (how they are counted) and helpers/linears.ts quantizedTol (each
 * kernel's count). bf16 outputs: the GPU's bits must equal the CPU value rounded to nearest-even, unless
 * the f32 error range straddles a bf16 rounding boundary (expectBf16).
 *
 * Row invariance (docs/DESIGN.md, "exact by construction"): M rows computed together and each row alone
 * give byte-identical outputs.
 *
 * scripts/test.sh runs this file on lavapipe, again on SwiftShader and again with the GPU kernel class
 * forced (RINGSIDE_KERNELS=gpu).
 */
import { CaptureRecorder } from '../../src/gpu/capture-recorder.ts';
import type { CoopTuning } from '../../src/gpu/coop-tuning.ts';
import type { KernelCache } from '../../src/gpu/kernels.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as op from '../../src/model/ops.ts';
import {
  ADAPTER,
  ROW_COUNTS,
  SENTINEL,
  U,
  expectBf16,
  expectClose,
  expectSameBytes,
  f32Bits,
  f32Interval,
  Rand,
  sameAsAffine,
  useLab,
  type Lab,
} from './helpers/kernel-lab.ts';
import {
  AFFINE_TOL,
  DENSE_TOL,
  affineLinear,
  affineReference,
  affineRows,
  denseLinear,
  denseRows,
  expectRowInvariantMatmul,
  quantizedBounds,
  type AffineCase,
  type AffineWeights,
  type DenseDtype,
} from './helpers/linears.ts';

describe(`GPU kernels: matmul vs the CPU float64 reference (${ADAPTER})`, () => {
  let lab: Lab;
  useLab((l) => (lab = l));

  // -- matmul, affine ------------------------------------------------------------------------------
  describe('matmul, affine (MLX 4/8-bit)', () => {
    const cases: (AffineCase & { M: number })[] = [
      { bits: 4, gs: 32, K: 64, N: 40, M: 3 },
      { bits: 4, gs: 64, K: 192, N: 33, M: 5, rowsPerPart: 12 },
      { bits: 4, gs: 128, K: 256, N: 24, M: 2, rowsPerPart: 10 },
      { bits: 8, gs: 32, K: 96, N: 17, M: 4, rowsPerPart: 7 },
      { bits: 8, gs: 64, K: 128, N: 64, M: 1 },
      { bits: 8, gs: 128, K: 384, N: 20, M: 3, rowsPerPart: 8 },
      { bits: 2, gs: 64, K: 128, N: 16, M: 2, rowsPerPart: 5 },
      // coop stages x in chunks of 16 KiB: 66 groups are 2 chunks of one row, 5 of four rows
      { bits: 4, gs: 64, K: 4224, N: 12, M: 5 },
    ];
    for (const c of cases) {
      const parts = c.rowsPerPart ? Math.ceil(c.N / c.rowsPerPart) : 1;
      it(`${c.bits}-bit gs ${c.gs}: K ${c.K}, N ${c.N}, M ${c.M}, ${parts} part(s), f32 and bf16 outputs`, async () => {
        const r = new Rand(1000 + c.bits * 100 + c.gs + c.K);
        const A = await affineLinear(lab, r, c);
        const x = r.f32s(c.M * c.K);
        const xb = lab.f32(x, 'x');
        const y = lab.sentinel(c.M * c.N);
        const yb = lab.sentinel(c.M * c.N);
        await lab.run((rec) => {
          op.matmul(rec, A.lin, xb, y, { M: c.M, round: false });
          op.matmul(rec, A.lin, xb, yb, { M: c.M, round: true });
        });
        const o = affineRows(A, c, x, c.M);
        // The engine's step kernel (lanes, coop on the GPU class, affine where they cannot run): the
        // largest of their rounding counts (helpers/linears.ts quantizedTol).
        const bound = quantizedBounds(undefined, c.gs, o);
        expectClose('matmul.affine', await lab.read(y, c.M * c.N), o.ref, bound, 1);
        const iv = f32Interval(o.ref, bound, 1);
        expectBf16('matmul.affine bf16', await lab.read(yb, c.M * c.N), o.ref, iv.lo, iv.hi);
      });
    }

    it('writes only its columns at x/y strides (n_offset per part, padding untouched)', async () => {
      const r = new Rand(77);
      const c = { bits: 4 as const, gs: 32, K: 64, N: 21, rowsPerPart: 8 };
      const M = 3,
        xStride = c.K + 5,
        yStride = c.N + 7;
      const A = await affineLinear(lab, r, c);
      const x = r.f32s(M * xStride);
      const y = lab.sentinel(M * yStride);
      await lab.run((rec) => op.matmul(rec, A.lin, lab.f32(x), y, { M, round: false }, xStride, yStride));
      const got = await lab.read(y, M * yStride);
      const gotU = new Uint32Array(got.buffer, got.byteOffset, got.length);
      for (let m = 0; m < M; m++) {
        const o = affineReference(A, c, x, m * xStride);
        // an x stride that is not a multiple of 4: the affine kernel runs (AFFINE_TOL, helpers/linears.ts)
        expectClose(`matmul.affine row ${m}`, got.subarray(m * yStride, m * yStride + c.N), o.ref, o.mag, AFFINE_TOL);
        for (let i = c.N; i < yStride; i++) expect(gotU[m * yStride + i], `padding y[${m}, ${i}]`).toBe(SENTINEL);
      }
    });

    for (const M of ROW_COUNTS) {
      it(`row-invariant: M = ${M} rows together == each row alone, byte for byte (3 parts)`, async () => {
        const r = new Rand(500 + M);
        const c = { bits: 4 as const, gs: 64, K: 128, N: 30, rowsPerPart: 11 };
        const A = await affineLinear(lab, r, c);
        await expectRowInvariantMatmul(lab, r, A.lin, M, c.K, c.N);
      });
    }
  });

  // -- matmul, the engine's exact kernels: 'lanes' (matmul_lanes_*.wgsl main, decode and verify) and
  // 'tile' (matmul_lanes_*.wgsl tile, prefill) ---------------------------------------------------------
  // 'lanes': four features per invocation, x shared through subgroups where the device has them;
  // 'tile': each chunk of weights unpacked once for a block of 8 rows, all rows always computed. Their
  // rows must not depend on M or on the slot a row takes (byte equality with the row alone, M = 1..8
  // and past one block), and their values must agree with the CPU reference and with the
  // one-output-per-invocation `affine` kernel. Linears a kernel cannot run fall back to `affine`.
  describe('matmul, exact kernels lanes / tile / coop', () => {
    /**
     * The coop matmul of the same M random rows under two coop tunings (`base`, then `other`: kernel caches of
     * src/gpu/coop-tuning.ts's shapes) gives every output the same bytes.
     */
    async function expectCoopSettingsAgree(
      label: string,
      r: Rand,
      A: AffineWeights,
      c: AffineCase,
      M: number,
      base: CoopTuning,
      other: CoopTuning,
    ): Promise<void> {
      const xb = lab.f32(r.f32s(M * c.K));
      const [a, b] = [lab.sentinel(M * c.N), lab.sentinel(M * c.N)];
      await lab.run((rec) => op.matmul(rec, A.lin, xb, a, { M, round: false }, c.K, c.N, 'coop'), lab.tuned(base));
      await lab.run((rec) => op.matmul(rec, A.lin, xb, b, { M, round: false }, c.K, c.N, 'coop'), lab.tuned(other));
      expectSameBytes(`${label}, M = ${M}`, await lab.bytes(b, M * c.N), await lab.bytes(a, M * c.N));
    }
    const ROW_KERNELS = ['lanes', 'tile', 'coop'] as const;
    const invCases: (AffineCase & { name: string })[] = [
      { name: '4-bit gs 64, 3 parts', bits: 4, gs: 64, K: 128, N: 30, rowsPerPart: 11 },
      { name: '8-bit gs 32, 2 parts', bits: 8, gs: 32, K: 96, N: 70, rowsPerPart: 40 },
      { name: '2-bit gs 64', bits: 2, gs: 64, K: 192, N: 17 },
      { name: '4-bit gs 128, N > one lanes workgroup of 64 invocations', bits: 4, gs: 128, K: 256, N: 131 },
      { name: '8-bit gs 64, N > two tile / lanes workgroups (256 features each)', bits: 8, gs: 64, K: 128, N: 600 },
      {
        name: '4-bit gs 32, N > two lanes workgroups (256 features each), 2 parts',
        bits: 4,
        gs: 32,
        K: 96,
        N: 600,
        rowsPerPart: 530,
      },
      { name: '8-bit gs 128', bits: 8, gs: 128, K: 256, N: 9 },
      // coop stages x in chunks of 16 KiB (64 groups of gs 64 for one row, 16 for four rows): K spans
      // several chunks at every row count, the last one partial
      { name: '4-bit gs 64, x in several staged chunks', bits: 4, gs: 64, K: 4224, N: 20 },
      { name: '8-bit gs 32, x in several staged chunks', bits: 8, gs: 32, K: 2080, N: 40 },
    ];
    // The coop rule gives several features per invocation only to linears of 6144 outputs or more (stacked
    // q/k/v, the MLP's gate/up, the LM head: too big for these tests), so R = 2 and R = 4 are forced here on
    // the same cases. R = 4 runs single rows through row_slots (four slots in one loop, another lane layout)
    // and blocks as two passes of two slots, R = 2 single rows as passes: all must give every feature the
    // bytes of R = 1 (whose single rows take row_slots' one-slot loop, its blocks the passes: the
    // row-invariance tests below hold those two to the same bytes).
    // Timeout: the first case of each R compiles its pipelines, minutes on llvmpipe with a cold shader cache
    // (a fresh CI machine; one case ran past the default 120 s there).
    for (const R of [2, 4] as const) {
      describe(`coop with ${R} features per invocation (R = ${R})`, { timeout: 600_000 }, () => {
        it(`the tuned kernel cache dispatches coop with R = ${R}, the lab's own with the rule's R = 1`, async () => {
          const c = invCases[0];
          const A = await affineLinear(lab, new Rand(890), c);
          const [xb, y] = [lab.f32(new Float32Array(c.K)), lab.sentinel(c.N)];
          const constants = (kernels: KernelCache) => {
            const rec = new CaptureRecorder(lab.device, kernels, 'coop-tuning');
            op.matmul(rec, A.lin, xb, y, { M: 1, round: false }, c.K, c.N, 'coop');
            rec.release();
            // one coop dispatch per row part (after the x group sums' kernel)
            const coop = rec.captured.filter((d) => d.key!.startsWith('matmul_coop'));
            return coop.map((d) => JSON.parse(d.key!.split('#')[2]) as Record<string, number>);
          };
          expect(constants(lab.tuned({ features: R })).map((k) => k.R)).toEqual([R, R, R]);
          expect(constants(lab.kernels).map((k) => k.R)).toEqual([1, 1, 1]);
        });
        for (const c of invCases) {
          it(`coop R = ${R} row-invariant (${c.name}, K ${c.K}, N ${c.N}): M = 1..8 and 13 together == each row alone`, async () => {
            const r = new Rand(900 + c.K + c.N + c.bits);
            const A = await affineLinear(lab, r, c);
            for (const M of [1, 2, 3, 4, 5, 6, 7, 8, 13])
              await expectRowInvariantMatmul(lab, r, A.lin, M, c.K, c.N, 'coop', lab.tuned({ features: R }));
          });
          it(`coop R = ${R} gives every feature the bytes of R = 1 (${c.name}; M = 1, 5, 13)`, async () => {
            const r = new Rand(950 + c.K + c.N + c.bits);
            const A = await affineLinear(lab, r, c);
            for (const M of [1, 5, 13])
              await expectCoopSettingsAgree(`coop R = ${R} vs R = 1`, r, A, c, M, { features: 1 }, { features: R });
          });
        }
      });
    }

    // Workgroups of 512 (ops.coopWorkgroup: the MLP's 4-bit linears, 32 KiB of workgroup memory) are chosen only
    // for linears of 12288 outputs or inputs or more, so they are forced here: the workgroup changes no
    // arithmetic, so every feature has the bytes of workgroups of 256, at every row count (row_slots, unstaged
    // and staged passes, R = 1 and 4).
    const MLP_GATE = { outFeatures: 15360, inFeatures: 3840, bits: 4 }; // the 12B's
    const MLP_DOWN = { outFeatures: 3840, inFeatures: 15360, bits: 4 };
    describe('coop in workgroups of 512', { timeout: 600_000 }, () => {
      it('the rule: the MLP 4-bit gate/up and down, on devices that allow 512; not the LM head, o_proj, 8-bit', () => {
        const big = {
          maxComputeInvocationsPerWorkgroup: 1024,
          maxComputeWorkgroupSizeX: 1024,
          maxComputeWorkgroupStorageSize: 32768,
        };
        const small = {
          maxComputeInvocationsPerWorkgroup: 256,
          maxComputeWorkgroupSizeX: 256,
          maxComputeWorkgroupStorageSize: 16384,
        };
        expect(op.coopWorkgroup(big, MLP_GATE)).toBe(512);
        expect(op.coopWorkgroup(big, MLP_DOWN)).toBe(512);
        expect(op.coopWorkgroup(small, MLP_DOWN), 'a device of 256 invocations').toBe(256);
        expect(op.coopWorkgroup(big, { ...MLP_DOWN, bits: 8 }), '8-bit down').toBe(256);
        expect(op.coopWorkgroup(big, { ...MLP_GATE, bits: 8 }), '8-bit gate/up').toBe(256);
        expect(op.coopWorkgroup(big, { outFeatures: 262144, inFeatures: 3840, bits: 4 }), 'LM head').toBe(256);
        expect(op.coopWorkgroup(big, { outFeatures: 3840, inFeatures: 4096, bits: 4 }), 'o_proj').toBe(256);
        expect(op.coopWorkgroup(big, { outFeatures: 8192, inFeatures: 3840, bits: 4 }), 'stacked q, k, v').toBe(256);
      });
      for (const R of [1, 4] as const)
        for (const c of [invCases[0], invCases[1], invCases[7]]) {
          it(`coop R = ${R}, WG 512 gives the bytes of WG 256 (${c.name}; M = 1, 4, 5)`, async () => {
            const limits = lab.device.limits;
            if (limits.maxComputeInvocationsPerWorkgroup < 512 || limits.maxComputeWorkgroupStorageSize < 32768) {
              // SwiftShader (256 invocations at most): the MLP's widths keep workgroups of 256 there.
              expect(op.coopWorkgroup(limits, MLP_GATE)).toBe(256);
              return;
            }
            expect(op.coopWorkgroup(limits, MLP_GATE), 'a device that allows 512 takes it for the MLP widths').toBe(
              512,
            );
            const r = new Rand(1950 + c.K + c.N + c.bits);
            const A = await affineLinear(lab, r, c);
            for (const M of [1, 4, 5])
              await expectCoopSettingsAgree(
                'coop WG 512 vs 256',
                r,
                A,
                c,
                M,
                { features: R, workgroup: 256 },
                { features: R, workgroup: 512 },
              );
          });
        }
    });

    for (const kernel of ROW_KERNELS) {
      for (const c of invCases) {
        it(`${kernel} row-invariant (${c.name}, K ${c.K}, N ${c.N}): M = 1..8 and 13 together == each row alone, every row position, byte for byte (f32 and bf16)`, async () => {
          const r = new Rand(700 + c.K + c.N + c.bits + kernel.length);
          const A = await affineLinear(lab, r, c);
          for (const M of [1, 2, 3, 4, 5, 6, 7, 8, 13])
            await expectRowInvariantMatmul(lab, r, A.lin, M, c.K, c.N, kernel);
        });
      }
    }

    const cases: (AffineCase & { M: number })[] = [
      { bits: 4, gs: 32, K: 64, N: 40, M: 3 },
      { bits: 4, gs: 64, K: 192, N: 33, M: 5, rowsPerPart: 12 },
      { bits: 4, gs: 128, K: 256, N: 24, M: 9, rowsPerPart: 10 },
      { bits: 8, gs: 32, K: 96, N: 17, M: 4, rowsPerPart: 7 },
      { bits: 8, gs: 64, K: 128, N: 64, M: 1 },
      { bits: 8, gs: 128, K: 384, N: 20, M: 8, rowsPerPart: 8 },
      { bits: 2, gs: 64, K: 128, N: 16, M: 2, rowsPerPart: 5 },
      // coop stages x in chunks of 16 KiB: 66 groups are 2 chunks of one row, 5 of four rows
      { bits: 4, gs: 64, K: 4224, N: 12, M: 5 },
    ];
    for (const kernel of ROW_KERNELS) {
      for (const c of cases) {
        const parts = c.rowsPerPart ? Math.ceil(c.N / c.rowsPerPart) : 1;
        it(`${kernel} ${c.bits}-bit gs ${c.gs}: K ${c.K}, N ${c.N}, M ${c.M}, ${parts} part(s): == CPU reference and == affine within f32 tolerance`, async () => {
          const r = new Rand(1500 + c.bits * 100 + c.gs + c.K + kernel.length);
          const A = await affineLinear(lab, r, c);
          const x = r.f32s(c.M * c.K);
          const xb = lab.f32(x, 'x');
          const [y, yb, yAffine] = [lab.sentinel(c.M * c.N), lab.sentinel(c.M * c.N), lab.sentinel(c.M * c.N)];
          await lab.run((rec) => {
            op.matmul(rec, A.lin, xb, y, { M: c.M, round: false }, c.K, c.N, kernel);
            op.matmul(rec, A.lin, xb, yb, { M: c.M, round: true }, c.K, c.N, kernel);
            op.matmul(rec, A.lin, xb, yAffine, { M: c.M, round: false }, c.K, c.N, 'affine');
          });
          const o = affineRows(A, c, x, c.M);
          const got = await lab.read(y, c.M * c.N);
          const old = await lab.read(yAffine, c.M * c.N);
          // The kernel's rounding count (helpers/linears.ts quantizedTol: e.g. lanes gs 64: 10 U, coop
          // gs 64: 21 U of the centred magnitude; affine where the kernel cannot run: 5 U).
          const bound = quantizedBounds(kernel, c.gs, o);
          expectClose(`matmul.${kernel}`, got, o.ref, bound, 1);
          // Against the affine kernel: each is within its bound of the exact value, so within their sum of each other.
          expectClose(
            `matmul.${kernel}-vs-affine`,
            got,
            old,
            bound.map((b, i) => b + AFFINE_TOL * o.mag[i]),
            1,
          );
          const same = got.reduce((n, v, i) => n + (f32Bits(v) === f32Bits(old[i]) ? 1 : 0), 0);
          sameAsAffine.set(kernel, [
            (sameAsAffine.get(kernel)?.[0] ?? 0) + same,
            (sameAsAffine.get(kernel)?.[1] ?? 0) + got.length,
          ]);
          const iv = f32Interval(o.ref, bound, 1);
          expectBf16(`matmul.${kernel} bf16`, await lab.read(yb, c.M * c.N), o.ref, iv.lo, iv.hi);
        });
      }
    }

    it('exact kernels write only their columns at x/y strides (x stride a multiple of 4; padding untouched)', async () => {
      for (const kernel of ROW_KERNELS) {
        const r = new Rand(78 + kernel.length);
        const c = { bits: 4 as const, gs: 32, K: 64, N: 21, rowsPerPart: 8 };
        const M = 6,
          xStride = c.K + 8,
          yStride = c.N + 7;
        const A = await affineLinear(lab, r, c);
        const x = r.f32s(M * xStride);
        const y = lab.sentinel(M * yStride);
        await lab.run((rec) => op.matmul(rec, A.lin, lab.f32(x), y, { M, round: false }, xStride, yStride, kernel));
        const got = await lab.read(y, M * yStride);
        const gotU = new Uint32Array(got.buffer, got.byteOffset, got.length);
        for (let m = 0; m < M; m++) {
          const o = affineReference(A, c, x, m * xStride);
          expectClose(
            `matmul.${kernel} row ${m}`,
            got.subarray(m * yStride, m * yStride + c.N),
            o.ref,
            quantizedBounds(kernel, c.gs, o),
            1,
          );
          for (let i = c.N; i < yStride; i++)
            expect(gotU[m * yStride + i], `${kernel} padding y[${m}, ${i}]`).toBe(SENTINEL);
        }
        lab.release();
      }
    });

    it('an x stride that is not a multiple of 4 falls back to affine (same bytes), whatever M', async () => {
      for (const kernel of ROW_KERNELS) {
        const r = new Rand(79);
        const c = { bits: 4 as const, gs: 32, K: 64, N: 21 };
        const M = 3,
          xStride = c.K + 5;
        const A = await affineLinear(lab, r, c);
        const x = r.f32s(M * xStride);
        const xb = lab.f32(x);
        const [a, b] = [lab.sentinel(M * c.N), lab.sentinel(M * c.N)];
        await lab.run((rec) => {
          op.matmul(rec, A.lin, xb, a, { M, round: false }, xStride, c.N, kernel);
          op.matmul(rec, A.lin, xb, b, { M, round: false }, xStride, c.N, 'affine');
        });
        expectSameBytes(`${kernel} fallback`, await lab.bytes(a, M * c.N), await lab.bytes(b, M * c.N));
        lab.release();
      }
    });
  });

  // -- matmul, dense ---------------------------------------------------------------------------------
  describe('matmul, dense (bf16 / f16 / f32 weights)', () => {
    const cases: { dtype: DenseDtype; K: number; N: number; M: number; rowsPerPart?: number }[] = [
      { dtype: 'BF16', K: 64, N: 24, M: 3 },
      { dtype: 'BF16', K: 100, N: 13, M: 5, rowsPerPart: 5 },
      { dtype: 'F16', K: 48, N: 20, M: 2 },
      { dtype: 'F16', K: 33, N: 7, M: 4, rowsPerPart: 3 }, // odd K: rows and parts not word-aligned
      { dtype: 'F32', K: 80, N: 16, M: 3 },
      { dtype: 'F32', K: 31, N: 9, M: 2, rowsPerPart: 4 },
    ];
    for (const c of cases) {
      const parts = c.rowsPerPart ? Math.ceil(c.N / c.rowsPerPart) : 1;
      it(`${c.dtype}: K ${c.K}, N ${c.N}, M ${c.M}, ${parts} part(s), f32 and bf16 outputs`, async () => {
        const r = new Rand(2000 + c.K * 7 + c.N);
        const { lin, w } = await denseLinear(lab, r, c.N, c.K, c.dtype, c.rowsPerPart);
        const x = r.f32s(c.M * c.K);
        const xb = lab.f32(x);
        const y = lab.sentinel(c.M * c.N);
        const yb = lab.sentinel(c.M * c.N);
        await lab.run((rec) => {
          op.matmul(rec, lin, xb, y, { M: c.M, round: false });
          op.matmul(rec, lin, xb, yb, { M: c.M, round: true });
        });
        const { ref, mag } = denseRows(w, c.N, c.K, x, c.M);
        // a compensated sum of rounded products: DENSE_TOL = 3 U of sum|w x| (helpers/linears.ts)
        expectClose(`matmul.dense.${c.dtype}`, await lab.read(y, c.M * c.N), ref, mag, DENSE_TOL);
        const iv = f32Interval(ref, mag, DENSE_TOL);
        expectBf16(`matmul.dense.${c.dtype} bf16`, await lab.read(yb, c.M * c.N), ref, iv.lo, iv.hi);
      });
    }
    for (const dtype of ['BF16', 'F16', 'F32'] as const) {
      it(`row-invariant (${dtype}): M in ${ROW_COUNTS.join(',')} together == each row alone, byte for byte`, async () => {
        const r = new Rand(600 + dtype.length);
        const { lin } = await denseLinear(lab, r, 19, 40, dtype, 7);
        for (const M of ROW_COUNTS) await expectRowInvariantMatmul(lab, r, lin, M, 40, 19);
      });
    }
  });

  // -- a dispatch of more than 65535 workgroups (a 262144-row LM head), folded into 2-D ---------------
  describe('dispatches folded into 2-D (over maxComputeWorkgroupsPerDimension workgroups)', () => {
    it('dense f32 matmul with M * N = 60 * 70001 outputs (an LM head over a large vocabulary)', async () => {
      const M = 60,
        N = 70001,
        K = 8;
      expect(Math.ceil((M * N) / 64)).toBeGreaterThan(lab.device.limits.maxComputeWorkgroupsPerDimension);
      const r = new Rand(13100);
      const { lin, w } = await denseLinear(lab, r, N, K, 'F32');
      const x = r.f32s(M * K);
      const y = lab.sentinel(M * N);
      await lab.run((rec) => op.matmul(rec, lin, lab.f32(x), y, { M, round: false }));
      const got = await lab.read(y, M * N);
      const { ref, mag } = denseRows(w, N, K, x, M);
      expectClose('matmul.dense.F32', got, ref, mag, DENSE_TOL);
    });
  });

  // -- inexact kernel variants of the parity-lab policies (src/model/policy.ts) ----------------------
  // Split-K (ops.ts matmulSplitK): each K range reduced by the exact kernel (the other columns of x
  // zeroed, which adds exact zeros), the partials added in range order in plain f32. Bound: the exact
  // kernel's (each range's error is bounded by its share of the magnitudes) plus split - 1 rounded adds
  // of partials, each at most U times the running sum's magnitude (<= mag).
  describe('inexact variants: split-K matmul', () => {
    for (const [c, split] of [
      [{ bits: 4, gs: 64, K: 256, N: 20, M: 3, rowsPerPart: 8 }, 2],
      [{ bits: 8, gs: 32, K: 160, N: 9, M: 2 }, 3],
    ] as [AffineCase & { M: number }, number][]) {
      it(`matmul affine_split ${split}: ${c.bits}-bit gs ${c.gs}, K ${c.K}, N ${c.N}, M ${c.M}`, async () => {
        const r = new Rand(11000 + c.K + split);
        const A = await affineLinear(lab, r, c);
        const x = r.f32s(c.M * c.K);
        const y = lab.sentinel(c.M * c.N);
        await lab.run((rec) => op.matmul(rec, A.lin, lab.f32(x), y, { M: c.M, round: false, split }));
        const o = affineRows(A, c, x, c.M);
        const bound = quantizedBounds(undefined, c.gs, o).map((b, i) => b + (split - 1) * U * o.mag[i]);
        expectClose('matmul.affine_split', await lab.read(y, c.M * c.N), o.ref, bound, 1);
      });
    }
    for (const dtype of ['BF16', 'F16', 'F32'] as const) {
      it(`matmul main_split 2 (${dtype}): K 70, N 11, M 3, 2 parts`, async () => {
        const r = new Rand(11100 + dtype.length);
        const { lin, w } = await denseLinear(lab, r, 11, 70, dtype, 6);
        const x = r.f32s(3 * 70);
        const y = lab.sentinel(3 * 11);
        await lab.run((rec) => op.matmul(rec, lin, lab.f32(x), y, { M: 3, round: false, split: 2 }));
        const { ref, mag } = denseRows(w, 11, 70, x, 3);
        expectClose(`matmul.dense_split.${dtype}`, await lab.read(y, 33), ref, mag, DENSE_TOL + (2 - 1) * U);
      });
    }
  });
});
