/**
 * shaders/ple.wgsl (src/model/gemma4/e-series/ple-ops.ts), the two per-layer-embedding ops the dense kernels lack:
 * `gate` computes elementwise.wgsl geglu's arithmetic with the second operand read from one layer's slice of
 * each row, so it must equal geglu on that slice copied out, byte for byte, and a row's bytes must not depend on
 * how many rows the dispatch has; `scale` is one IEEE multiply (then bf16 rounding in bf16 mode).
 */
import { describe, expect, it } from 'vitest';
import * as ple from '../../src/model/gemma4/e-series/ple-ops.ts';
import * as op from '../../src/model/ops.ts';
import { ADAPTER, Rand, bf16Rne, bytesOf, expectSameBytes, useLab, type Lab } from './helpers/kernel-lab.ts';

describe(`shaders/ple.wgsl (${ADAPTER})`, () => {
  let lab: Lab;
  useLab((l) => (lab = l));

  for (const round of [false, true]) {
    it(`gate == geglu on the layer's slice, every row as in a one-row dispatch (${round ? 'bf16' : 'f32'})`, async () => {
      const r = new Rand(round ? 71 : 70);
      const [M, L, P] = [5, 3, 40]; // P not a multiple of the workgroup: rows straddle workgroups
      const gate = Float64Array.from({ length: M * P }, (_, i) =>
        Math.fround(i % 7 === 6 ? r.uniform(-12, 12) : r.normal(2)),
      );
      const inputs = r.f32s(M * L * P);
      const ib = lab.f32(inputs);
      for (let l = 0; l < L; l++) {
        const slice = new Float32Array(M * P);
        for (let m = 0; m < M; m++) slice.set(inputs.subarray(m * L * P + l * P, m * L * P + (l + 1) * P), m * P);
        const a = lab.f32(gate);
        const g = lab.f32(gate);
        const sb = lab.f32(slice);
        const rows = Array.from({ length: M }, (_, m) => lab.f32(gate.subarray(m * P, (m + 1) * P)));
        const rowInputs = Array.from({ length: M }, (_, m) => lab.f32(inputs.subarray(m * L * P, (m + 1) * L * P)));
        await lab.run((rec) => {
          ple.gateInPlace(rec, a, ib, M, P, L * P, l * P, round);
          op.geglu(rec, g, sb, M * P, round);
          rows.forEach((rb, m) => ple.gateInPlace(rec, rb, rowInputs[m], 1, P, L * P, l * P, round));
        });
        expectSameBytes(`layer ${l}: gate vs geglu`, await lab.bytes(a, M * P), await lab.bytes(g, M * P));
        for (let m = 0; m < M; m++)
          expectSameBytes(
            `layer ${l} row ${m}: M = ${M} vs M = 1`,
            await lab.bytes(a, P, m * P),
            await lab.bytes(rows[m], P),
          );
      }
    });

    it(`scale is one multiply (${round ? 'then bf16 rounding' : 'f32'})`, async () => {
      const r = new Rand(round ? 81 : 80);
      const n = 1000;
      const x = r.f32s(n);
      const s = 0.08837890625; // the tiny fixture's H^-0.5 in bf16
      const b = lab.f32(x);
      await lab.run((rec) => ple.scaleInPlace(rec, b, n, s, round));
      const want = Float32Array.from(x, (v) => (round ? bf16Rne(Math.fround(v * s)) : Math.fround(v * s)));
      expect(Buffer.from(await lab.bytes(b, n)).equals(Buffer.from(bytesOf(want)))).toBe(true);
    });
  }
});
