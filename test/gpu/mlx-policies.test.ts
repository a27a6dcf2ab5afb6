/**
 * The policies that predict MLX on Apple GPUs (src/model/mlx-policies.ts: mlx-m1, mlx-m1-ultra, mlx-m3plus,
 * mlx-m3plus-ultra, mlx-m5, mlx-m3plus-narrow, each with its +fma twin).
 * - The fused a * b + c of the +fma policies (shaders/matmul_mlx.wgsl fma_rn, built from error-free
 *   transforms) equals the CPU's exactly rounded one (fmaF32) on random and on halfway cases.
 * - Each MLX kernel of shaders/matmul_mlx.wgsl (qmv, qmv_fast, qmv_quad, qmv_wide) equals its float32
 *   CPU twin, src/reference/mlx-orders.ts, byte for byte, through ops.matmul as the engine calls it,
 *   for every kernel MLX's dispatch picks (src/model/mlx-dispatch.ts), under every MLX policy, fused or
 *   not, f32 and bf16, row parts, strides.
 * - Mechanism off == exact: where MLX runs one kernel for every M (M1/M2 and their Ultras, the narrow
 *   pin), a verify block's rows are the chain's rows byte for byte; on M3 and newer (qmv_wide from
 *   M = 2) they differ; and fusing changes some bytes of each kernel.
 * - The probe on tiny-a: who fails, where it is blamed, and the kernel pair the report names.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rand, bf16Rne, bytesOf, expectSameBytes, useLab, type Lab } from './helpers/kernel-lab.ts';
import { affineLinear, type AffineCase } from './helpers/linears.ts';
import * as op from '../../src/model/ops.ts';
import { mlxKernel, type MlxKernel, type MlxMachine } from '../../src/model/mlx-dispatch.ts';
import { policiesFor, policyByName } from '../../src/model/policy-registry.ts';
import { fmaF32, mlxOrder } from '../../src/reference/mlx-orders.ts';
import { shaderSource } from '../../src/gpu/shaders.ts';
import { readF32, storageBuffer, uniformBuffer, uploadBuffer } from '../../src/gpu/buffers.ts';
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
/** Every MLX policy: the six machines and their +fma twins. */
const MLX_NAMES = policiesFor('gemma4')
  .filter((p) => p.mlx)
  .map((p) => p.name);
/** The machines whose M = 2 and 6 are also run (one per kernel set: no qmv_wide, qmv_wide; fused or not). */
const FULL_M = new Set(['mlx-m1', 'mlx-m3plus', 'mlx-m1+fma', 'mlx-m3plus+fma']);
const describeMachine = (m: MlxMachine) =>
  `${m.gpu.label}${m.narrowPin ? ', narrow pin' : ''}${m.fma ? ', fused' : ''}`;

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
  // the 12B's MLP input width: 8-bit aligns with qmv_fast's 256-input block, 4-bit misses its 512 one
  { what: '8-bit K 3840 N 8 (fast)', N: 8, K: 3840, bits: 8, gs: 64, m1: 'qmv_fast' },
  { what: '4-bit K 3840 N 8 (not fast)', N: 8, K: 3840, bits: 4, gs: 64, m1: 'qmv' },
];

/** Triples for the fused a * b + c: the engine's kinds of operands, and sums that land halfway between floats. */
function fmaTriples(r: Rand, n: number): Float32Array {
  const t = new Float32Array(3 * n);
  const f = Math.fround;
  for (let i = 0; i < n; i++) {
    let [a, b, c] = [f(r.normal()), f(r.normal()), f(r.normal())];
    switch (i % 6) {
      case 1: // x times a masked code (up to 15 << 12) plus a partial sum
        b = r.int(16) << (4 * r.int(4));
        c = f(r.normal(64));
        break;
      case 2: // a bf16 scale times a lane's accum plus sum * bias
        a = f(r.uniform(1e-3, 1e-2));
        b = f(r.normal(100));
        break;
      case 3: // cancellation: c close to -a b
        c = f(-a * b * (1 + r.normal(1e-6)));
        break;
      case 4:
      case 5: {
        // a b within a few units of 2^-48 |a b| of half an ulp of c: the halfway cases a double rounding gets wrong
        const half = Math.abs(c) * 2 ** -24;
        a = f(half * (1 + (r.int(5) - 2) * 2 ** -23) * 2 ** (r.int(3) - 1));
        b = f((1 + (r.int(5) - 2) * 2 ** -23) * (r.int(2) ? 1 : -1));
        break;
      }
    }
    t.set([a, b, c], 3 * i);
  }
  return t;
}

describe('MLX kernel orders (shaders/matmul_mlx.wgsl) == their float32 CPU twin, byte for byte', () => {
  let lab: Lab;
  useLab((l) => (lab = l));

  // fma_rn is the fused a * b + c of every +fma kernel; the CPU's fmaF32 gets the same value another way
  // (exact in float64, rounded once: test/unit/mlx-fma.test.ts checks it against exact integers).
  it('the fused a * b + c (fma_rn) == a * b + c rounded once, on 2^16 triples', async () => {
    const n = 1 << 16;
    const triples = fmaTriples(new Rand(1690), n);
    const device = lab.device;
    const code = `${shaderSource('matmul_mlx.wgsl')}
@group(0) @binding(6) var<storage, read> abc: array<f32>;
@group(0) @binding(7) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn fma_check(@builtin(global_invocation_id) g: vec3<u32>) {
  if (g.x < arrayLength(&out)) { out[g.x] = fma_rn(abc[3u * g.x], abc[3u * g.x + 1u], abc[3u * g.x + 2u]); }
}`;
    device.pushErrorScope('validation');
    const pipeline = device.createComputePipeline({
      layout: 'auto',
      compute: { module: device.createShaderModule({ code }), entryPoint: 'fma_check' },
    });
    const params = lab.own(uniformBuffer(device, new Uint32Array(12), 'params')); // Params, _zero = 0
    const abc = lab.own(uploadBuffer(device, triples, 'abc'));
    const out = lab.own(storageBuffer(device, n * 4, 'out'));
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(
      0,
      device.createBindGroup({
        layout: pipeline.getBindGroupLayout(0),
        entries: [
          { binding: 0, resource: { buffer: params } },
          { binding: 6, resource: { buffer: abc } },
          { binding: 7, resource: { buffer: out } },
        ],
      }),
    );
    pass.dispatchWorkgroups(n / 64);
    pass.end();
    device.queue.submit([enc.finish()]);
    const err = await device.popErrorScope();
    if (err) throw new Error(`WebGPU validation error: ${err.message}`);
    const got = await readF32(device, out, n);
    const want = Float32Array.from({ length: n }, (_, i) =>
      fmaF32(triples[3 * i], triples[3 * i + 1], triples[3 * i + 2]),
    );
    expectSameBytes('fma_rn vs fmaF32', bytesOf(got), bytesOf(want));
    // the triples exercise the difference: on many of them two roundings give another float
    const twice = want.filter(
      (v, i) => v !== Math.fround(Math.fround(triples[3 * i] * triples[3 * i + 1]) + triples[3 * i + 2]),
    );
    console.log(`fma_rn: ${n} triples equal; ${twice.length} of them differ from a * b + c rounded twice`);
    expect(twice.length).toBeGreaterThan(n / 10);
  });

  CASES.forEach((c, ci) => {
    it(`${c.what}: every MLX policy, M = 1 and 3 (and 2, 6 on M1, M3), f32 and bf16`, async () => {
      const r = new Rand(1700 + ci);
      const w = await affineLinear(lab, r, c);
      const xStride = c.xStride ?? c.K;
      const seen = new Set<string>();
      for (const name of MLX_NAMES) {
        const mach = machine(name);
        for (const M of FULL_M.has(name) ? [1, 2, 3, 6] : [1, 3]) {
          for (const round of [false, true]) {
            const choice = mlxKernel(mach, { N: c.N, K: c.K, bits: c.bits, groupSize: c.gs }, M);
            seen.add(choice.kernel);
            const x = xRows(r, M, xStride, round);
            const got = await gpuMatmul(lab, w, x, { M, round, mlx: mach }, xStride);
            const want = mlxOrder(w, { x, M, xStride, round, fma: mach.fma }, choice);
            expectSameBytes(`${c.what}, ${name}, ${choice.kernel}, M ${M}${round ? ', bf16' : ''}`, got, bytesOf(want));
          }
        }
      }
      expect(mlxKernel(M1, { N: c.N, K: c.K, bits: c.bits, groupSize: c.gs }, 1).kernel).toBe(c.m1);
      // qmv_quad serves every M; elsewhere M3 and newer switch to qmv_wide from M = 2
      expect([...seen].sort()).toEqual(c.m1 === 'qmv_quad' ? ['qmv_quad'] : [c.m1, 'qmv_wide'].sort());
    });
  });

  // Mechanism off: one kernel for every M (M1/M2 and their Ultras; the narrow pin) gives each verify row
  // the chain's bytes. On: qmv_wide at M = 3 (M3 and newer) changes some of them, fused or not (else the
  // test could not see the mechanism).
  it('one kernel for every M == the chain rows; qmv_wide from M = 2 differs', async () => {
    const r = new Rand(1790);
    const c: AffineCase = { N: 64, K: 512, bits: 4, gs: 64 };
    const w = await affineLinear(lab, r, c);
    const M = 3;
    for (const fma of [false, true]) {
      const twin = (name: string) => machine(`${name}${fma ? '+fma' : ''}`);
      for (const round of [false, true]) {
        const x = xRows(r, M, c.K, round);
        const chain: Uint8Array[] = [];
        for (let m = 0; m < M; m++)
          chain.push(
            await gpuMatmul(lab, w, x.subarray(m * c.K, (m + 1) * c.K), { M: 1, round, mlx: twin('mlx-m3plus') }, c.K),
          );
        const chainBytes = new Uint8Array(chain.flatMap((b) => [...b]));
        for (const name of ['mlx-m1', 'mlx-m1-ultra', 'mlx-m3plus-narrow'])
          expectSameBytes(
            `${describeMachine(twin(name))}: block of ${M} vs chain${round ? ', bf16' : ''}`,
            await gpuMatmul(lab, w, x, { M, round, mlx: twin(name) }, c.K),
            chainBytes,
          );
        for (const name of ['mlx-m3plus', 'mlx-m3plus-ultra', 'mlx-m5']) {
          const wide = await gpuMatmul(lab, w, x, { M, round, mlx: twin(name) }, c.K);
          const differing = wide.reduce((n, b, i) => n + (b !== chainBytes[i] ? 1 : 0), 0);
          console.log(
            `${describeMachine(twin(name))}: qmv_fast (M = 1) vs qmv_wide (M = ${M})${round ? ', bf16' : ''}: ${differing} of ${wide.length} bytes differ`,
          );
          if (!round) expect(differing, 'qmv_wide changes some f32 bits').toBeGreaterThan(0);
        }
      }
    }
  });

  // The contraction is a mechanism of its own: fusing changes some bytes of each kernel the policies run
  // (else a +fma policy would be its twin under another name). In bf16 activations qdot's products are
  // exact (a bf16 x times a code of at most 8 significant bits), and the low f32 bits that
  // scale * accum + sum * bias and qmv_wide's x * w move mostly vanish in the bf16 output: counted, not
  // required.
  it('fused and unfused kernels differ in some bytes (qmv, qmv_fast, qmv_quad, qmv_wide; f32)', async () => {
    const r = new Rand(1791);
    for (const [c, Ms] of [
      [{ N: 64, K: 512, bits: 4, gs: 64 }, [1, 3]],
      [{ N: 64, K: 3840, bits: 4, gs: 64 }, [1]],
      [{ N: 64, K: 256, bits: 8, gs: 64 }, [1, 3]],
      [{ N: 64, K: 128, bits: 4, gs: 64 }, [1]],
    ] as [AffineCase, number[]][]) {
      const w = await affineLinear(lab, r, c);
      for (const M of Ms) {
        for (const round of [false, true]) {
          const x = xRows(r, M, c.K, round);
          const plain = await gpuMatmul(lab, w, x, { M, round, mlx: M3 }, c.K);
          const fused = await gpuMatmul(lab, w, x, { M, round, mlx: machine('mlx-m3plus+fma') }, c.K);
          const differing = plain.reduce((n, b, i) => n + (b !== fused[i] ? 1 : 0), 0);
          const kernel = mlxKernel(M3, { N: c.N, K: c.K, bits: c.bits, groupSize: c.gs }, M).kernel;
          console.log(
            `${kernel} ${c.bits}-bit K ${c.K} M ${M}${round ? ', bf16' : ''}: fused vs not, ${differing} of ${plain.length} bytes differ`,
          );
          if (!round) expect(differing, `${kernel}: fusing changes some f32 bits`).toBeGreaterThan(0);
        }
      }
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

  // The other chips and the +fma twins (K = 4, f32): the kernel pair, not the chip, decides the verdict and
  // the blame; the cause names the chip class and the contraction.
  const WIDE: [string, RegExp][] = [
    ['mlx-m3plus+fma', /^MLX on M3\/M4, not Ultra \(applegpu_g15, g16\), a \* b \+ c fused: q_proj: /],
    ['mlx-m3plus-ultra', /^MLX on M3 Ultra \(applegpu_g15d\): q_proj: /],
    ['mlx-m3plus-ultra+fma', /^MLX on M3 Ultra \(applegpu_g15d\), a \* b \+ c fused: q_proj: /],
    ['mlx-m5', /^MLX on M5, not Ultra \(applegpu_g17\): q_proj: /],
    ['mlx-m5+fma', /^MLX on M5, not Ultra \(applegpu_g17\), a \* b \+ c fused: q_proj: /],
  ];
  for (const [policy, cause] of WIDE)
    it(`${policy} fails every draw at layer 0 q_proj, qmv vs qmv_wide (f32, K = 4)`, async () => {
      const r = await runProbe(env, { block: 4, policy, precision: 'f32', localize: true });
      expect(r.draws.map((d) => d.verdict)).toEqual(['diverges', 'diverges', 'diverges', 'diverges']);
      for (const d of r.draws) {
        const fd = d.firstDivergence!;
        expect({ layer: fd.layer, stage: fd.stage }).toEqual({ layer: 0, stage: 'q' });
        expect(fd.cause).toMatch(cause);
        expect(fd.cause).toMatch(/q_proj: qmv \(M = 1\) vs qmv_wide \(M = 4\); narrow pin/);
      }
      console.log(`${policy} f32 K 4: ${r.draws[0].firstDivergence!.cause}`);
    });
  for (const policy of ['mlx-m1+fma', 'mlx-m1-ultra', 'mlx-m1-ultra+fma', 'mlx-m3plus-narrow+fma'])
    it(`${policy} passes every draw (f32, K = 4)`, async () => {
      const r = await runProbe(env, { block: 4, policy, precision: 'f32', localize: true });
      expect(r.draws.map((d) => d.verdict)).toEqual(['equal', 'equal', 'equal', 'equal']);
    });
});
