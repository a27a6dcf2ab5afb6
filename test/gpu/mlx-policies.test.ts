/**
 * The policies that predict MLX on Apple GPUs (mlx-m1, mlx-m3plus, mlx-m3plus-narrow).
 * - Each MLX kernel of shaders/matmul_mlx.wgsl (qmv, qmv_fast, qmv_quad, qmv_wide) equals its float32
 *   CPU twin, src/reference/mlx-orders.ts, byte for byte, through ops.matmul as the engine calls it,
 *   for every kernel MLX's dispatch picks (src/model/mlx-dispatch.ts), f32 and bf16, row parts, strides.
 * - Mechanism off == exact: where MLX runs one kernel for every M (M1, the narrow pin), a verify
 *   block's rows are the chain's rows byte for byte; on M3 and newer (qmv_wide from M = 2) they differ.
 * - The probe on tiny-a: who fails, where it is blamed, and the kernel pair the report names.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rand, bf16Rne, bytesOf, expectSameBytes, useLab, type Lab } from './helpers/kernel-lab.ts';
import { affineLinear, type AffineCase } from './helpers/linears.ts';
import * as op from '../../src/model/ops.ts';
import { mlxKernel, type MlxKernel, type MlxMachine } from '../../src/model/mlx-dispatch.ts';
import { policyByName } from '../../src/model/policy.ts';
import { mlxOrder } from '../../src/reference/mlx-orders.ts';
import type { AffineWeights } from './helpers/linears.ts';
import { testGpu } from './gpu-context.ts';
import { tinyWeights } from './tiny-model.ts';
import { runProbe, type ProbeEnv } from '../../src/parity/probe.ts';
import { validateReport } from '../../src/parity/report.ts';
import { checkpointInfo } from '../../src/parity/summary.ts';
import { tinyTarget } from '../support/fixtures.ts';
import type { GpuContext } from '../../src/gpu/device.ts';

const machine = (name: string): MlxMachine => policyByName(name).mlx!;
const M1 = machine('mlx-m1');
const M3 = machine('mlx-m3plus');
const NARROW = machine('mlx-m3plus-narrow');

/** x rows as the engine's activations hold them: f32, or bf16 values in bf16 mode. */
function xRows(r: Rand, M: number, xStride: number, round: boolean): Float32Array {
  return Float32Array.from(r.f32s(M * xStride), (v) => (round ? bf16Rne(v) : v));
}

async function gpuMatmul(lab: Lab, w: AffineWeights, x: Float32Array, rows: op.Rows, xStride: number) {
  const y = lab.sentinel(rows.M * w.N);
  const xb = lab.f32(x, 'x');
  await lab.run((rec) => op.matmul(rec, w.lin, xb, y, rows, xStride, w.N));
  return lab.bytes(y, rows.M * w.N);
}

// Shapes chosen so MLX's dispatch reaches every modelled kernel: K a multiple of qmv_fast's block or not,
// N a multiple of 8 or not, K = 64 / 128 (qmv_quad), a K that leaves some lanes idle at the tail, row
// parts (the kernels write at n_offset), and an x stride wider than K.
const CASES: (AffineCase & { what: string; xStride?: number; m1: MlxKernel })[] = [
  { what: '4-bit K 512 N 16 (fast)', N: 16, K: 512, bits: 4, gs: 64, m1: 'qmv_fast' },
  { what: '4-bit K 256 N 12, parts of 5 rows', N: 12, K: 256, bits: 4, gs: 64, rowsPerPart: 5, m1: 'qmv' },
  { what: '4-bit K 320 (tail), gs 32, x stride 324', N: 9, K: 320, bits: 4, gs: 32, xStride: 324, m1: 'qmv' },
  { what: '8-bit K 256 N 8 (fast)', N: 8, K: 256, bits: 8, gs: 64, m1: 'qmv_fast' },
  { what: '8-bit K 192 N 10 (tail)', N: 10, K: 192, bits: 8, gs: 64, m1: 'qmv' },
  { what: '2-bit K 512 N 8 (fast)', N: 8, K: 512, bits: 2, gs: 64, m1: 'qmv_fast' },
  { what: '4-bit K 128 (quad)', N: 70, K: 128, bits: 4, gs: 64, m1: 'qmv_quad' },
  { what: '8-bit K 64 gs 32 (quad)', N: 9, K: 64, bits: 8, gs: 32, m1: 'qmv_quad' },
];

describe('MLX kernel orders (shaders/matmul_mlx.wgsl) == their float32 CPU twin, byte for byte', () => {
  let lab: Lab;
  useLab((l) => (lab = l));

  CASES.forEach((c, ci) => {
    it(`${c.what}: M = 1, 2, 3, 6 on M1 and M3, f32 and bf16`, async () => {
      const r = new Rand(1700 + ci);
      const w = await affineLinear(lab, r, c);
      const xStride = c.xStride ?? c.K;
      const seen = new Set<string>();
      for (const mach of [M1, M3]) {
        for (const M of [1, 2, 3, 6]) {
          for (const round of [false, true]) {
            const choice = mlxKernel(mach, { N: c.N, K: c.K, bits: c.bits, groupSize: c.gs }, M);
            seen.add(choice.kernel);
            const x = xRows(r, M, xStride, round);
            const got = await gpuMatmul(lab, w, x, { M, round, mlx: mach }, xStride);
            const want = mlxOrder(w, { x, M, xStride, round }, choice);
            expectSameBytes(`${c.what}, ${choice.kernel}, M ${M}${round ? ', bf16' : ''}`, got, bytesOf(want));
          }
        }
      }
      expect(mlxKernel(M1, { N: c.N, K: c.K, bits: c.bits, groupSize: c.gs }, 1).kernel).toBe(c.m1);
      // qmv_quad serves every M; elsewhere M3 switches to qmv_wide from M = 2
      expect([...seen].sort()).toEqual(c.m1 === 'qmv_quad' ? ['qmv_quad'] : [c.m1, 'qmv_wide'].sort());
    });
  });

  // Mechanism off: one kernel for every M (M1; the narrow pin) gives each verify row the chain's bytes.
  // On: M3's qmv_wide at M = 3 changes some of them (else the test could not see the mechanism).
  it('one kernel for every M == the chain rows; qmv_wide from M = 2 differs', async () => {
    const r = new Rand(1790);
    const c: AffineCase = { N: 64, K: 512, bits: 4, gs: 64 };
    const w = await affineLinear(lab, r, c);
    const M = 3;
    for (const round of [false, true]) {
      const x = xRows(r, M, c.K, round);
      const chain: Uint8Array[] = [];
      for (let m = 0; m < M; m++)
        chain.push(await gpuMatmul(lab, w, x.subarray(m * c.K, (m + 1) * c.K), { M: 1, round, mlx: M3 }, c.K));
      const chainBytes = new Uint8Array(chain.flatMap((b) => [...b]));
      for (const mach of [M1, NARROW])
        expectSameBytes(
          `${mach.gpu.label}${mach.narrowPin ? ', narrow pin' : ''}: block of ${M} vs chain${round ? ', bf16' : ''}`,
          await gpuMatmul(lab, w, x, { M, round, mlx: mach }, c.K),
          chainBytes,
        );
      const wide = await gpuMatmul(lab, w, x, { M, round, mlx: M3 }, c.K);
      const differing = wide.reduce((n, b, i) => n + (b !== chainBytes[i] ? 1 : 0), 0);
      console.log(
        `qmv_fast (M = 1) vs qmv_wide (M = ${M})${round ? ', bf16' : ''}: ${differing} of ${wide.length} bytes differ`,
      );
      if (!round) expect(differing, 'qmv_wide changes some f32 bits').toBeGreaterThan(0);
    }
  });
});

// The probe on tiny-a (draws 8, 8, 8, 48). MLX's dispatch has no per-op exception: on M3 and newer every
// quantized linear of a verify block runs qmv_wide, so the first linear of the forward, layer 0's q_proj
// (4-bit, 256 -> 256: qmv at M = 1), is where the arms first differ; with the narrow pin or on M1 each
// linear runs one kernel for every M, and attention, norms and RoPE are the exact policy's, so every
// draw is equal.
describe('the MLX policies on the tiny-a probe', () => {
  let ctx: GpuContext;
  let env: ProbeEnv;
  beforeAll(async () => {
    ctx = await testGpu();
    env = { ctx, weights: await tinyWeights(ctx), target: checkpointInfo(await tinyTarget()), platform: 'test' };
  });
  afterAll(() => ctx?.destroy());

  for (const precision of ['f32', 'bf16'] as const) {
    it(`mlx-m3plus fails every draw at layer 0 q_proj, qmv vs qmv_wide (${precision}, K = 2 and 4)`, async () => {
      for (const K of [2, 4]) {
        const r = await runProbe(env, { block: K, policy: 'mlx-m3plus', precision, localize: true });
        expect(validateReport(r)).toEqual([]);
        expect(r.draws.map((d) => d.verdict)).toEqual(['diverges', 'diverges', 'diverges', 'diverges']);
        for (const d of r.draws) {
          const fd = d.firstDivergence!;
          expect({ layer: fd.layer, stage: fd.stage }).toEqual({ layer: 0, stage: 'q' });
          expect(fd.cause).toMatch(
            new RegExp(`^MLX on M3/M4.*: q_proj: qmv \\(M = 1\\) vs qmv_wide \\(M = ${K}\\); narrow pin`),
          );
          const at = d.stages!.findIndex((s) => s.layer === 0 && s.stage === 'q');
          expect(at).toBe(0); // nothing runs before it but the embedding and the input norm
        }
        console.log(
          `mlx-m3plus ${precision} K ${K}: ${r.draws[0].text}; ${r.draws[0].firstDivergence!.text}\n  ${r.draws[0].firstDivergence!.cause}`,
        );
      }
    });

    for (const policy of ['mlx-m3plus-narrow', 'mlx-m1']) {
      it(`${policy} passes every draw (${precision}, K = 2, 4, 8)`, async () => {
        for (const K of [2, 4, 8]) {
          const r = await runProbe(env, { block: K, policy, precision, localize: true });
          expect(
            r.draws.map((d) => d.verdict),
            `K ${K}`,
          ).toEqual(['equal', 'equal', 'equal', 'equal']);
        }
      });
    }
  }
});
