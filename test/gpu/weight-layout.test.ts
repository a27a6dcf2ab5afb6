/**
 * The k-major weight layout (src/gpu/weight-layout.ts, shaders/affine_layout.wgsl) moves values, never changes
 * one: every kernel that reads an affine linear computes the same bytes from its k-major copy as from MLX's
 * layout, for single rows, blocks of rows and a prefill, in row parts: coop (matmul_coop.wgsl `main` and
 * `gate_up`), lanes and tile (matmul_lanes*.wgsl), affine
 * (matmul.wgsl), MLX's kernels (matmul_mlx.wgsl qmv and qmv_wide), split-K (the parity lab's policy) and the
 * embedding gather (embed.wgsl). Only where the device runs the GPU kernel class (the third pass of
 * scripts/test.sh forces it), the only one whose engine uploads k-major weights; its golden, exactness, probe and
 * trace tests hold those uploads to the fixtures there too.
 */
import { describe, expect, it } from 'vitest';
import * as op from '../../src/model/ops.ts';
import type { AffineKernel, Rows } from '../../src/model/ops.ts';
import { uploadLinear } from '../../src/model/gpu-weights.ts';
import type { GpuLinear } from '../../src/model/gpu-linear.ts';
import { TensorUploader } from '../../src/gpu/upload.ts';
import { Recorder } from '../../src/gpu/recorder.ts';
import { WeightTransposer } from '../../src/gpu/weight-layout.ts';
import type { AffineLinear } from '../../src/format/model-description.ts';
import { policyByName } from '../../src/model/policy-registry.ts';
import { Rand, expectSameBytes, useLab, type Lab } from './helpers/kernel-lab.ts';
import { affineLinear, type AffineCase } from './helpers/linears.ts';

/** The same linear uploaded again from its checkpoint bytes in the k-major layout, in the same row parts. */
async function kMajorCopy(lab: Lab, lin: GpuLinear): Promise<GpuLinear> {
  const d = lin.desc as AffineLinear;
  const up = new TensorUploader(lab.device, 0);
  const out = await uploadLinear(up, d, 'k-major', new WeightTransposer(lab.device), lin.weight.parts[0].rows);
  up.buffers.forEach((b) => lab.own(b));
  expect(out.layout).toBe('k-major');
  expect(out.weight.parts.length).toBe(lin.weight.parts.length);
  return out;
}

/** y of `run` for both linears, compared byte for byte. */
async function expectSameOutputs(
  lab: Lab,
  what: string,
  floats: number,
  run: (lin: GpuLinear, y: GPUBuffer) => (rec: Recorder) => void,
  mlx: GpuLinear,
  kMajor: GpuLinear,
): Promise<void> {
  const a = lab.sentinel(floats);
  const b = lab.sentinel(floats);
  await lab.run(run(mlx, a));
  await lab.run(run(kMajor, b));
  const [ba, bb] = [await lab.bytes(a, floats), await lab.bytes(b, floats)];
  // the layouts must not both leave the outputs untouched
  expect(new Uint32Array(ba.buffer, ba.byteOffset, floats).some((v) => v !== 0xdeadbeef)).toBe(true);
  expectSameBytes(what, bb, ba);
}

describe('the k-major weight layout gives every kernel the bytes of MLX layout', () => {
  let lab: Lab;
  useLab((l) => (lab = l));

  // The shapes of kernels-matmul.test.ts, whose MLX-layout pipelines the first pass of scripts/test.sh compiled.
  const cases: (AffineCase & { label: string })[] = [
    { label: '4-bit gs 64, 3 parts', bits: 4, gs: 64, K: 192, N: 33, rowsPerPart: 12 },
    { label: '8-bit gs 64', bits: 8, gs: 64, K: 128, N: 64 },
    { label: '2-bit gs 64, 4 parts', bits: 2, gs: 64, K: 128, N: 16, rowsPerPart: 5 },
  ];
  const kernels: AffineKernel[] = ['coop', 'lanes', 'tile', 'affine'];
  for (const c of cases) {
    it(`${c.label}: K ${c.K}, N ${c.N}: matmul kernels, MLX's, split-K and the embedding`, {
      timeout: 900_000,
    }, async (t) => {
      if (lab.kernels.kernelClass !== 'gpu') t.skip();
      const r = new Rand(7000 + c.bits * 100 + c.gs + c.K);
      const A = await affineLinear(lab, r, c);
      const B = await kMajorCopy(lab, A.lin);
      const x = lab.f32(r.f32s(8 * c.K), 'x');
      for (const M of [1, 4, 5]) {
        const rows: Rows = { M, round: false };
        for (const kernel of kernels) {
          if (op.affineKernel(lab.kernels.kernelClass, A.lin.desc, c.K, kernel === 'tile', kernel) !== kernel) continue;
          await expectSameOutputs(
            lab,
            `${kernel} M ${M}`,
            M * c.N,
            (lin, y) => (rec) => op.matmul(rec, lin, x, y, { ...rows, prefill: kernel === 'tile' }, c.K, c.N, kernel),
            A.lin,
            B,
          );
        }
        for (const policy of ['mlx-m1', 'mlx-m3plus']) {
          const mlx = policyByName(policy).mlx!;
          await expectSameOutputs(
            lab,
            `${policy} M ${M}`,
            M * c.N,
            (lin, y) => (rec) => op.matmul(rec, lin, x, y, { ...rows, mlx }),
            A.lin,
            B,
          );
        }
        await expectSameOutputs(
          lab,
          `split-K M ${M}`,
          M * c.N,
          (lin, y) => (rec) => op.matmul(rec, lin, x, y, { ...rows, split: 2 }),
          A.lin,
          B,
        );
      }
      // the table's rows as embeddings (ids past a part's rows land in the next part)
      const ids = lab.u32([0, c.N - 1, 5 % c.N, 11 % c.N, 3], 'ids');
      await expectSameOutputs(
        lab,
        'embed',
        5 * c.K,
        (lin, h) => (rec) => op.embed(rec, lin, ids, h, 0.5, { M: 5, round: false }),
        A.lin,
        B,
      );
    });
  }

  it('gate_up: coop, one dispatch for both projections', { timeout: 900_000 }, async (t) => {
    if (lab.kernels.kernelClass !== 'gpu') t.skip();
    const c: AffineCase = { bits: 4, gs: 64, K: 192, N: 64 };
    const r = new Rand(7777);
    const [gate, up] = [await affineLinear(lab, r, c), await affineLinear(lab, r, c)];
    const [gateK, upK] = [await kMajorCopy(lab, gate.lin), await kMajorCopy(lab, up.lin)];
    const x = lab.f32(r.f32s(8 * c.K), 'x');
    for (const M of [1, 4, 5]) {
      const run = async (g: GpuLinear, u: GpuLinear) => {
        const out = lab.sentinel(M * c.N);
        const rec = new Recorder(lab.device, lab.kernels, 'gate-up-layout');
        op.gateUp(rec, g, u, x, out, lab.sentinel(M * c.N), { M, round: false });
        expect(rec.dispatches).toBe(2); // x's group sums and the fused kernel (unfused: five)
        rec.submit();
        return lab.bytes(out, M * c.N);
      };
      expectSameBytes(`gate_up M ${M}`, await run(gateK, upK), await run(gate.lin, up.lin));
    }
  });
});
