/**
 * The element-wise kernels of src/model/ops.ts against their CPU twins (src/reference/ops.ts): embed
 * (shaders/embed.wgsl), geglu and softcap (shaders/elementwise.wgsl), argmax (shaders/argmax.wgsl), f32
 * and bf16 outputs; and the accuracy figures that shaders/common.wgsl states for its reference-grade
 * transcendentals exp_ref, tanh_ref and rsqrt_ref, measured in f32 ULPs of a float64 truth.
 * Error bounds: helpers/kernel-lab.ts; each test states its rounding count.
 *
 * scripts/test.sh runs this file on lavapipe, again on SwiftShader and again with the GPU kernel class
 * forced (RINGSIDE_KERNELS=gpu).
 */
import { describe, expect, it } from 'vitest';
import { readF32, storageBuffer, uploadBuffer } from '../../src/gpu/buffers.ts';
import { shaderSource } from '../../src/gpu/shaders.ts';
import * as op from '../../src/model/ops.ts';
import type { GpuLinear } from '../../src/model/gpu-linear.ts';
import { geluTanh, softcap as softcapRef } from '../../src/reference/ops.ts';
import {
  ADAPTER,
  EXP_REF_ULP,
  RSQRT_REF_ULP,
  SENTINEL,
  U,
  bf16Rne,
  bitsF32,
  bytesOf,
  expectBf16,
  expectClose,
  f32Bits,
  f32Interval,
  geluBound,
  range,
  Rand,
  scaleInterval,
  tanhRefBound,
  ulpF32,
  useLab,
  type Lab,
} from './helpers/kernel-lab.ts';
import { affineLinear, denseLinear, uploadTensors, type AffineCase } from './helpers/linears.ts';
import { NAN_ROW_ID } from '../../src/model/nan-row.ts';

/** embed: v = scale * q + bias (2 roundings, relative to |scale q| + |bias|; dense tables: none), then * the
 *  embedding scale (1): 3U of (|scale q| + |bias|) * scale. */
const EMBED_TOL = 3 * U;

/** Bound on |softcap(x) - cap tanh(x / cap)| (shaders/elementwise.wgsl: cap * tanh_ref(x / cap)): the
 *  division rounds (U |a|, which moves tanh by (1 - t^2) U |a|), tanh_ref's own error (tanhRefBound), the
 *  product with cap rounds (U |result|). */
function softcapBound(x: number, cap: number): number {
  const a = x / cap;
  const t = Math.tanh(a);
  return cap * (tanhRefBound(Math.fround(a)) + (1 - t * t) * U * Math.abs(a)) + U * Math.abs(cap * t);
}

describe(`GPU kernels: embed, element-wise, argmax, transcendentals vs the CPU float64 reference (${ADAPTER})`, () => {
  let lab: Lab;
  useLab((l) => (lab = l));

  // -- embed -------------------------------------------------------------------------------------------
  describe('embed (tied table lookup times scale)', () => {
    const affineCases: (AffineCase & { M: number })[] = [
      { bits: 4, gs: 32, K: 64, N: 50, M: 7, rowsPerPart: 16 },
      { bits: 8, gs: 64, K: 128, N: 20, M: 5 },
      { bits: 4, gs: 128, K: 256, N: 12, M: 4, rowsPerPart: 5 },
      { bits: 8, gs: 32, K: 96, N: 9, M: 3, rowsPerPart: 2 },
    ];
    for (const c of affineCases) {
      const parts = c.rowsPerPart ? Math.ceil(c.N / c.rowsPerPart) : 1;
      it(`affine ${c.bits}-bit gs ${c.gs}: V ${c.N}, H ${c.K}, M ${c.M}, ${parts} part(s)`, async () => {
        const r = new Rand(3000 + c.N + c.K);
        const A = await affineLinear(lab, r, c);
        // the first and last rows of the table, the first row of the second part, a repeat, random rows
        const ids = [
          c.N - 1,
          0,
          Math.min(c.rowsPerPart ?? 1, c.N - 1),
          c.N - 1,
          ...range(c.M - 4).map(() => r.int(c.N)),
        ];
        await checkEmbed(lab, A.lin, ids, c.K, (id, col) => {
          const g = id * (c.K / c.gs) + Math.floor(col / c.gs);
          const q = A.codes[id * c.K + col];
          return { v: A.scales[g] * q + A.biases[g], mag: Math.abs(A.scales[g] * q) + Math.abs(A.biases[g]) };
        });
      });
    }
    for (const dtype of ['BF16', 'F16', 'F32'] as const) {
      it(`dense ${dtype}: V 30, H 48, M 6, 4 parts`, async () => {
        const r = new Rand(3100 + dtype.length);
        const { lin, w } = await denseLinear(lab, r, 30, 48, dtype, 8);
        await checkEmbed(lab, lin, [29, 0, 8, 7, 15, 29], 48, (id, col) => ({
          v: w[id * 48 + col],
          mag: Math.abs(w[id * 48 + col]),
        }));
      });
    }

    it('bf16 rounding is round-to-nearest-even: ties, carries, overflow, signs (f32 table, scale 1)', async () => {
      const special = [
        0x3f800000, 0x3f808000, 0x3f818000, 0x3f808001, 0x3f807fff, 0xbf808000, 0xbf818000, 0xbf818001, 0x3fff8000,
        0x3fffffff, 0x407f8000, 0x00808000, 0x00818000, 0x7f7f7fff, 0x7f7f8000, 0xff7f8000, 0x7f7fffff, 0x00000000,
        0x80000000, 0x3eaaaaab, 0x4049fdb0, 0x4049ffff, 0x477fe000, 0x477ff000,
      ];
      const r = new Rand(3200);
      const H = 64;
      const table = new Uint32Array(2 * H);
      special.forEach((b, i) => (table[i] = b));
      for (let i = special.length; i < table.length; i++) table[i] = f32Bits(r.normal(10));
      const { refs, gpu } = await uploadTensors(lab, [
        { name: 'e.weight', dtype: 'F32', shape: [2, H], data: bytesOf(table) },
      ]);
      const lin: GpuLinear = {
        desc: { kind: 'dense', name: 'e', outFeatures: 2, inFeatures: H, weight: refs[0] },
        weight: gpu[0],
      };
      const h = lab.sentinel(2 * H);
      await lab.run((rec) => op.embed(rec, lin, lab.u32([0, 1]), h, 1, { M: 2, round: true }));
      const got = await lab.read(h, 2 * H);
      const want = Float32Array.from(table, (b) => bf16Rne(bitsF32(b)));
      const gotBits = [...new Uint32Array(got.buffer, got.byteOffset, got.length)].map((b) => b.toString(16));
      const wantBits = [...new Uint32Array(want.buffer)].map((b) => b.toString(16));
      expect(gotBits).toEqual(wantBits);
      // spot checks of the independent rounding itself
      expect(f32Bits(bf16Rne(bitsF32(0x3f808000)))).toBe(0x3f800000);
      expect(f32Bits(bf16Rne(bitsF32(0x3f818000)))).toBe(0x3f820000);
      expect(f32Bits(bf16Rne(bitsF32(0x7f7fffff)))).toBe(0x7f800000);
      expect(f32Bits(bf16Rne(bitsF32(0xbf818001)))).toBe(0xbf820000);
    });
  });

  // -- geglu and softcap -------------------------------------------------------------------------------
  describe('element-wise: geglu, softcap', () => {
    for (const n of [1, 63, 64, 65, 1000]) {
      it(`geglu over ${n} elements, f32 and bf16 outputs`, async () => {
        const r = new Rand(6000 + n);
        const a = Float64Array.from({ length: n }, (_, i) =>
          Math.fround(i % 10 === 9 ? r.uniform(-14, 14) : r.normal(2)),
        );
        const b = r.f32s(n);
        const ab = lab.f32(a),
          aR = lab.f32(a),
          bb = lab.f32(b);
        await lab.run((rec) => {
          op.geglu(rec, ab, bb, n, false);
          op.geglu(rec, aR, bb, n, true);
        });
        const ref = a.map((v, i) => geluTanh(v) * b[i]);
        // gelu_tanh's bound (helpers/kernel-lab.ts geluBound: its argument's 7 roundings, tanh_ref's own
        // error, 1 + t, the product) times |b|, and the product with b (U |gelu b|). Where 0.5 x (1 + t)
        // cancels (large negative x) the bound is absolute in |x b|, not relative to the tiny result; where
        // tanh_ref saturates to -1 (|a| > 9.1) the GPU gives 0 and the bound is about the true value itself
        // (error / bound 1.000 in the summary).
        const bound = a.map((v, i) => Math.abs(b[i]) * geluBound(v) + U * Math.abs(ref[i]));
        expectClose('geglu', await lab.read(ab, n), ref, bound, 1);
        // a = r(r(gelu(a)) * b): the range of gelu's f32 value goes through the inner rounding
        const exactB = new Float64Array(n),
          loB = new Float64Array(n),
          hiB = new Float64Array(n);
        for (let i = 0; i < n; i++) {
          const g = geluTanh(a[i]);
          const dg = geluBound(a[i]);
          exactB[i] = bf16Rne(g) * b[i];
          [loB[i], hiB[i]] = scaleInterval(bf16Rne(g - dg), bf16Rne(g + dg), b[i]);
          const d = U * Math.abs(exactB[i]); // the product's own f32 rounding
          loB[i] -= d;
          hiB[i] += d;
        }
        expectBf16('geglu bf16', await lab.read(aR, n), exactB, loB, hiB);
      });
    }
    for (const [n, cap] of [
      [200, 30],
      [65, 50],
      [1, 30],
    ] as const) {
      it(`softcap ${cap} over ${n} elements (small, mid and saturated), f32 and bf16 outputs`, async () => {
        const r = new Rand(6500 + n);
        const vals = [0, -0, 1e-3, -3.7, 3.74, 3.76, 300, -300, 1e4];
        const a = Float64Array.from({ length: n }, (_, i) => Math.fround(i < vals.length ? vals[i] : r.normal(40)));
        const ab = lab.f32(a),
          aR = lab.f32(a);
        await lab.run((rec) => {
          op.softcap(rec, ab, n, cap, false);
          op.softcap(rec, aR, n, cap, true);
        });
        const capF = Math.fround(cap);
        const ref = a.map((v) => softcapRef(v, capF));
        // softcapBound: the division, tanh_ref's own error (tanhRefBound), the product with cap.
        const bound = a.map((v) => softcapBound(v, capF));
        expectClose('softcap', await lab.read(ab, n), ref, bound, 1);
        const iv = f32Interval(ref, bound, 1);
        expectBf16('softcap bf16', await lab.read(aR, n), ref, iv.lo, iv.hi);
      });
    }
  });

  // -- argmax ------------------------------------------------------------------------------------------
  describe('argmax', () => {
    it('first index of the maximum per row, ties included', async () => {
      const r = new Rand(7000);
      const V = 1000;
      const rows: Float32Array[] = [];
      rows.push(Float32Array.from({ length: V }, () => r.normal(3))); // unique max
      const tie = Float32Array.from({ length: V }, () => r.normal(3));
      [999, 400, 17].forEach((i) => (tie[i] = 50));
      rows.push(tie); // -> 17
      const ends = Float32Array.from({ length: V }, () => r.normal(3));
      ends[0] = ends[V - 1] = 50;
      rows.push(ends); // -> 0
      rows.push(new Float32Array(V).fill(-2.5)); // all equal -> 0
      const zeros = new Float32Array(V).fill(-1);
      zeros[3] = 0;
      zeros[5] = -0;
      rows.push(zeros); // +0 == -0: -> 3
      const last = Float32Array.from({ length: V }, (_, i) => i / V);
      rows.push(last); // -> V-1
      const infs = new Float32Array(V).fill(-Infinity);
      infs[777] = -3e38;
      rows.push(infs); // -> 777
      const want = [argmaxFirst(rows[0]), 17, 0, 0, 3, V - 1, 777];
      expect(argmaxFirst(rows[0])).toBe([...rows[0]].indexOf(Math.max(...rows[0])));
      const M = rows.length;
      const flat = new Float32Array(M * V);
      rows.forEach((row, i) => flat.set(row, i * V));
      const ids = lab.u32(new Uint32Array(M).fill(SENTINEL));
      const idsAlone = range(M).map(() => lab.u32([SENTINEL]));
      await lab.run((rec) => {
        op.argmax(rec, lab.f32(flat), ids, M, V);
        rows.forEach((row, m) => op.argmax(rec, lab.f32(row), idsAlone[m], 1, V));
      });
      expect([...(await lab.readU32(ids, M))]).toEqual(want);
      const alone: number[] = [];
      for (const b of idsAlone) alone.push((await lab.readU32(b, 1))[0]);
      expect(alone, 'each row alone').toEqual(want);
    });

    it('a row holding a NaN gives NAN_ROW_ID, whatever its maximum (as shaders/argmax.wgsl documents)', async () => {
      const V = 64;
      const a = Float32Array.from({ length: V }, (_, i) => Math.sin(i));
      a[0] = NaN;
      a[10] = NaN;
      a[40] = 5;
      const ids = lab.u32([SENTINEL, SENTINEL]);
      const rows = new Float32Array(2 * V);
      rows.set(a);
      rows.set(
        a.map((v) => (Number.isNaN(v) ? 0 : v)),
        V,
      ); // the same row without its NaNs: the maximum
      await lab.run((rec) => op.argmax(rec, lab.f32(rows), ids, 2, V));
      expect([...(await lab.readU32(ids, 2))]).toEqual([NAN_ROW_ID, 40]);
    });
  });

  // -- a dispatch of more than 65535 workgroups (a 262144-row LM head), folded into 2-D ---------------
  describe('dispatches folded into 2-D (over maxComputeWorkgroupsPerDimension workgroups)', () => {
    it('softcap over 64 * 65535 + 100 elements', async () => {
      const n = 64 * 65535 + 100;
      expect(Math.ceil(n / 64)).toBeGreaterThan(lab.device.limits.maxComputeWorkgroupsPerDimension);
      const a = new Float32Array(n);
      for (let i = 0; i < n; i++) a[i] = (((i * 2654435761) >>> 0) % 20001) / 100 - 100; // cheap, varied, in [-100, 100]
      const ab = lab.f32(a);
      await lab.run((rec) => op.softcap(rec, ab, n, 30, false));
      const got = await lab.read(ab, n);
      const ref = new Float64Array(n),
        bound = new Float64Array(n);
      for (let i = 0; i < n; i++) {
        ref[i] = softcapRef(a[i], 30);
        bound[i] = softcapBound(a[i], 30);
      }
      expectClose('softcap', got, ref, bound, 1);
    });
  });

  // -- shaders/common.wgsl: exp_ref, tanh_ref, rsqrt_ref ----------------------------------------------
  // The figures common.wgsl states, measured in f32 ULPs of the true value (ulpF32 of a float64 truth:
  // Math.exp, Math.tanh, Math.sqrt, whose own error is below 2^-29 of an f32 ULP), on f32 inputs spread
  // over each function's domain: a grid, random f32 values, and the points where the algorithm switches
  // (exp_ref's reduction at (k + 1/2) ln 2, tanh_ref's branches at 0.125 and 9.1). None of these
  // functions cancels in its true value, so a relative (ULP) figure is meaningful everywhere.
  describe('reference-grade transcendentals (shaders/common.wgsl), in f32 ULPs of a float64 truth', () => {
    const N = 1 << 16;
    const grid = (lo: number, hi: number, n = N) =>
      Float32Array.from({ length: n }, (_, i) => lo + ((hi - lo) * (i + 0.5)) / n);
    const random = (r: Rand, lo: number, hi: number, n = N) =>
      Float32Array.from({ length: n }, () => r.uniform(lo, hi));
    /** Every x of `xs` through the common.wgsl function `fn`, on the GPU. */
    async function gpuEval(fn: 'exp_ref' | 'tanh_ref' | 'rsqrt_ref', xs: Float32Array): Promise<Float32Array> {
      const device = lab.device;
      const code = `${shaderSource('common.wgsl')}
@group(0) @binding(0) var<storage, read> xs: array<f32>;
@group(0) @binding(1) var<storage, read_write> ys: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  if (g.x < arrayLength(&xs)) { ys[g.x] = ${fn}(xs[g.x]); }
}`;
      device.pushErrorScope('validation');
      const pipeline = device.createComputePipeline({
        layout: 'auto',
        compute: { module: device.createShaderModule({ code }), entryPoint: 'main' },
      });
      const xb = lab.own(uploadBuffer(device, xs, 'x'));
      const yb = lab.own(storageBuffer(device, xs.byteLength, 'y'));
      const enc = device.createCommandEncoder();
      const pass = enc.beginComputePass();
      pass.setPipeline(pipeline);
      pass.setBindGroup(
        0,
        device.createBindGroup({
          layout: pipeline.getBindGroupLayout(0),
          entries: [
            { binding: 0, resource: { buffer: xb } },
            { binding: 1, resource: { buffer: yb } },
          ],
        }),
      );
      pass.dispatchWorkgroups(Math.ceil(xs.length / 64));
      pass.end();
      device.queue.submit([enc.finish()]);
      const err = await device.popErrorScope();
      if (err) throw new Error(`WebGPU validation error: ${err.message}`);
      return readF32(device, yb, xs.length);
    }
    /** Worst error in ULPs of the truth, and where. */
    function worstUlp(xs: Float32Array, ys: Float32Array, truth: (x: number) => number): { ulps: number; at: number } {
      let w = { ulps: 0, at: NaN };
      xs.forEach((x, i) => {
        const t = truth(x);
        const e = Math.abs(ys[i] - t) / ulpF32(t);
        if (!(e <= w.ulps)) w = { ulps: e, at: x };
      });
      return w;
    }
    const cat = (...a: Float32Array[]) => Float32Array.from(a.flatMap((v) => [...v]));

    it(`exp_ref: within ${EXP_REF_ULP} ULP where e^x is a normal f32 (x in [-87.3, 88]); within 2^-126 below; 0 under -103`, async () => {
      const r = new Rand(14000);
      // (k + 1/2) ln 2 and its f32 neighbours: where the reduction's n changes and |r| is largest
      const edges = Float32Array.from(
        range(251)
          .flatMap((i) => {
            const e = Math.fround((i - 125.5) * Math.LN2);
            return [e, bitsF32(f32Bits(e) + 1), bitsF32(f32Bits(e) - 1)];
          })
          .filter((x) => x >= -87.3 && x <= 88),
      );
      const xs = cat(
        grid(-87.3, 88),
        random(r, -87.3, 88),
        grid(-20, 0),
        edges,
        Float32Array.from([0, -0, 1e-30, -1e-30, 1e-8, -1e-8, 2 ** -24, -(2 ** -24)]),
      );
      const w = worstUlp(xs, await gpuEval('exp_ref', xs), Math.exp);
      console.log(`exp_ref (${ADAPTER}): worst ${w.ulps.toFixed(3)} ULP at x = ${w.at} over ${xs.length} inputs`);
      expect(w.ulps, `exp_ref at x = ${w.at}`).toBeLessThanOrEqual(EXP_REF_ULP);
      // Subnormal results (the adapter may flush them to zero): absolutely within the smallest normal.
      const low = cat(grid(-103, -87.34, 4096), Float32Array.from([-103]));
      const yl = await gpuEval('exp_ref', low);
      low.forEach((x, i) => {
        expect(yl[i], `exp_ref(${x})`).toBeGreaterThanOrEqual(0);
        expect(Math.abs(yl[i] - Math.exp(x)), `exp_ref(${x})`).toBeLessThanOrEqual(2 ** -126);
      });
      // Under -103 (masked scores are -1e30 - max): exactly 0.
      const zero = Float32Array.from([-103.01, -200, -1e4, -1e30, -3.4e38, -Infinity]);
      expect([...(await gpuEval('exp_ref', zero))]).toEqual([0, 0, 0, 0, 0, 0]);
    });

    // The ULP figures common.wgsl states for tanh_ref, per range of |x|; each is the largest value of
    // tanhRefBound (helpers/kernel-lab.ts, the per-input error analysis) over its range, which this test
    // checks too, and every input is held to its own tanhRefBound.
    const TANH_FIGURES: [number, number, number][] = [
      [0, 0.125, 2.1], // series
      [0.125, 0.25, 24], // 1 - 2 / (e^{2|x|} + 1): cancellation magnifies exp_ref's error by up to 7
      [0.25, 0.5, 10],
      [0.5, 1, 4.4],
      [1, 9.1, 1.6],
      [9.1, Infinity, 0.5], // sign(x)
    ];
    it(`tanh_ref: within ${TANH_FIGURES.map(([lo, hi, u]) => `${u} ULP on [${lo}, ${hi})`).join(', ')} of |x|; every input within its tanhRefBound`, async () => {
      const r = new Rand(14100);
      const near = (v: number) => range(64).map((i) => bitsF32(f32Bits(v) + i - 32));
      const special = Float32Array.from([
        ...near(0.125),
        ...near(9.1),
        ...near(1),
        1e-30,
        1e-8,
        2 ** -20,
        20,
        1e4,
        3.4e38,
        Infinity,
      ]);
      const pos = cat(grid(0, 10), random(r, 0, 1), grid(0.125, 0.25, 1 << 14), grid(0, 0.125, 1 << 14), special);
      const xs = cat(
        pos,
        pos.map((x) => -x),
      );
      const ys = await gpuEval('tanh_ref', xs);
      let nbad = 0;
      const bad: string[] = [];
      xs.forEach((x, i) => {
        const err = Math.abs(ys[i] - Math.tanh(x));
        if (!(err <= tanhRefBound(x))) {
          nbad++;
          if (bad.length < 6)
            bad.push(
              `x ${x}: ${(err / ulpF32(Math.tanh(x))).toFixed(2)} ULP, bound ${(tanhRefBound(x) / ulpF32(Math.tanh(x))).toFixed(2)}`,
            );
        }
      });
      expect(nbad, `tanh_ref over its per-input bound: ${bad.join('; ')}`).toBe(0);
      const lines: string[] = [];
      for (const [lo, hi, figure] of TANH_FIGURES) {
        const sel = xs.filter((x) => Math.abs(x) >= lo && Math.abs(x) < hi);
        const ysel = ys.filter((_, i) => Math.abs(xs[i]) >= lo && Math.abs(xs[i]) < hi);
        const w = worstUlp(sel, ysel, Math.tanh);
        const analysis = Math.max(...sel.map((x) => tanhRefBound(x) / ulpF32(Math.tanh(x))));
        lines.push(
          `[${lo}, ${hi}): worst ${w.ulps.toFixed(3)} ULP at ${w.at} (bound ${analysis.toFixed(2)}, stated ${figure})`,
        );
        expect(analysis, `tanhRefBound on [${lo}, ${hi}) vs the figure common.wgsl states`).toBeLessThanOrEqual(figure);
        expect(w.ulps, `tanh_ref on |x| in [${lo}, ${hi}) at x = ${w.at}`).toBeLessThanOrEqual(figure);
      }
      console.log(`tanh_ref (${ADAPTER}), |x| in ${lines.join('; ')}`);
    });

    it(`rsqrt_ref: within ${RSQRT_REF_ULP} ULP over the positive normal f32 range`, async () => {
      // 1 / sqrt(x): sqrt rounds once (U relative, passed on as U relative, at most 1 ULP of the result),
      // the division once (half an ULP): 1.5 ULP where both are correctly rounded.
      const r = new Rand(14200);
      const bits = Float32Array.from({ length: N }, () => bitsF32(0x00800000 + r.int(0x7f7fffff - 0x00800000)));
      const xs = cat(bits, grid(0.5, 8), Float32Array.from([2 ** -126, 1, 2, 4, 3.4e38, 1e-6]));
      const w = worstUlp(xs, await gpuEval('rsqrt_ref', xs), (x) => 1 / Math.sqrt(x));
      console.log(`rsqrt_ref (${ADAPTER}): worst ${w.ulps.toFixed(3)} ULP at x = ${w.at} over ${xs.length} inputs`);
      expect(w.ulps, `rsqrt_ref at x = ${w.at}`).toBeLessThanOrEqual(RSQRT_REF_ULP);
    });
  });
});

// ---- helpers ---------------------------------------------------------------------------------------

function argmaxFirst(v: Float32Array): number {
  let best = 0;
  for (let i = 1; i < v.length; i++) if (v[i] > v[best]) best = i;
  return best;
}

/** Runs op.embed in f32 and bf16 mode and checks every row of the output against `entry(id, col)`. */
async function checkEmbed(
  lab: Lab,
  lin: GpuLinear,
  ids: number[],
  H: number,
  entry: (id: number, col: number) => { v: number; mag: number },
): Promise<void> {
  const M = ids.length;
  const scale = Math.fround(Math.sqrt(H));
  const idb = lab.u32(ids);
  const h = lab.sentinel(M * H);
  const hb = lab.sentinel(M * H);
  await lab.run((rec) => {
    op.embed(rec, lin, idb, h, scale, { M, round: false });
    op.embed(rec, lin, idb, hb, scale, { M, round: true });
  });
  const ref = new Float64Array(M * H),
    mag = new Float64Array(M * H);
  const exactB = new Float64Array(M * H),
    loB = new Float64Array(M * H),
    hiB = new Float64Array(M * H);
  ids.forEach((id, m) => {
    for (let col = 0; col < H; col++) {
      const { v, mag: e } = entry(id, col);
      const at = m * H + col;
      ref[at] = v * scale;
      mag[at] = e * scale;
      // h = r(r(v) * scale): the range of v's f32 value goes through the inner rounding
      const dv = (EMBED_TOL - U) * e; // scale * q + bias: 2U of e
      exactB[at] = bf16Rne(v) * scale;
      [loB[at], hiB[at]] = scaleInterval(bf16Rne(v - dv), bf16Rne(v + dv), scale);
    }
  });
  expectClose('embed', await lab.read(h, M * H), ref, mag, EMBED_TOL);
  expectBf16('embed bf16', await lab.read(hb, M * H), exactB, loB, hiB);
}
