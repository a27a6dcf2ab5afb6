/**
 * Attention (shaders/attention.wgsl through src/model/attention-op.ts / ops.ts op.attention: scores,
 * segmented softmax and P.V, combine; and the fused path of the GPU kernel class) against its CPU twin
 * (src/reference/gemma4/layer.ts attendRow, float64) on seeded cases of every cache mode (linear, physical ring,
 * chronological, draft, mask-widened), f32 and bf16 outputs; row invariance (a block's row == the chain
 * step that computes it alone, byte for byte); the kernel == the WGSL replayed in f32 (attentionF32),
 * byte for byte; and the inexact split and masked variants. The case model, the reference with its error
 * bound and the runners are in helpers/attention.ts.
 *
 * scripts/test.sh runs this file on lavapipe, again on SwiftShader and again with the GPU kernel class
 * forced (RINGSIDE_KERNELS=gpu).
 */
import { describe, expect, it } from 'vitest';
import * as op from '../../src/model/ops.ts';
import { attentionFused } from '../../src/model/attention-op.ts';
import {
  ADAPTER,
  ROW_COUNTS,
  bytesOf,
  expectBf16,
  expectClose,
  expectSameBytes,
  f32Interval,
  range,
  Rand,
  useLab,
  type Lab,
} from './helpers/kernel-lab.ts';
import {
  attentionF32,
  attnData,
  attnReference,
  chainStep,
  checkKeyOrder,
  exactPlan,
  expectFusedSame,
  keysWithMask,
  recordAttention,
  runAttention,
  type AttnCase,
} from './helpers/attention.ts';

describe(`GPU kernels: attention vs the CPU float64 reference (${ADAPTER})`, () => {
  let lab: Lab;
  useLab((l) => (lab = l));

  // -- attention ---------------------------------------------------------------------------------------
  // Cases past 64 keys cut rows into segments: 301 keys = 5 x 61, 4100 = 64 x 65 (capped at 64, so
  // segments grow past 64 keys), key counts that are not multiples of 64, and blocks whose rows cross a
  // segment-count boundary (63 -> 64 keys: 1 -> 2 segments; 4032 -> 4033: 63 -> 64; 4096 -> 4097: L 64 -> 65).
  // Every test runs the device's path (attentionFused: the four passes here, the fused one under
  // RINGSIDE_KERNELS=gpu) and checks that both paths, forced, give the same bytes (expectFusedSame);
  // the row-invariance tests run each path. The prefill plan's one segment per row puts rows past 256
  // keys (attention.wgsl SEG_CAP) on the fused path's other storage, `s` instead of workgroup memory.
  describe('attention (scores, segmented softmax and P.V, combine; and fused)', () => {
    const cases: AttnCase[] = [
      { name: 'linear, GQA 4:2', mode: 'linear', heads: 4, kvHeads: 2, d: 16, M: 3, p: 5, window: 0, base: 0 },
      { name: 'linear from position 0', mode: 'linear', heads: 2, kvHeads: 2, d: 32, M: 4, p: 0, window: 0, base: 0 },
      { name: 'linear, MQA 4:1, one row', mode: 'linear', heads: 4, kvHeads: 1, d: 8, M: 1, p: 20, window: 0, base: 0 },
      // d 40 (a pair of q heads per kv head: the fused path's HP = 2): V batches of 8 keys (PB) with this
      // block's staging rows inside some of them (their per-key path); the smaller head dims above never
      // enter that loop. d 72 below: the pairs' batched K loads (KP = 16 vec4) with a remainder of 2.
      {
        name: 'physical, head pairs (GQA 4:2), wrapped ring of 100, d 72',
        mode: 'physical',
        heads: 4,
        kvHeads: 2,
        d: 72,
        M: 4,
        p: 150,
        window: 100,
        base: 0,
      },
      // d 264: 66 vec4 channels for 64 invocations, so invocation 0 takes a second pass over the keys (the
      // fused path sums each head's e_i in its first pass only).
      {
        name: 'physical, head pairs, wrapped ring of 100, d 264',
        mode: 'physical',
        heads: 4,
        kvHeads: 2,
        d: 264,
        M: 2,
        p: 150,
        window: 100,
        base: 0,
      },
      {
        name: 'physical, wrapped ring of 100, d 40',
        mode: 'physical',
        heads: 2,
        kvHeads: 1,
        d: 40,
        M: 4,
        p: 150,
        window: 100,
        base: 0,
      },
      {
        name: 'linear, 299..301 keys (5 segments of 60 or 61)',
        mode: 'linear',
        heads: 2,
        kvHeads: 1,
        d: 8,
        M: 3,
        p: 298,
        window: 0,
        base: 0,
      },
      {
        name: 'linear, 4161..4162 keys (64 segments of 66)',
        mode: 'linear',
        heads: 2,
        kvHeads: 1,
        d: 8,
        M: 2,
        p: 4160,
        window: 0,
        base: 0,
      },
      {
        name: 'physical, ring not full',
        mode: 'physical',
        heads: 4,
        kvHeads: 2,
        d: 16,
        M: 4,
        p: 3,
        window: 16,
        base: 0,
      },
      {
        name: 'physical, ring fills and wraps inside the block (base 0)',
        mode: 'physical',
        heads: 2,
        kvHeads: 1,
        d: 16,
        M: 4,
        p: 6,
        window: 8,
        base: 0,
      },
      {
        name: 'physical, wrapped ring, base 13',
        mode: 'physical',
        heads: 4,
        kvHeads: 2,
        d: 16,
        M: 4,
        p: 15,
        window: 8,
        base: 13,
      },
      {
        name: 'physical, wrapped ring, base 9, W 6',
        mode: 'physical',
        heads: 2,
        kvHeads: 1,
        d: 8,
        M: 3,
        p: 10,
        window: 6,
        base: 9,
      },
      {
        name: 'physical, one row (chain step), base 21',
        mode: 'physical',
        heads: 4,
        kvHeads: 4,
        d: 8,
        M: 1,
        p: 30,
        window: 8,
        base: 21,
      },
      {
        name: 'physical, ring of 200 filling past 64 keys',
        mode: 'physical',
        heads: 2,
        kvHeads: 1,
        d: 8,
        M: 4,
        p: 130,
        window: 200,
        base: 0,
      },
      {
        name: 'physical, wrapped ring of 4100 (64 segments of 65)',
        mode: 'physical',
        heads: 2,
        kvHeads: 1,
        d: 8,
        M: 3,
        p: 8300,
        window: 4100,
        base: 77,
      },
      { name: 'chrono, prefill chunk 0', mode: 'chrono', heads: 4, kvHeads: 2, d: 16, M: 6, p: 0, window: 8, base: 0 },
      {
        name: 'chrono, prefill chunk 2 over a filled ring',
        mode: 'chrono',
        heads: 2,
        kvHeads: 2,
        d: 16,
        M: 5,
        p: 6,
        window: 8,
        base: 0,
      },
      {
        name: 'chrono, wrapped ring, base 13',
        mode: 'chrono',
        heads: 4,
        kvHeads: 2,
        d: 16,
        M: 4,
        p: 15,
        window: 8,
        base: 13,
      },
      {
        name: 'chrono, wrapped ring, base 9, W 6',
        mode: 'chrono',
        heads: 2,
        kvHeads: 1,
        d: 8,
        M: 3,
        p: 10,
        window: 6,
        base: 9,
      },
      {
        name: 'chrono, wrapped ring of 4100',
        mode: 'chrono',
        heads: 2,
        kvHeads: 1,
        d: 8,
        M: 2,
        p: 8300,
        window: 4100,
        base: 77,
      },
      {
        name: 'draft, span W + 1 (evicted entry from staging), base 13',
        mode: 'draft',
        heads: 4,
        kvHeads: 2,
        d: 16,
        M: 1,
        p: 17,
        window: 8,
        base: 13,
        span: 9,
      },
      {
        name: 'draft, span W, ring not full, two rows',
        mode: 'draft',
        heads: 2,
        kvHeads: 1,
        d: 16,
        M: 2,
        p: 5,
        window: 8,
        base: 0,
        span: 8,
      },
      {
        name: 'draft, span W + 1, base 0, wrapped',
        mode: 'draft',
        heads: 4,
        kvHeads: 4,
        d: 8,
        M: 1,
        p: 30,
        window: 16,
        base: 0,
        span: 17,
      },
      {
        name: 'draft, span W, just after a long prefill (base = p)',
        mode: 'draft',
        heads: 4,
        kvHeads: 2,
        d: 8,
        M: 1,
        p: 21,
        window: 16,
        base: 21,
        span: 16,
      },
      {
        name: 'draft, span W + 1, base 9, W 6',
        mode: 'draft',
        heads: 2,
        kvHeads: 1,
        d: 8,
        M: 1,
        p: 10,
        window: 6,
        base: 9,
        span: 7,
      },
      {
        name: 'draft, span W + 1 = 4101',
        mode: 'draft',
        heads: 2,
        kvHeads: 1,
        d: 8,
        M: 1,
        p: 5000,
        window: 4100,
        base: 903,
        span: 4101,
      },
    ];
    for (const c of cases) {
      it(`${c.name}: ${c.heads}/${c.kvHeads} heads, d ${c.d}, rows at ${c.p}..${c.p + c.M - 1}${c.mode === 'linear' ? '' : `, W ${c.window}, base ${c.base}`}; f32 and bf16`, async () => {
        const r = new Rand(8000 + c.p * 13 + c.window * 7 + c.M + c.heads);
        if (c.mode !== 'linear') checkKeyOrder(c);
        const x = attnData(r, c);
        const maxKeys = (c.mode === 'linear' ? x.slots : c.window) + 3;
        const bufs = {
          q: lab.f32(x.q),
          kCache: lab.f32(x.kCache),
          vCache: lab.f32(x.vCache),
          kStage: lab.f32(x.kStage),
          vStage: lab.f32(x.vStage),
          out: lab.sentinel(c.M * c.heads * c.d),
        };
        const outB = lab.sentinel(c.M * c.heads * c.d);
        await lab.run((rec) => {
          recordAttention(lab, rec, c, bufs, false, maxKeys);
          recordAttention(lab, rec, c, { ...bufs, out: outB }, true, maxKeys);
        });
        // the bound of the exact plan's partition (helpers/attention.ts attnReference: segment length,
        // segment count, exp_ref's error and the score spread, each counted)
        const { out, bound } = attnReference(c, x);
        const n = c.M * c.heads * c.d;
        expectClose(`attention.${c.mode}`, await lab.read(bufs.out, n), out, bound, 1);
        const iv = f32Interval(out, bound, 1);
        expectBf16(`attention.${c.mode} bf16`, await lab.read(outB, n), out, iv.lo, iv.hi);
        for (const round of [false, true]) await expectFusedSame(lab, c, x, { round });
        await expectFusedSame(lab, c, x, { prefill: true });
      });
    }

    it(`the device's path: two dispatches (fused) on the GPU kernel class, four on software (${process.env.RINGSIDE_KERNELS ?? 'detected'})`, async () => {
      const c: AttnCase = { name: '', mode: 'linear', heads: 2, kvHeads: 1, d: 8, M: 2, p: 3, window: 0, base: 0 };
      const x = attnData(new Rand(776), c);
      expect(attentionFused(lab.kernels)).toBe(lab.kernels.kernelClass === 'gpu');
      let dispatches = 0;
      await lab.run((rec) => {
        recordAttention(
          lab,
          rec,
          c,
          {
            q: lab.f32(x.q),
            kCache: lab.f32(x.kCache),
            vCache: lab.f32(x.vCache),
            kStage: lab.f32(x.kStage),
            vStage: lab.f32(x.vStage),
            out: lab.sentinel(c.M * c.heads * c.d),
          },
          false,
          x.slots,
        );
        dispatches = rec.dispatches;
      });
      expect(dispatches).toBe(attentionFused(lab.kernels) ? 2 : 4);
    });

    // Row invariance: row j of a block must equal the chain step that computes position p + j alone,
    // after rows 0..j-1 were committed to the cache (chainStep). The block's scratch strides (its
    // largest key and segment counts) differ from each step's: they must not matter.
    const inv: Omit<AttnCase, 'M' | 'name'>[] = [
      { mode: 'linear', heads: 4, kvHeads: 2, d: 16, p: 9, window: 0, base: 0 },
      { mode: 'linear', heads: 2, kvHeads: 1, d: 8, p: 60, window: 0, base: 0 },
      { mode: 'linear', heads: 2, kvHeads: 1, d: 8, p: 4029, window: 0, base: 0 },
      { mode: 'linear', heads: 2, kvHeads: 1, d: 8, p: 4093, window: 0, base: 0 },
      { mode: 'physical', heads: 4, kvHeads: 2, d: 16, p: 23, window: 16, base: 21 },
      { mode: 'physical', heads: 2, kvHeads: 1, d: 16, p: 5, window: 16, base: 0 },
      { mode: 'physical', heads: 2, kvHeads: 1, d: 8, p: 60, window: 130, base: 0 },
      { mode: 'physical', heads: 2, kvHeads: 1, d: 8, p: 8205, window: 4100, base: 21 },
      { mode: 'chrono', heads: 4, kvHeads: 2, d: 16, p: 23, window: 16, base: 21 },
      { mode: 'chrono', heads: 2, kvHeads: 1, d: 8, p: 8205, window: 4100, base: 21 },
      { mode: 'draft', heads: 4, kvHeads: 2, d: 8, p: 30, window: 16, base: 0, span: 17 },
      { mode: 'draft', heads: 2, kvHeads: 1, d: 8, p: 5000, window: 4100, base: 903, span: 4101 },
      { mode: 'masked', heads: 2, kvHeads: 1, d: 8, p: 58, window: 200, base: 0 },
      { mode: 'masked', heads: 2, kvHeads: 1, d: 8, p: 4090, window: 4200, base: 0 },
    ];
    for (const [c0, fused] of inv.flatMap(
      (c) =>
        [
          [c, false],
          [c, true],
        ] as const,
    )) {
      it(`row-invariant ${fused ? 'fused' : 'four-pass'} ${c0.mode}${c0.mode === 'linear' ? '' : `, W ${c0.window}, base ${c0.base}`}: block of M in ${ROW_COUNTS.join(',')} at ${c0.p} == M chain steps, byte for byte (f32 and bf16)`, async () => {
        const r = new Rand(9000 + c0.p + c0.base);
        for (const [M, round] of ROW_COUNTS.flatMap(
          (m) =>
            [
              [m, false],
              [m, true],
            ] as const,
        )) {
          const c: AttnCase = { ...c0, M, name: '' };
          if (c.mode === 'masked')
            expect(c.p + M, 'masked chain steps need a ring that is not full').toBeLessThanOrEqual(c.window);
          const x = attnData(r, c);
          const qRow = c.heads * c.d;
          const all = await runAttention(lab, c, x, { round, fused });
          for (let j = 0; j < M; j++) {
            const s = chainStep(c, x, j);
            expectSameBytes(
              `attention.${c.mode}${fused ? ' fused' : ''} M=${M} row ${j}${round ? ' bf16' : ''}`,
              all.subarray(j * qRow * 4, (j + 1) * qRow * 4),
              (await runAttention(lab, s.step, s.x, { round, fused })).subarray(0, qRow * 4),
            );
          }
          // and the block is right, not just consistent
          const want = attnReference(c, x);
          if (!round)
            expectClose(
              `attention.${c.mode}`,
              new Float32Array(all.buffer, all.byteOffset, M * qRow),
              want.out,
              want.bound,
              1,
            );
          lab.release();
        }
      });
    }

    // The arithmetic itself, byte for byte: the kernel == attentionF32 (the WGSL replayed in f32). With
    // one segment (n <= 64, split 1, or the prefill plan) that is the sequential softmax and P.V the
    // kernel had before segmentation; past 64 keys, the exact plan's and an inexact split's partitions.
    const seq: AttnCase[] = [
      { name: 'linear', mode: 'linear', heads: 4, kvHeads: 2, d: 16, M: 3, p: 5, window: 0, base: 0 },
      { name: 'physical', mode: 'physical', heads: 4, kvHeads: 2, d: 16, M: 4, p: 15, window: 8, base: 13 },
      { name: 'chrono', mode: 'chrono', heads: 2, kvHeads: 1, d: 8, M: 3, p: 10, window: 6, base: 9 },
      { name: 'draft', mode: 'draft', heads: 4, kvHeads: 2, d: 16, M: 1, p: 17, window: 8, base: 13, span: 9 },
      { name: 'linear, 61..64 keys', mode: 'linear', heads: 2, kvHeads: 1, d: 8, M: 4, p: 60, window: 0, base: 0 },
    ];
    for (const c of seq) {
      it(`one segment == the sequential kernel, byte for byte: ${c.name}, rows at ${c.p}..${c.p + c.M - 1}`, async () => {
        const x = attnData(new Rand(777 + c.p), c);
        expectSameBytes(
          `attention.${c.mode} sequential`,
          await runAttention(lab, c, x),
          bytesOf(attentionF32(c, x, () => 1)),
        );
        await expectFusedSame(lab, c, x);
      });
    }
    const long: AttnCase = { name: '', mode: 'linear', heads: 2, kvHeads: 1, d: 64, M: 2, p: 300, window: 0, base: 0 };
    const longRing: AttnCase = {
      name: '',
      mode: 'chrono',
      heads: 2,
      kvHeads: 1,
      d: 8,
      M: 3,
      p: 400,
      window: 200,
      base: 7,
    };
    // 256 .. 258 keys in one segment: the fused path's workgroup memory holds 256 (SEG_CAP), so row 0
    // keeps its scores there and rows 1, 2 in `s`.
    const capEdge: AttnCase = {
      name: '',
      mode: 'linear',
      heads: 2,
      kvHeads: 1,
      d: 8,
      M: 3,
      p: 255,
      window: 0,
      base: 0,
    };
    for (const c of [long, longRing, capEdge]) {
      it(`one segment == the sequential kernel past 64 keys (${c.mode}, ${c.mode === 'linear' ? c.p + 1 : c.window} keys): split 1 and the prefill plan`, async () => {
        const x = attnData(new Rand(778 + c.p), c);
        const want = bytesOf(attentionF32(c, x, () => 1));
        expectSameBytes(`attention.${c.mode} split 1`, await runAttention(lab, c, x, { split: 1 }), want);
        expectSameBytes(`attention.${c.mode} prefill`, await runAttention(lab, c, x, { prefill: true }), want);
        await expectFusedSame(lab, c, x, { split: 1 });
        await expectFusedSame(lab, c, x, { prefill: true });
      });
    }
    const segmented: (AttnCase & { split: number })[] = [
      {
        name: 'linear, 299..301 keys, exact plan (5 segments)',
        mode: 'linear',
        heads: 2,
        kvHeads: 1,
        d: 8,
        M: 3,
        p: 298,
        window: 0,
        base: 0,
        split: 0,
      },
      {
        name: 'physical, 4100 keys, exact plan (64 of 65)',
        mode: 'physical',
        heads: 2,
        kvHeads: 1,
        d: 8,
        M: 2,
        p: 8300,
        window: 4100,
        base: 77,
        split: 0,
      },
      {
        name: 'draft, 4101 keys, exact plan (64 of 65)',
        mode: 'draft',
        heads: 2,
        kvHeads: 1,
        d: 8,
        M: 1,
        p: 5000,
        window: 4100,
        base: 903,
        span: 4101,
        split: 0,
      },
      {
        name: 'linear, split 7 (inexact)',
        mode: 'linear',
        heads: 2,
        kvHeads: 1,
        d: 8,
        M: 3,
        p: 298,
        window: 0,
        base: 0,
        split: 7,
      },
      {
        name: 'linear, split 8 > keys of the first rows (empty segments)',
        mode: 'linear',
        heads: 2,
        kvHeads: 1,
        d: 8,
        M: 8,
        p: 0,
        window: 0,
        base: 0,
        split: 8,
      },
      {
        name: 'masked, split 3 (inexact)',
        mode: 'masked',
        heads: 2,
        kvHeads: 1,
        d: 8,
        M: 4,
        p: 40,
        window: 16,
        base: 37,
        split: 3,
      },
      {
        name: 'masked, exact plan, 150 widened keys',
        mode: 'masked',
        heads: 2,
        kvHeads: 1,
        d: 8,
        M: 6,
        p: 300,
        window: 145,
        base: 0,
        split: 0,
      },
    ];
    for (const c of segmented) {
      it(`segments == the WGSL replayed in f32, byte for byte: ${c.name}`, async () => {
        const x = attnData(new Rand(779 + c.p + c.split), c);
        const plan = c.split > 0 ? () => c.split : exactPlan();
        expectSameBytes(
          `attention.${c.mode} split ${c.split}`,
          await runAttention(lab, c, x, { split: c.split }),
          bytesOf(attentionF32(c, x, plan)),
        );
        await expectFusedSame(lab, c, x, { split: c.split });
      });
    }

    // The inexact variants are the exact kernel with only the partition changed: a split equal to the
    // exact plan's segment count (the same for every row here) gives the exact bytes, another does not.
    const off: AttnCase[] = [
      {
        name: 'linear, 201..204 keys (4 segments)',
        mode: 'linear',
        heads: 2,
        kvHeads: 1,
        d: 8,
        M: 4,
        p: 200,
        window: 0,
        base: 0,
      },
      {
        name: 'physical, 4100 keys (64 segments)',
        mode: 'physical',
        heads: 2,
        kvHeads: 1,
        d: 8,
        M: 3,
        p: 8300,
        window: 4100,
        base: 77,
      },
      {
        name: 'masked, 154 widened keys (3 segments)',
        mode: 'masked',
        heads: 2,
        kvHeads: 1,
        d: 8,
        M: 4,
        p: 150,
        window: 200,
        base: 0,
      },
    ];
    for (const c of off) {
      it(`mechanism off == exact: ${c.name}, split = the exact segment count`, async () => {
        const x = attnData(new Rand(780 + c.p), c);
        const counts = new Set(range(c.M).map((j) => exactPlan()(keysWithMask(c, j).keys.length)));
        expect(counts.size, 'every row has the same exact segment count').toBe(1);
        const [S] = counts;
        const exact = await runAttention(lab, c, x);
        expectSameBytes(`attention.${c.mode} split ${S}`, await runAttention(lab, c, x, { split: S }), exact);
        const other = await runAttention(lab, c, x, { split: S - 1 });
        expect(
          other.some((b, i) => b !== exact[i]),
          `split ${S - 1} changes some bits`,
        ).toBe(true);
        for (const split of [0, S - 1]) await expectFusedSame(lab, c, x, { split });
      });
    }
  });

  // -- inexact variants of the parity-lab policies (src/model/policy.ts): split and masked attention ----
  describe('inexact variants: split and masked attention', () => {
    const cases: (AttnCase & { split: number })[] = [
      // attention-m-split: split = M
      {
        name: 'linear, split M',
        mode: 'linear',
        heads: 4,
        kvHeads: 2,
        d: 16,
        M: 4,
        p: 7,
        window: 0,
        base: 0,
        split: 4,
      },
      {
        name: 'linear from 0, split 8 > keys of the first rows',
        mode: 'linear',
        heads: 2,
        kvHeads: 1,
        d: 8,
        M: 8,
        p: 0,
        window: 0,
        base: 0,
        split: 8,
      },
      {
        name: 'physical, wrapped ring, split M',
        mode: 'physical',
        heads: 4,
        kvHeads: 2,
        d: 16,
        M: 3,
        p: 15,
        window: 8,
        base: 13,
        split: 3,
      },
      // mask-widened: the union of the rows' windows in chronological order, -inf outside each row's own
      {
        name: 'masked, ring not full, no split',
        mode: 'masked',
        heads: 2,
        kvHeads: 2,
        d: 16,
        M: 4,
        p: 3,
        window: 16,
        base: 0,
        split: 0,
      },
      {
        name: 'masked, wrapped ring, split 2',
        mode: 'masked',
        heads: 4,
        kvHeads: 2,
        d: 16,
        M: 4,
        p: 15,
        window: 8,
        base: 13,
        split: 2,
      },
      {
        name: 'masked, wrapped ring, split 3',
        mode: 'masked',
        heads: 4,
        kvHeads: 1,
        d: 8,
        M: 5,
        p: 40,
        window: 16,
        base: 37,
        split: 3,
      },
      {
        name: 'masked, wrapped ring, W 6, split 2',
        mode: 'masked',
        heads: 2,
        kvHeads: 1,
        d: 8,
        M: 3,
        p: 10,
        window: 6,
        base: 9,
        split: 2,
      },
    ];
    for (const c of cases) {
      it(`attention ${c.name}: ${c.heads}/${c.kvHeads} heads, d ${c.d}, rows at ${c.p}..${c.p + c.M - 1}${c.mode === 'linear' ? '' : `, W ${c.window}, base ${c.base}`}`, async () => {
        const r = new Rand(12000 + c.p * 13 + c.window * 7 + c.M + c.split);
        if (c.mode !== 'linear') checkKeyOrder(c);
        const x = attnData(r, c);
        // masked rows reduce over up to W + M - 1 keys
        const maxKeys = (c.mode === 'linear' ? x.slots : c.window + c.M - 1) + 2;
        if (c.mode === 'masked') expect(op.maskedKeyCount(c.p, c.M, c.window)).toBeLessThanOrEqual(maxKeys);
        const out = lab.sentinel(c.M * c.heads * c.d);
        await lab.run((rec) =>
          recordAttention(
            lab,
            rec,
            c,
            {
              q: lab.f32(x.q),
              kCache: lab.f32(x.kCache),
              vCache: lab.f32(x.vCache),
              kStage: lab.f32(x.kStage),
              vStage: lab.f32(x.vStage),
              out,
            },
            false,
            maxKeys,
            c.split,
          ),
        );
        // split > 0: `split` segments of ceil(n / split) keys (the bound's S and L); 0: the exact plan
        const want = attnReference(c, x, c.split > 0 ? () => c.split : exactPlan());
        expectClose(
          `attention.${c.mode}${c.split ? '_split' : ''}`,
          await lab.read(out, c.M * c.heads * c.d),
          want.out,
          want.bound,
          1,
        );
        await expectFusedSame(lab, c, x, { split: c.split });
      });
    }
  });
});
