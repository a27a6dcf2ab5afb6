/**
 * Every inexact policy (src/model/policy.ts) is its exact twin plus ONE named mechanism
 * (docs/DESIGN.md "Inexact policies"). So each variant, with that mechanism switched off, must give the
 * exact kernel's bytes on the same inputs; with it switched on, it must differ (or the test could not
 * see the mechanism). Byte comparisons only, no tolerances. The variants:
 *
 *   matmul-m-split, prefill-chunk-mismatch  split-K matmul (ops.matmul split > 0): off = split 1
 *   attention-m-split                      attention split S: off = S = the exact plan's segment count
 *   mask-widened                           MODE_MASKED: off = one row (nothing widened), key order
 *                                          equal to the physical order, S = the exact segment count
 *   ring-chronological                     MODE_CHRONO: off = chronological order equal to physical
 *   prefill-chunk-mismatch                 chunked prefill: off = split 1 (then chunk 4 == whole)
 *
 * "Exact" is whatever the running device's kernel class runs (src/gpu/kernel-class.ts): lanes, tile
 * and four-pass attention on software adapters; coop and fused attention with RINGSIDE_KERNELS=gpu.
 * scripts/test.sh runs this file on lavapipe, on SwiftShader and with the GPU kernel class forced.
 * The mechanisms themselves are shown to reach the probe in probe.test.ts (first divergence at the
 * stage the mechanism touches, every earlier stage byte-identical).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import { bytesEqual, rowBytes, tinyModel, tinyWeights, tokens } from './tiny-model.ts';
import { expectSameBytes, Rand } from './helpers/kernel-lab.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import { KernelCache } from '../../src/gpu/kernels.ts';
import type { KernelClass } from '../../src/gpu/kernel-class.ts';
import { Recorder } from '../../src/gpu/recorder.ts';
import { readBytes, uploadBuffer } from '../../src/gpu/buffers.ts';
import type { GpuTensor, RowPart } from '../../src/gpu/upload.ts';
import * as op from '../../src/model/ops.ts';
import { createAttentionScratch, segmentCount, SEG_MAX_EXACT } from '../../src/model/attention-op.ts';
import type { GpuLinear } from '../../src/model/gpu-linear.ts';
import { EXACT, type AttentionPlan, type Policy } from '../../src/model/policy.ts';
import { policyByName } from '../../src/model/policy-registry.ts';
import type { TargetModel } from '../../src/model/gemma4/dense/dense-target.ts';
import type { GpuWeights } from '../../src/model/gpu-weights.ts';
import type { AffineLinear, DenseLinear, TargetDescription, TensorRef } from '../../src/format/model-description.ts';
import { bytesSource } from '../../src/format/bytesource.ts';

// ---- data ----------------------------------------------------------------------------------------

/** n f32 normal values as a Float32Array (the uploads' layout), from the suites' shared seeded generator. */
const f32s = (r: Rand, n: number, sd = 1) => Float32Array.from(r.f32s(n, sd));

const bf16Bits = (x: number) => new Uint32Array(Float32Array.of(x).buffer)[0] >>> 16;

const differs = (a: Uint8Array, b: Uint8Array) => !bytesEqual(a, b);

/** One device, one kernel cache (so one pipeline per kernel, as in the engine); buffers freed per test. */
class Lab {
  readonly device: GPUDevice;
  readonly kernels: KernelCache;
  private readonly owned: GPUBuffer[] = [];
  constructor(ctx: GpuContext) {
    this.device = ctx.device;
    this.kernels = new KernelCache(this.device);
  }
  own(b: GPUBuffer): GPUBuffer {
    this.owned.push(b);
    return b;
  }
  upload(data: Float32Array | Uint32Array | Uint16Array, label = 'data'): GPUBuffer {
    // uploadBuffer pads to 4 bytes; u16 arrays of odd length get their pad here
    const padded = data instanceof Uint16Array && data.length % 2 ? Uint16Array.from([...data, 0]) : data;
    return this.own(uploadBuffer(this.device, padded, label));
  }
  /** A buffer of `floats` floats filled with a sentinel (0xdeadbeef): elements nobody writes show. */
  out(floats: number): GPUBuffer {
    return this.upload(new Uint32Array(floats).fill(0xdeadbeef), 'out');
  }
  async run(fn: (rec: Recorder) => void): Promise<void> {
    this.device.pushErrorScope('validation');
    const rec = new Recorder(this.device, this.kernels, 'policy-twins');
    fn(rec);
    rec.submit();
    const err = await this.device.popErrorScope();
    if (err) throw new Error(`WebGPU validation error: ${err.message}`);
  }
  bytes(buf: GPUBuffer, floats: number): Promise<Uint8Array> {
    return readBytes(this.device, buf, floats * 4);
  }
  release(): void {
    this.owned.splice(0).forEach((b) => b.destroy());
  }
}

// ---- linears -------------------------------------------------------------------------------------

interface LinCase {
  name: string;
  N: number;
  K: number;
  /** affine: bits and group size; dense: dtype */
  affine?: { bits: 2 | 4 | 8; gs: number };
  dense?: 'BF16' | 'F32';
  /** Rows per weight part (tensors split across bindings; the kernels write at n_offset). */
  rowsPerPart?: number;
  /** Elements between rows of x (>= K). */
  xStride?: number;
  /** The exact kernel a step runs, per kernel class (ops.stepKernel; dense linears run matmul_dense `main`). */
  step?: Record<KernelClass, op.AffineKernel>;
}

function tensorRef(name: string, dtype: TensorRef['dtype'], shape: number[], bytes: number): TensorRef {
  return {
    name,
    file: bytesSource(`${name} (test data, on the GPU only)`, new Uint8Array(0)),
    dtype,
    shape,
    offset: 0,
    byteLength: bytes,
  };
}

/** `rows` rows of `perRow` elements, uploaded in parts of rowsPerPart rows. */
function rowParts(
  lab: Lab,
  name: string,
  data: Uint32Array | Uint16Array | Float32Array,
  rows: number,
  perRow: number,
  rowsPerPart: number,
): GpuTensor {
  const parts: RowPart[] = [];
  for (let rowStart = 0; rowStart < rows; rowStart += rowsPerPart) {
    const n = Math.min(rowsPerPart, rows - rowStart);
    parts.push({
      rowStart,
      rows: n,
      buffer: lab.upload(data.slice(rowStart * perRow, (rowStart + n) * perRow), `${name}[${rowStart}]`),
    });
  }
  return { name, rows, parts };
}

/** A random linear: MLX-affine codes with plausible bf16 scales and biases, or dense weights. */
function makeLinear(lab: Lab, r: Rand, c: LinCase): GpuLinear {
  const { N, K } = c;
  const rpp = c.rowsPerPart ?? N;
  if (c.affine) {
    const { bits, gs } = c.affine;
    const wordsPerRow = (K * bits) / 32;
    const groups = K / gs;
    const words = Uint32Array.from({ length: N * wordsPerRow }, () => r.int(2 ** 32));
    const scale = Array.from({ length: N * groups }, () => (0.5 + r.next()) * (0.1 / (1 << bits)));
    const s = Uint16Array.from(scale, bf16Bits);
    // bias about -2^(bits-1) scale, as MLX's conversions give (the centred codes' reason to exist)
    const b = Uint16Array.from(scale, (v) => bf16Bits(-v * (1 << (bits - 1)) + r.normal(0.01)));
    const desc: AffineLinear = {
      kind: 'affine',
      name: c.name,
      outFeatures: N,
      inFeatures: K,
      bits,
      groupSize: gs,
      weight: tensorRef('w.weight', 'U32', [N, wordsPerRow], N * wordsPerRow * 4),
      scales: tensorRef('w.scales', 'BF16', [N, groups], N * groups * 2),
      biases: tensorRef('w.biases', 'BF16', [N, groups], N * groups * 2),
    };
    return {
      desc,
      weight: rowParts(lab, 'w', words, N, wordsPerRow, rpp),
      scales: rowParts(lab, 's', s, N, groups, rpp),
      biases: rowParts(lab, 'b', b, N, groups, rpp),
    };
  }
  const dtype = c.dense!;
  const data =
    dtype === 'F32' ? f32s(r, N * K, 0.2) : Uint16Array.from({ length: N * K }, () => bf16Bits(r.normal(0.2)));
  const desc: DenseLinear = {
    kind: 'dense',
    name: c.name,
    outFeatures: N,
    inFeatures: K,
    weight: tensorRef('w.weight', dtype, [N, K], N * K * (dtype === 'F32' ? 4 : 2)),
  };
  return { desc, weight: rowParts(lab, 'w', data, N, K, rpp) };
}

// The exact affine kernels a step picks (ops.stepKernel) differ by class and by linear: 4/8-bit with
// groups of 32 or 64 run coop on GPUs and lanes on software adapters; groups of 128 run lanes on both;
// 2-bit runs matmul.wgsl `affine` on both. Prefill runs tile where lanes fits. Dense runs `main`.
const LINEARS: LinCase[] = [
  {
    name: '4-bit, groups of 64, 3 row parts',
    N: 40,
    K: 512,
    affine: { bits: 4, gs: 64 },
    rowsPerPart: 16,
    step: { software: 'lanes', gpu: 'coop' },
  },
  {
    name: '8-bit, groups of 32, 5 groups (uneven split 2)',
    N: 24,
    K: 160,
    affine: { bits: 8, gs: 32 },
    step: { software: 'lanes', gpu: 'coop' },
  },
  {
    name: '4-bit, groups of 128',
    N: 20,
    K: 384,
    affine: { bits: 4, gs: 128 },
    step: { software: 'lanes', gpu: 'lanes' },
  },
  {
    name: '2-bit (the affine fallback), x stride 260',
    N: 12,
    K: 256,
    affine: { bits: 2, gs: 64 },
    xStride: 260,
    step: { software: 'affine', gpu: 'affine' },
  },
  { name: 'dense bf16, K 70', N: 11, K: 70, dense: 'BF16' },
  { name: 'dense f32, 2 row parts, x stride 72', N: 9, K: 64, dense: 'F32', rowsPerPart: 5, xStride: 72 },
];

/** y = matmul(x) through ops.matmul as the engine calls it; returns y's bytes. */
async function runMatmul(
  lab: Lab,
  lin: GpuLinear,
  x: Float32Array,
  rows: op.Rows,
  xStride: number,
): Promise<Uint8Array> {
  const N = lin.desc.outFeatures;
  const y = lab.out(rows.M * N);
  const xb = lab.upload(x, 'x');
  await lab.run((rec) => op.matmul(rec, lin, xb, y, rows, xStride, N));
  return lab.bytes(y, rows.M * N);
}

/** x with every column outside [lo, hi) set to 0 (the rows keep their stride). */
function maskColumns(x: Float32Array, M: number, xStride: number, lo: number, hi: number): Float32Array {
  const out = new Float32Array(x.length);
  for (let m = 0; m < M; m++) out.set(x.subarray(m * xStride + lo, m * xStride + hi), m * xStride + lo);
  return out;
}

// ---- attention -----------------------------------------------------------------------------------

interface AttnCase {
  mode: op.AttentionMode;
  M: number;
  p: number;
  window: number;
  base: number;
  heads: number;
  kvHeads: number;
  d: number;
}
interface AttnData {
  q: Float32Array;
  kCache: Float32Array;
  vCache: Float32Array;
  kStage: Float32Array;
  vStage: Float32Array;
}

/** Random q, a ring (or linear cache) and staging rows: scores of a few units (a softmax neither flat nor one-hot). */
function attnData(r: Rand, c: AttnCase): AttnData {
  const row = c.kvHeads * c.d;
  const slots = c.mode === 'linear' ? c.p + c.M : c.window;
  return {
    q: f32s(r, c.M * c.heads * c.d, 0.6),
    kCache: f32s(r, slots * row, 0.6),
    vCache: f32s(r, slots * row),
    kStage: f32s(r, c.M * row, 0.6),
    vStage: f32s(r, c.M * row),
  };
}

/** Keys of the dispatch's longest row (what the scratch must hold). */
const maxKeys = (c: AttnCase) =>
  c.mode === 'masked'
    ? op.maskedKeyCount(c.p, c.M, c.window)
    : c.mode === 'linear'
      ? c.p + c.M
      : Math.min(c.p + c.M, c.window);

/** op.attention as target.ts calls it for a step (linear: the block's rows already in the cache), on the class's path. */
async function runAttention(lab: Lab, c: AttnCase, x: AttnData, split: number): Promise<Uint8Array> {
  const n = c.M * c.heads * c.d;
  const out = lab.out(n);
  const scratch = createAttentionScratch(
    lab.device,
    { heads: c.heads, qWidth: c.heads * c.d, maxKeys: maxKeys(c), prefillRows: c.M, stepRows: c.M },
    'twins',
  );
  scratch.buffers.forEach((b) => lab.own(b));
  const [q, kCache, vCache, kStage, vStage] = [x.q, x.kCache, x.vCache, x.kStage, x.vStage].map((a) => lab.upload(a));
  const linear = c.mode === 'linear';
  await lab.run((rec) =>
    op.attention(rec, {
      M: c.M,
      heads: c.heads,
      kvHeads: c.kvHeads,
      d: c.d,
      mode: c.mode,
      window: c.window,
      base: c.base,
      p: c.p,
      round: false,
      split,
      q,
      kCache,
      vCache,
      kStage: linear ? kCache : kStage,
      vStage: linear ? vCache : vStage,
      out,
      scratch: scratch.step,
    }),
  );
  return lab.bytes(out, n);
}

/** The exact plan's segment count for n keys in a step (attention.wgsl seg_count with split 0). */
const exactSegments = (n: number) => segmentCount(n, 0, SEG_MAX_EXACT);

// ---- the tests -----------------------------------------------------------------------------------

describe('inexact variants with their mechanism off == the exact kernel, byte for byte', () => {
  let ctx: GpuContext;
  let lab: Lab;
  beforeAll(async () => {
    ctx = await testGpu();
    lab = new Lab(ctx);
    console.log(
      `policy twins on ${ctx.report.description || ctx.report.device}, kernel class ${lab.kernels.kernelClass}`,
    );
  });
  afterAll(() => {
    lab?.release();
    ctx?.destroy();
  });

  describe('split-K matmul (matmul-m-split; prefill-chunk-mismatch, mlx-metal)', () => {
    it('split ranges: whole units, contiguous, none empty', () => {
      expect(op.splitRanges(4, 2)).toEqual([
        [0, 2],
        [2, 4],
      ]);
      expect(op.splitRanges(5, 2)).toEqual([
        [0, 3],
        [3, 5],
      ]);
      expect(op.splitRanges(5, 3)).toEqual([
        [0, 2],
        [2, 4],
        [4, 5],
      ]);
      expect(op.splitRanges(2, 4)).toEqual([
        [0, 1],
        [1, 2],
      ]);
      expect(op.splitRanges(7, 1)).toEqual([[0, 7]]);
    });

    LINEARS.forEach((c, ci) => {
      it(`split 1 == exact: ${c.name}; steps and prefill, M = 1, 3, 9, f32 and bf16`, async () => {
        const r = new Rand(100 + ci);
        const lin = makeLinear(lab, r, c);
        const xStride = c.xStride ?? c.K;
        // the exact kernel compared against is the one this device's class runs
        if (c.step)
          expect(op.stepKernel(new Recorder(lab.device, lab.kernels), lin, xStride)).toBe(
            c.step[lab.kernels.kernelClass],
          );
        for (const prefill of [false, true]) {
          // M = 9: more rows than one pass of coop (ROWS = 8) and than one tile block (8 rows).
          for (const M of [1, 3, 9]) {
            const x = f32s(r, M * xStride);
            for (const round of [false, true]) {
              const rows: op.Rows = { M, round, prefill };
              const exact = await runMatmul(lab, lin, x, rows, xStride);
              const off = await runMatmul(lab, lin, x, { ...rows, split: 1 }, xStride);
              expectSameBytes(
                `${c.name}, ${prefill ? 'prefill' : 'step'}, M ${M}${round ? ', bf16' : ''}: split 1 vs exact`,
                off,
                exact,
              );
            }
          }
        }
        lab.release();
      });
    });

    // With the mechanism on, the result is the exact kernel's partial sums over the K ranges, each
    // computed by the exact kernel itself (on x with the other columns zeroed), added in range order in
    // f32: checked against those partials read back and added on the CPU (Math.fround = one f32 add).
    LINEARS.forEach((c, ci) => {
      it(`split 2 and 3 == the exact kernel's range partials added in f32, and differ from exact: ${c.name}`, async () => {
        const r = new Rand(200 + ci);
        const lin = makeLinear(lab, r, c);
        const xStride = c.xStride ?? c.K;
        const N = c.N,
          M = 3;
        const unit = c.affine ? c.affine.gs : 1;
        const x = f32s(r, M * xStride);
        const exact = await runMatmul(lab, lin, x, { M, round: false }, xStride);
        let changed = false;
        for (const split of [2, 3]) {
          const got = await runMatmul(lab, lin, x, { M, round: false, split }, xStride);
          const sum = new Float32Array(M * N);
          const ranges = op.splitRanges(c.K / unit, split);
          for (const [i, [lo, hi]] of ranges.entries()) {
            const b = await runMatmul(
              lab,
              lin,
              maskColumns(x, M, xStride, lo * unit, hi * unit),
              { M, round: false },
              xStride,
            );
            const part = new Float32Array(b.buffer, b.byteOffset, M * N);
            for (let e = 0; e < M * N; e++) sum[e] = i === 0 ? part[e] : Math.fround(sum[e] + part[e]);
          }
          expectSameBytes(`${c.name}, split ${split}: vs the partials added in f32`, got, new Uint8Array(sum.buffer));
          changed ||= differs(got, exact);
        }
        // The mechanism is real: some output rounds differently (every linear here has at least 5
        // groups or 64 weights per row, so there are partials to add).
        expect(changed, `${c.name}: split 2 or 3 changes some bits`).toBe(true);
        lab.release();
      });
    });
  });

  describe('attention: split, masked and chronological variants', () => {
    const H = { heads: 4, kvHeads: 2, d: 16 };

    // attention-m-split: the same kernels with another partition. Off: the exact plan's count (every
    // row of these blocks has the same one).
    const splitCases: AttnCase[] = [
      { mode: 'linear', M: 4, p: 200, window: 0, base: 0, ...H }, // 201..204 keys: 4 segments
      { mode: 'linear', M: 3, p: 20, window: 0, base: 0, ...H }, // 21..23 keys: 1 segment
      { mode: 'physical', M: 3, p: 300, window: 130, base: 41, ...H }, // wrapped ring, 130 keys: 3 segments
    ];
    for (const c of splitCases) {
      it(`attention-m-split: split = the exact segment count == exact (${c.mode}, rows at ${c.p}..${c.p + c.M - 1})`, async () => {
        const x = attnData(new Rand(300 + c.p), c);
        const keys = Array.from({ length: c.M }, (_, j) =>
          c.mode === 'linear' ? c.p + j + 1 : Math.min(c.p + j + 1, c.window),
        );
        const counts = new Set(keys.map(exactSegments));
        expect(counts.size, 'one exact segment count for every row').toBe(1);
        const [S] = counts;
        const exact = await runAttention(lab, c, x, 0);
        expectSameBytes(`${c.mode} split ${S}`, await runAttention(lab, c, x, S), exact);
        // on: another partition changes some bits
        expect(differs(await runAttention(lab, c, x, S + 1), exact), `split ${S + 1} changes some bits`).toBe(true);
        lab.release();
      });
    }

    // mask-widened and ring-chronological read the keys of the ring in chronological order; classic
    // decode reads them in physical slot order. Both orders are the same while the ring has not wrapped
    // (p + M <= W, base 0), and for one row when its oldest key sits in slot 0: (p - base) mod W = W - 1.
    // Off for mask-widened also means nothing widened (one row: its window is the union) and the exact
    // segment count instead of the key-count blocks.
    const orderCases: (AttnCase & { what: string })[] = [
      { what: 'ring not wrapped, 4 rows', mode: 'chrono', M: 4, p: 5, window: 16, base: 0, ...H },
      { what: 'wrapped, oldest key in slot 0', mode: 'chrono', M: 1, p: 40, window: 16, base: 9, ...H },
      {
        what: 'wrapped, 150-key window (3 segments), oldest key in slot 0',
        mode: 'chrono',
        M: 1,
        p: 400,
        window: 150,
        base: 101,
        ...H,
      },
      { what: 'one row, ring not wrapped', mode: 'masked', M: 1, p: 10, window: 16, base: 0, ...H },
      { what: 'one row, wrapped, oldest key in slot 0', mode: 'masked', M: 1, p: 40, window: 16, base: 9, ...H },
      {
        what: 'one row, 150-key window (3 segments), oldest key in slot 0',
        mode: 'masked',
        M: 1,
        p: 400,
        window: 150,
        base: 101,
        ...H,
      },
    ];
    for (const c of orderCases) {
      const policy = c.mode === 'chrono' ? 'ring-chronological' : 'mask-widened';
      it(`${policy}: ${c.what} == exact physical order`, async () => {
        if (c.p + c.M > c.window) expect((c.p - c.base) % c.window, 'the oldest key sits in slot 0').toBe(c.window - 1);
        const x = attnData(new Rand(400 + c.p + c.M), c);
        const S = c.mode === 'masked' ? exactSegments(maxKeys(c)) : 0;
        const exact = await runAttention(lab, { ...c, mode: 'physical' }, x, 0);
        expectSameBytes(`${c.mode} (${c.what})`, await runAttention(lab, c, x, S), exact);
        lab.release();
      });
    }

    // The mechanisms switched on: the same data read in another order (base moved so the physical
    // order starts elsewhere) or widened over 4 rows differ from exact.
    it('ring-chronological and mask-widened with their mechanism on differ from exact', async () => {
      const wrapped: AttnCase = { mode: 'physical', M: 1, p: 40, window: 16, base: 0, ...H }; // (40 - 0) mod 16 = 8
      const x = attnData(new Rand(500), wrapped);
      const exact = await runAttention(lab, wrapped, x, 0);
      expect(differs(await runAttention(lab, { ...wrapped, mode: 'chrono' }, x, 0), exact), 'chronological order').toBe(
        true,
      );
      expect(
        differs(await runAttention(lab, { ...wrapped, mode: 'masked' }, x, 1), exact),
        'masked, chronological order',
      ).toBe(true);
      const block: AttnCase = { mode: 'physical', M: 4, p: 40, window: 16, base: 9, ...H };
      const xb = attnData(new Rand(501), block);
      const exactBlock = await runAttention(lab, block, xb, 0);
      expect(
        differs(await runAttention(lab, { ...block, mode: 'masked' }, xb, 1), exactBlock),
        'widened over 4 rows, chronological',
      ).toBe(true);
      lab.release();
    });
  });

  // The policies themselves on the tiny-a model, with the mechanism switched off in the Policy object:
  // the verify block's logits must be the exact policy's (which equal the chain's, exactness.test.ts).
  describe('policies on the tiny-a model with the mechanism off == exact', () => {
    let weights: GpuWeights<TargetDescription>;
    beforeAll(async () => {
      weights = await tinyWeights(ctx);
    });
    const V = 1024;

    /** Logits of a verify block after prefilling `prompt` (in chunks of `chunk`, 0 = whole) under `policy`. */
    async function verifyLogits(
      model: TargetModel,
      prompt: number[],
      block: number[],
      policy: Policy,
      chunk = 0,
    ): Promise<Float32Array> {
      model.reset();
      await model.prefill(prompt, { chunk: chunk || prompt.length, policy, logits: 'none' });
      return (await model.step(block, { policy, logits: 'all' })).logits!;
    }

    // Mechanism off, derived from the policy itself: wherever it picks a split-K matmul, one range;
    // wherever it picks an attention split, one segment (the exact count for the tiny model's at most
    // 48 keys per row, asserted below). Everything else about the policy stays.
    const splitKOff = (p: Policy): Policy => ({
      ...p,
      name: `${p.name}, split-K 1`,
      matmulSplit: (M, phase) => Math.min(1, p.matmulSplit(M, phase)),
    });
    const oneSegment = (plan: AttentionPlan): AttentionPlan => ({ ...plan, split: Math.min(1, plan.split) });
    const segmentsOff = (p: Policy): Policy => ({
      ...p,
      name: `${p.name}, one segment`,
      slidingStep: (M, window, pos) => oneSegment(p.slidingStep(M, window, pos)),
      fullStep: (M) => oneSegment(p.fullStep(M)),
    });
    const off: { name: string; policy: Policy; prompt: number; chunk?: number }[] = [
      { name: 'matmul-m-split with split-K 1', policy: splitKOff(policyByName('matmul-m-split')), prompt: 40 },
      {
        name: 'attention-m-split with one segment',
        policy: segmentsOff(policyByName('attention-m-split')),
        prompt: 40,
      },
      // the policy as it is: before the ring wraps (5 + 4 <= 16) chronological is the physical order
      { name: 'ring-chronological, ring not wrapped', policy: policyByName('ring-chronological'), prompt: 5 },
      // the chain arm's whole prompt, chunks of 8 (split by the policy), the block arm's chunks of 4
      // (not split by the policy): chunking itself changes nothing, the prefill GEMM's split-K does
      {
        name: 'prefill-chunk-mismatch with split-K 1, whole prompt (chain arm)',
        policy: splitKOff(policyByName('prefill-chunk-mismatch')),
        prompt: 40,
      },
      {
        name: 'prefill-chunk-mismatch with split-K 1, chunks of 8',
        policy: splitKOff(policyByName('prefill-chunk-mismatch')),
        prompt: 40,
        chunk: 8,
      },
      {
        name: 'prefill-chunk-mismatch, chunks of 4 (block arm)',
        policy: splitKOff(policyByName('prefill-chunk-mismatch')),
        prompt: 40,
        chunk: 4,
      },
    ];
    it("the tiny model's rows have one exact segment (so one segment is the mechanism off)", () => {
      expect(exactSegments(40 + 4)).toBe(1);
      expect(weights.desc.window).toBeLessThanOrEqual(64);
    });
    for (const precision of ['f32', 'bf16'] as const) {
      for (const c of off) {
        // the first of these compiles the tiny model's pipelines: minutes on llvmpipe with a cold shader cache
        it(`${c.name} (${precision}): verify logits == exact`, { timeout: 600_000 }, async () => {
          const model = tinyModel(ctx, weights, precision);
          try {
            const prompt = tokens(c.prompt, 17 + c.prompt);
            const block = tokens(4, 91);
            const exact = await verifyLogits(model, prompt, block, EXACT);
            const twin = await verifyLogits(model, prompt, block, c.policy, c.chunk);
            for (let j = 0; j < block.length; j++) {
              expect(
                bytesEqual(rowBytes(twin, j, V), rowBytes(exact, j, V)),
                `${c.name}: verify row ${j} differs from exact`,
              ).toBe(true);
            }
          } finally {
            model.destroy();
          }
        });
      }
    }
  });
});
