/**
 * rmsnorm (shaders/rmsnorm.wgsl `main`, and `rows_wg` on the GPU kernel class) and RoPE
 * (shaders/rope.wgsl) of src/model/ops.ts against their CPU twins (src/reference/ops.ts rmsNorm,
 * src/reference/rope.ts Rope), f32 and bf16 outputs, and their row invariance (M rows together == each
 * row alone, byte for byte). Error bounds: helpers/kernel-lab.ts; each test states its rounding count.
 *
 * scripts/test.sh runs this file on lavapipe, again on SwiftShader and again with the GPU kernel class
 * forced (RINGSIDE_KERNELS=gpu).
 */
import { describe, expect, it } from 'vitest';
import { uploadBuffer } from '../../src/gpu/buffers.ts';
import * as op from '../../src/model/ops.ts';
import { ropeTable } from '../../src/model/rope-tables.ts';
import type { RopeSpec } from '../../src/format/config.ts';
import { bf16ToNumber } from '../../src/format/dtype.ts';
import { rmsNorm } from '../../src/reference/ops.ts';
import { Rope } from '../../src/reference/rope.ts';
import {
  ADAPTER,
  ROW_COUNTS,
  SENTINEL,
  U,
  bf16Rne,
  bf16Trunc,
  expectBf16,
  expectClose,
  expectSameBytes,
  f32Bits,
  f32Interval,
  range,
  Rand,
  RSQRT_REF_ULP,
  scaleInterval,
  useLab,
  type Lab,
} from './helpers/kernel-lab.ts';

/**
 * rmsnorm's rounding count (shaders/rmsnorm.wgsl): sum x^2 a Neumaier sum of rounded squares (2U
 * relative, second-order terms aside; the workgroup form merges partial sums with two-sums, also
 * compensated), / D and + eps (1 each, no cancellation): 4U on the mean square; rsqrt_ref halves that
 * and adds its own RSQRT_REF_ULP (2 RSQRT_REF_ULP U relative): 5U; x * inv and * w (1 each): 7U of |v|.
 * Residual mode: + out (1, relative to |out + v|) and * post (1): 9U of (|out| + |v|) |post|.
 */
const NORM_TOL = (4 / 2 + 2 * RSQRT_REF_ULP + 2) * U;
const NORM_RESIDUAL_TOL = NORM_TOL + 2 * U;
/** RoPE: a cos - b sin (and b cos + a sin): two products and one add, 3U of |a cos| + |b sin|; the
 *  GPU's tables hold the same f32 values as the reference's (src/numerics/rope-angles.ts, 'f32'). */
const ROPE_TOL = 3 * U;

describe(`GPU kernels: rmsnorm and RoPE vs the CPU float64 reference (${ADAPTER})`, () => {
  let lab: Lab;
  useLab((l) => (lab = l));

  // -- rmsnorm ---------------------------------------------------------------------------------------
  describe('rmsnorm', () => {
    interface NormCase {
      name: string;
      rows: number;
      D: number;
      weighted: boolean;
      residual?: number; // post scale
      inPad?: number;
      outPad?: number;
      sd?: number;
    }
    const cases: NormCase[] = [
      { name: 'weighted', rows: 5, D: 64, weighted: true },
      { name: 'weighted, large values', rows: 3, D: 96, weighted: true, sd: 300 },
      { name: 'weightless (v_norm)', rows: 12, D: 32, weighted: false },
      { name: 'weightless, tiny values (eps dominates)', rows: 4, D: 16, weighted: false, sd: 1e-4 },
      { name: 'residual, post scale 1', rows: 4, D: 96, weighted: true, residual: 1 },
      { name: 'residual, post scale 0.7373 (layer scalar)', rows: 3, D: 64, weighted: true, residual: 0.7373 },
      { name: 'strided rows', rows: 3, D: 40, weighted: true, inPad: 6, outPad: 10 },
      // Rows long enough for the GPU form's batched loads (rows_wg: 8 elements per invocation per batch,
      // 256 invocations): D 4160 gives every invocation two whole batches and some a partial third,
      // D 2200 every invocation one whole batch and some a partial second.
      { name: 'weighted, long rows', rows: 2, D: 4160, weighted: true },
      { name: 'residual, long rows', rows: 2, D: 2200, weighted: true, residual: 0.7373 },
      {
        name: 'strided rows, residual, weightless',
        rows: 5,
        D: 24,
        weighted: false,
        residual: 1.5,
        inPad: 3,
        outPad: 1,
      },
    ];
    const eps = 1e-6;
    for (const c of cases) {
      it(`${c.name}: ${c.rows} rows of D ${c.D}, f32 and bf16 outputs`, async () => {
        const r = new Rand(4000 + c.rows * 31 + c.D);
        const inStride = c.D + (c.inPad ?? 0);
        const outStride = c.D + (c.outPad ?? 0);
        const x = r.f32s(c.rows * inStride, c.sd ?? 1);
        const wBits = Uint16Array.from({ length: c.D }, () => bf16Trunc(r.uniform(0.3, 2.5)));
        const w = Float64Array.from(wBits, bf16ToNumber);
        const wb = lab.own(uploadBuffer(lab.device, wBits, 'norm.w'));
        // out: sentinel padding; in residual mode the rows hold the residual stream
        const out0 = new Uint32Array(c.rows * outStride).fill(SENTINEL);
        const resid = r.f32s(c.rows * outStride, 2);
        const resid16 = resid.map(bf16Rne); // the bf16 run's residual stream is bf16
        if (c.residual !== undefined)
          for (let m = 0; m < c.rows; m++)
            for (let i = 0; i < c.D; i++) out0[m * outStride + i] = f32Bits(resid[m * outStride + i]);
        const out0b = Uint32Array.from(out0);
        if (c.residual !== undefined)
          for (let m = 0; m < c.rows; m++)
            for (let i = 0; i < c.D; i++) out0b[m * outStride + i] = f32Bits(resid16[m * outStride + i]);
        const xb = lab.f32(x);
        const out = lab.u32(out0);
        const outB = lab.u32(out0b);
        const post = Math.fround(c.residual ?? 1);
        const args = (round: boolean): op.NormArgs => ({
          rows: c.rows,
          D: c.D,
          eps,
          round,
          inStride,
          outStride,
          residual: c.residual !== undefined ? { postScale: post } : undefined,
        });
        await lab.run((rec) => {
          op.rmsnorm(rec, xb, c.weighted ? wb : null, out, lab.dummy, args(false));
          op.rmsnorm(rec, xb, c.weighted ? wb : null, outB, lab.dummy, args(true));
        });
        const got = await lab.read(out, c.rows * outStride);
        const gotB = await lab.read(outB, c.rows * outStride);
        const ref = new Float64Array(c.rows * c.D),
          mag = new Float64Array(c.rows * c.D);
        const exactB = new Float64Array(c.rows * c.D),
          loB = new Float64Array(c.rows * c.D),
          hiB = new Float64Array(c.rows * c.D);
        const g = new Float32Array(c.rows * c.D),
          gB = new Float32Array(c.rows * c.D);
        for (let m = 0; m < c.rows; m++) {
          const v = rmsNorm(x, m * inStride, c.D, c.weighted ? w : null, Math.fround(eps));
          for (let i = 0; i < c.D; i++) {
            const at = m * c.D + i,
              o = m * outStride + i;
            g[at] = got[o];
            gB[at] = gotB[o];
            const dv = NORM_TOL * Math.abs(v[i]); // f32 bound of the norm itself
            if (c.residual === undefined) {
              ref[at] = v[i];
              mag[at] = Math.abs(v[i]);
              [exactB[at], loB[at], hiB[at]] = [v[i], v[i] - dv, v[i] + dv];
            } else {
              ref[at] = (resid[o] + v[i]) * post;
              mag[at] = (Math.abs(resid[o]) + Math.abs(v[i])) * Math.abs(post);
              // out = r(r(out + r(v)) * post): propagate the range of v through both inner roundings
              exactB[at] = bf16Rne(resid16[o] + bf16Rne(v[i])) * post;
              [loB[at], hiB[at]] = scaleInterval(
                bf16Rne(resid16[o] + bf16Rne(v[i] - dv)),
                bf16Rne(resid16[o] + bf16Rne(v[i] + dv)),
                post,
              );
            }
          }
          const padU = new Uint32Array(got.buffer, got.byteOffset + (m * outStride + c.D) * 4, outStride - c.D);
          expect(
            [...padU].every((u) => u === SENTINEL),
            `row ${m} padding untouched`,
          ).toBe(true);
        }
        expectClose('rmsnorm', g, ref, mag, c.residual === undefined ? NORM_TOL : NORM_RESIDUAL_TOL);
        expectBf16('rmsnorm bf16', gB, exactB, loB, hiB);
      });
    }

    it(`row-invariant: M in ${ROW_COUNTS.join(',')} rows together == each row alone (residual mode)`, async () => {
      const r = new Rand(4500);
      const D = 48;
      const wb = lab.own(
        uploadBuffer(
          lab.device,
          Uint16Array.from({ length: D }, () => bf16Trunc(r.uniform(0.5, 2))),
          'w',
        ),
      );
      for (const M of ROW_COUNTS) {
        const x = r.f32s(M * D);
        const resid = r.f32s(M * D);
        const block = lab.f32(resid);
        const alone = range(M).map((m) => lab.f32(resid.subarray(m * D, (m + 1) * D)));
        await lab.run((rec) => {
          const a = (rows: number): op.NormArgs => ({
            rows,
            D,
            eps: 1e-6,
            round: false,
            residual: { postScale: 0.81 },
          });
          op.rmsnorm(rec, lab.f32(x), wb, block, lab.dummy, a(M));
          alone.forEach((buf, m) => op.rmsnorm(rec, lab.f32(x.subarray(m * D, (m + 1) * D)), wb, buf, lab.dummy, a(1)));
        });
        const all = await lab.bytes(block, M * D);
        for (let m = 0; m < M; m++)
          expectSameBytes(
            `rmsnorm M=${M} row ${m}`,
            all.subarray(m * D * 4, (m + 1) * D * 4),
            await lab.bytes(alone[m], D),
          );
      }
    });
  });

  // -- rope ------------------------------------------------------------------------------------------
  describe('rope (rotate-half, cos/sin tables)', () => {
    const DEFAULT: RopeSpec = { ropeType: 'default', theta: 10000, partialRotary: 1 };
    const PROPORTIONAL: RopeSpec = { ropeType: 'proportional', theta: 1_000_000, partialRotary: 0.25 };
    const cases: { spec: RopeSpec; d: number; heads: number; M: number; pos0: number }[] = [
      { spec: DEFAULT, d: 32, heads: 3, M: 4, pos0: 0 },
      { spec: DEFAULT, d: 64, heads: 2, M: 3, pos0: 517 },
      { spec: DEFAULT, d: 16, heads: 4, M: 2, pos0: 1021 },
      { spec: PROPORTIONAL, d: 64, heads: 4, M: 2, pos0: 1023 },
      { spec: PROPORTIONAL, d: 128, heads: 1, M: 5, pos0: 3 },
      { spec: PROPORTIONAL, d: 32, heads: 2, M: 3, pos0: 200 },
    ];
    const positions = 1100;
    for (const c of cases) {
      it(`${c.spec.ropeType}${c.spec.ropeType === 'proportional' ? ` (partial ${c.spec.partialRotary})` : ''}: d ${c.d}, ${c.heads} heads, positions ${c.pos0}..${c.pos0 + c.M - 1}`, async () => {
        const r = new Rand(5000 + c.d + c.pos0);
        const table = ropeTable(lab.device, c.spec, c.d, positions);
        lab.own(table.cos);
        lab.own(table.sin);
        const rope = new Rope(c.d, c.spec, 'f32');
        expect(table.rotPairs).toBe(
          c.spec.ropeType === 'default' ? c.d / 2 : Math.floor((c.spec.partialRotary * c.d) / 2),
        );
        const n = c.M * c.heads * c.d;
        const x = r.f32s(n, 2);
        const xb = lab.f32(x);
        const xr = lab.f32(x);
        await lab.run((rec) => {
          op.rope(rec, xb, table, c.heads, c.d, c.pos0, { M: c.M, round: false });
          op.rope(rec, xr, table, c.heads, c.d, c.pos0, { M: c.M, round: true });
        });
        const got = await lab.read(xb, n);
        const gotB = await lab.read(xr, n);
        const ref = Float64Array.from(x);
        const mag = new Float64Array(n);
        const half = c.d / 2;
        const rotated = new Array<boolean>(n).fill(false);
        for (let m = 0; m < c.M; m++) {
          const { cos, sin } = rope.table(c.pos0 + m);
          for (let h = 0; h < c.heads; h++) {
            const off = (m * c.heads + h) * c.d;
            rope.apply(ref, off, c.pos0 + m);
            for (let i = 0; i < table.rotPairs; i++) {
              const a = Math.abs(x[off + i]),
                b = Math.abs(x[off + i + half]);
              mag[off + i] = a * Math.abs(cos[i]) + b * Math.abs(sin[i]);
              mag[off + i + half] = b * Math.abs(cos[i]) + a * Math.abs(sin[i]);
              rotated[off + i] = rotated[off + i + half] = true;
            }
          }
        }
        // Zero-frequency pairs are the identity: the kernel must leave them byte for byte.
        const xin = new Float32Array(x);
        for (let i = 0; i < n; i++) {
          if (!rotated[i]) {
            expect(f32Bits(got[i]), `unrotated element ${i}`).toBe(f32Bits(xin[i]));
            expect(f32Bits(gotB[i]), `unrotated element ${i} (bf16 run)`).toBe(f32Bits(xin[i]));
          }
        }
        const idx = range(n).filter((i) => rotated[i]);
        expectClose(
          'rope',
          idx.map((i) => got[i]),
          idx.map((i) => ref[i]),
          idx.map((i) => mag[i]),
          ROPE_TOL,
        );
        const iv = f32Interval(
          idx.map((i) => ref[i]),
          idx.map((i) => mag[i]),
          ROPE_TOL,
        );
        expectBf16(
          'rope bf16',
          Float32Array.from(idx, (i) => gotB[i]),
          idx.map((i) => ref[i]),
          iv.lo,
          iv.hi,
        );
      });
    }

    it(`row-invariant: M in ${ROW_COUNTS.join(',')} rows at p == each row alone at p + j`, async () => {
      const r = new Rand(5500);
      const d = 32,
        heads = 3,
        p = 40;
      const table = ropeTable(lab.device, PROPORTIONAL, d, 64);
      const tableD = ropeTable(lab.device, DEFAULT, d, 64);
      [table.cos, table.sin, tableD.cos, tableD.sin].forEach((b) => lab.own(b));
      for (const t of [table, tableD]) {
        for (const M of ROW_COUNTS) {
          const x = r.f32s(M * heads * d);
          const block = lab.f32(x);
          const alone = range(M).map((m) => lab.f32(x.subarray(m * heads * d, (m + 1) * heads * d)));
          await lab.run((rec) => {
            op.rope(rec, block, t, heads, d, p, { M, round: false });
            alone.forEach((b, m) => op.rope(rec, b, t, heads, d, p + m, { M: 1, round: false }));
          });
          const all = await lab.bytes(block, M * heads * d);
          for (let m = 0; m < M; m++)
            expectSameBytes(
              `rope M=${M} row ${m}`,
              all.subarray(m * heads * d * 4, (m + 1) * heads * d * 4),
              await lab.bytes(alone[m], heads * d),
            );
        }
      }
    });
  });
});
