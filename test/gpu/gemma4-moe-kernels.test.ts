/**
 * The MoE kernels (shaders/moe_experts.wgsl, shaders/moe.wgsl via src/model/gemma4/moe/moe-ops.ts) on gemma4-moe-tiny's
 * layer 0 experts:
 * - expert_lanes computes, for each (row, slot), exactly what ops.matmul's exact lanes kernel computes for that
 *   expert's slice of the stacked tensors (src/format/experts.ts expertLinear) on that row: byte for byte, for
 *   gate / up (slots share their row's x) and down (each slot its own x), f32 and bf16, and a slot's bytes do not
 *   depend on how many slots the dispatch has;
 * - GROUPED with one row per expert is the exact bytes; with n rows it is the exact kernel's partials over n K
 *   ranges (x masked to each range, as ops.matmulSplitK does) added in order in f32: the one mechanism of moe-grouped;
 * - route picks the top-k by descending score with ties to the lower id (reference topKIndices), both conventions
 *   the same experts, weights as the float64 formulas within f32 rounding.
 */
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { expertLinear } from '../../src/format/experts.ts';
import type { TargetDescription } from '../../src/format/model-description.ts';
import { TensorUploader } from '../../src/gpu/upload.ts';
import { expertMatvec, route } from '../../src/model/gemma4/moe/moe-ops.ts';
import type { GpuExperts, GpuMoeBlock } from '../../src/model/gemma4/moe/moe-weights.ts';
import { uploadWeights } from '../../src/model/gpu-weights.ts';
import type { GpuLinear } from '../../src/model/gpu-linear.ts';
import * as op from '../../src/model/ops.ts';
import { openCheckpointDir } from '../../src/node/file-source.ts';
import { topKIndices } from '../../src/reference/gemma4/moe/moe.ts';
import { GEMMA4_MOE_TINY } from '../support/fixtures.ts';
import { ADAPTER, Rand, expectSameBytes, useLab, type Lab } from './helpers/kernel-lab.ts';

describe(`shaders/moe_experts.wgsl and moe.wgsl (${ADAPTER})`, () => {
  let lab: Lab;
  useLab((l) => (lab = l));
  let moe: GpuMoeBlock;
  let slices: { gate: GpuLinear[]; down: GpuLinear[] };
  beforeAll(async () => {
    const desc = (await openCheckpointDir(path.join(GEMMA4_MOE_TINY, 'target'))).description as TargetDescription;
    const w = await uploadWeights(lab.device, desc); // freed with the device
    moe = w.layers[0].moe!;
    // each expert's slice uploaded on its own, as an ordinary linear
    const m = desc.layers[0].moe!;
    const up = new TensorUploader(lab.device, 1 << 30);
    const one = async (x: typeof m.gate, e: number): Promise<GpuLinear> => {
      const l = expertLinear(x, e);
      if (l.kind !== 'affine') throw new Error('fixture experts are affine');
      const rows = up.rowsPerPart([l.weight, l.scales, l.biases]);
      return {
        desc: l,
        weight: await up.upload(l.weight, rows),
        scales: await up.upload(l.scales, rows),
        biases: await up.upload(l.biases, rows),
      };
    };
    slices = { gate: [], down: [] };
    for (let e = 0; e < 8; e++) {
      slices.gate.push(await one(m.gate, e));
      slices.down.push(await one(m.down, e));
    }
  });

  const slotIds = [3, 0, 7, 5, 1, 2, 6, 4, 4, 7, 0, 1]; // 3 rows x top-4: every expert, some twice
  const k = 4;

  for (const round of [false, true]) {
    for (const which of ['gate', 'down'] as const) {
      it(`expert_lanes == ops.matmul (lanes) on the expert's slice, per slot and alone (${which}, ${round ? 'bf16' : 'f32'})`, async () => {
        const w: GpuExperts = moe[which];
        const K = w.desc.inFeatures;
        const N = w.desc.outFeatures;
        const slots = slotIds.length;
        const xRows = which === 'gate' ? slots / k : slots;
        const xDiv = which === 'gate' ? k : 1;
        const r = new Rand(round ? 11 : 10);
        const x = r.f32s(xRows * K);
        const xb = lab.f32(x);
        const ids = lab.u32(slotIds);
        const ws = { ids, counts: lab.u32(slotIds.map(() => 1)) };
        const y = lab.sentinel(slots * N);
        const want = Array.from({ length: slots }, () => lab.sentinel(N));
        const xr = Array.from({ length: slots }, (_, s) =>
          lab.f32(x.subarray(Math.floor(s / xDiv) * K, (Math.floor(s / xDiv) + 1) * K)),
        );
        const alone = Array.from({ length: slots }, () => lab.sentinel(N));
        const aloneIds = slotIds.map((e) => lab.u32([e]));
        await lab.run((rec) => {
          expertMatvec(rec, w, xb, y, xRows, xDiv, round, false, ws);
          slotIds.forEach((e, s) => {
            op.matmul(
              rec,
              (which === 'gate' ? slices.gate : slices.down)[e],
              xr[s],
              want[s],
              { M: 1, round },
              K,
              N,
              'lanes',
            );
            expertMatvec(rec, w, xr[s], alone[s], 1, 1, round, false, { ids: aloneIds[s], counts: ws.counts });
          });
        });
        for (let s = 0; s < slots; s++) {
          const got = await lab.bytes(y, N, s * N);
          expectSameBytes(`slot ${s} (expert ${slotIds[s]}) vs ops.matmul`, got, await lab.bytes(want[s], N));
          expectSameBytes(`slot ${s} vs a one-slot dispatch`, got, await lab.bytes(alone[s], N));
        }
      });
    }
  }

  it('GROUPED: one row per expert is the exact bytes; n rows = the exact partials of n K ranges added in f32', async () => {
    const w = moe.gate; // K = 128: two groups of 64
    const K = w.desc.inFeatures;
    const N = w.desc.outFeatures;
    const slots = slotIds.length;
    const r = new Rand(21);
    const x = r.f32s((slots / k) * K);
    const xb = lab.f32(x);
    const ids = lab.u32(slotIds);
    const masked = [0, 1].map((g) => lab.f32(x.map((v, i) => (Math.floor((i % K) / 64) === g ? v : 0))));
    const [exact, ones, twos, p0, p1] = [0, 1, 2, 3, 4].map(() => lab.sentinel(slots * N));
    const counts1 = lab.u32(slotIds.map(() => 1));
    const counts2 = lab.u32(slotIds.map(() => 2));
    await lab.run((rec) => {
      expertMatvec(rec, w, xb, exact, slots / k, k, false, false, { ids, counts: counts1 });
      expertMatvec(rec, w, xb, ones, slots / k, k, false, true, { ids, counts: counts1 });
      expertMatvec(rec, w, xb, twos, slots / k, k, false, true, { ids, counts: counts2 });
      expertMatvec(rec, w, masked[0], p0, slots / k, k, false, false, { ids, counts: counts1 });
      expertMatvec(rec, w, masked[1], p1, slots / k, k, false, false, { ids, counts: counts1 });
    });
    const n = slots * N;
    expectSameBytes('grouped, one row per expert vs exact', await lab.bytes(ones, n), await lab.bytes(exact, n));
    const a = await lab.read(p0, n);
    const b = await lab.read(p1, n);
    const sum = Float32Array.from(a, (v, i) => v + b[i]);
    const got = await lab.read(twos, n);
    expectSameBytes(
      'grouped, two rows per expert vs two range partials',
      new Uint8Array(got.buffer),
      new Uint8Array(sum.buffer),
    );
    const e = await lab.read(exact, n);
    const differ = got.filter((v, i) => v !== e[i]).length;
    console.log(`moe-grouped, 2 ranges: ${differ} of ${n} outputs differ from the exact bytes`);
    expect(differ).toBeGreaterThan(0);
  });

  it('route: top-k by descending score, ties to the lower id; both conventions choose the same experts', async () => {
    const E = 8;
    const M = 6;
    const r = new Rand(31);
    const scores = Array.from({ length: M * E }, () => Math.fround(r.normal(2)));
    // ties across the k-th place: row 1 has 2.5 at experts 2, 5 and 6; row 2 every score equal
    for (const e of [2, 5, 6]) scores[E + e] = 2.5;
    for (let e = 0; e < E; e++) scores[2 * E + e] = 0.75;
    const sb = lab.f32(scores);
    const pes = Float64Array.from({ length: E }, (_, e) => 1 + e / 8); // exact in bf16
    const pesBits = new Uint16Array(E);
    pes.forEach((v, e) => (pesBits[e] = new Uint32Array(new Float32Array([v]).buffer)[0] >>> 16));
    const perExpertScale = lab.u32(new Uint32Array(pesBits.buffer));
    const out: Record<string, { ids: Uint32Array; w: Float32Array }> = {};
    for (const order of ['mlx', 'transformers'] as const) {
      const ws = { scores: sb, ids: lab.sentinel(M * k), weights: lab.sentinel(M * k) };
      await lab.run((rec) => route(rec, { numExperts: E, topK: k, perExpertScale }, ws, M, order, false));
      out[order] = { ids: await lab.readU32(ws.ids, M * k), w: await lab.read(ws.weights, M * k) };
    }
    for (let m = 0; m < M; m++) {
      const row = scores.slice(m * E, (m + 1) * E);
      const want = topKIndices(row, k);
      expect([...out.mlx.ids.subarray(m * k, (m + 1) * k)], `mlx row ${m}`).toEqual(want);
      expect([...out.transformers.ids.subarray(m * k, (m + 1) * k)], `transformers row ${m}`).toEqual(want);
      // float64 weights: softmax over the k, times per_expert_scale
      const mx = row[want[0]];
      const ex = want.map((e) => Math.exp(row[e] - mx));
      const s = ex.reduce((a, b) => a + b, 0);
      want.forEach((e, j) => {
        const w64 = (ex[j] / s) * pes[e];
        for (const order of ['mlx', 'transformers'] as const)
          expect(Math.abs(out[order].w[m * k + j] - w64), `${order} row ${m} slot ${j}`).toBeLessThan(1e-6);
      });
    }
    expect([...out.mlx.ids.subarray(k, 2 * k)]).toEqual([2, 5, 6, topKIndices(scores.slice(E, 2 * E), 4)[3]]);
    expect([...out.mlx.ids.subarray(2 * k, 3 * k)]).toEqual([0, 1, 2, 3]);
  });
});
