import { describe, expect, it } from 'vitest';
import * as twin from '../../src/reference/qwen3_5/gdn-ops.ts';
import { CHUNK, chunkedRecurrence, expRef32, F32_WGSL, F64 } from '../../src/reference/qwen3_5/gdn-chunked.ts';
import { softplus } from '../../src/reference/qwen3_5/scalar.ts';
import { normalRng } from '../support/qwen-synth.ts';

/**
 * The chunked (WY) form of the gated delta rule (policy gdn-chunked's verify arm) is the same rule as the
 * token-by-token recurrence: in float64 both give the same outputs and states to rounding level, also over
 * several chunks; in the kernel's float32 order (the emulation test/gpu/qwen-gdn-chunked.test.ts compares the
 * kernel's bytes with) they stay close to float64.
 */
const SHAPES: twin.GdnShape[] = [
  { C: 2 * 2 * 32 + 4 * 32, K: 4, Hk: 2, Hv: 4, Dk: 32, Dv: 32 }, // qwen-tiny
  { C: 2 * 1 * 16 + 3 * 8, K: 3, Hk: 1, Hv: 3, Dk: 16, Dv: 8 },
];

function inputs(s: twin.GdnShape, M: number, seed: number) {
  const n = normalRng(seed);
  const f32 = (len: number, sd: number) => Float64Array.from({ length: len }, () => Math.fround(sd * n()));
  const c = f32(M * s.C, 1);
  const qk = Float64Array.from(twin.qkNorm(c, M, s), Math.fround);
  const a = f32(M * s.Hv, 1);
  const b = f32(M * s.Hv, 1);
  const aLog = f32(s.Hv, 0.5);
  const dtBias = f32(s.Hv, 0.5);
  const gb = twin.gates(a, b, aLog, dtBias, M, s.Hv);
  // the log decays whose exp gates() returned as g
  const lg = a.map((v, i) => -Math.exp(aLog[i % s.Hv]) * softplus(v + dtBias[i % s.Hv]));
  const S = f32(s.Hv * s.Dk * s.Dv, 0.3);
  return { c, qk, lg, gb, S, M };
}

function maxRel(got: ArrayLike<number>, want: ArrayLike<number>): number {
  let scale = 0;
  let err = 0;
  for (let i = 0; i < want.length; i++) {
    scale = Math.max(scale, Math.abs(want[i]));
    err = Math.max(err, Math.abs(got[i] - want[i]));
  }
  return err / scale;
}

describe('Gated DeltaNet, chunked (WY) form', () => {
  for (const s of SHAPES)
    for (const M of [1, 2, 5, 8, CHUNK + 6]) {
      it(`float64: same outputs and per-token states as the recurrence (Dk ${s.Dk}, Hv ${s.Hv}, M ${M})`, () => {
        const x = inputs(s, M, 100 + M);
        const chunked = chunkedRecurrence(x, s, F64);
        const rec = twin.recurrence(Float64Array.from(x.S), x.qk, x.c, x.gb, M, s, true);
        expect(maxRel(chunked.o, rec.o)).toBeLessThan(1e-12);
        expect(maxRel(chunked.states, rec.states!)).toBeLessThan(1e-12);
        // the input state is read, never written
        expect(x.S).toEqual(inputs(s, M, 100 + M).S);
      });
    }

  it('float32 in the kernel order: f32 values close to float64', () => {
    const s = SHAPES[0];
    const x = inputs(s, 4, 7);
    const f32 = chunkedRecurrence(x, s, F32_WGSL);
    const f64 = chunkedRecurrence(x, s, F64);
    expect(maxRel(f32.o, f64.o)).toBeLessThan(1e-5);
    expect(maxRel(f32.states, f64.states)).toBeLessThan(1e-5);
    expect(f32.o.every((v) => Math.fround(v) === v)).toBe(true);
    expect(f32.o).not.toEqual(f64.o);
  });

  it('exp_ref in f32 is within 1.5 ULP of e^x', () => {
    for (const v of [-30, -5.5, -1, -0.3, 0, 0.25, 1, 3.7, 12]) {
      const x = Math.fround(v);
      expect(Math.abs(expRef32(x) - Math.exp(x)) / Math.exp(x)).toBeLessThan(1.5 * 2 ** -23);
    }
    expect(expRef32(-104)).toBe(0);
  });
});
