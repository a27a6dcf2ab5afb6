/**
 * MLX's quantized-matmul dispatch as src/model/mlx-dispatch.ts reads it from mlx/backend/metal/
 * quantized.cpp, and the report's explanation of a divergence under the MLX policies
 * (src/parity/mlx-blame.ts). The kernels' arithmetic is tested on the GPU (test/gpu/mlx-policies.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import {
  mlxKernel,
  qmvBatchLimit,
  type AppleGpu,
  type MlxMachine,
  type QuantShape,
} from '../../src/model/mlx-dispatch.ts';
import { mlxChoiceFor } from '../../src/model/mlx-matmul.ts';
import { FMA_SUFFIX, MLX_CHIP_TABLE, MLX_METAL_NOTE } from '../../src/model/mlx-policies.ts';
import { policiesFor, policyByName } from '../../src/model/policy-registry.ts';
import { explainMlx, narrowPinCost } from '../../src/parity/mlx-blame.ts';
import type { AffineLinear, TargetDescription } from '../../src/format/model-description.ts';
import { tinyTarget } from '../support/fixtures.ts';

const M1 = policyByName('mlx-m1').mlx!;
const M3 = policyByName('mlx-m3plus').mlx!;
const NARROW = policyByName('mlx-m3plus-narrow').mlx!;
const M1_ULTRA = policyByName('mlx-m1-ultra').mlx!;
const M3_ULTRA = policyByName('mlx-m3plus-ultra').mlx!;
const M5 = policyByName('mlx-m5').mlx!;
const q4 = (K: number, N: number): QuantShape => ({ K, N, bits: 4, groupSize: 64 });
const q8 = (K: number, N: number): QuantShape => ({ K, N, bits: 8, groupSize: 64 });
const kernels = (m: MlxMachine, s: QuantShape, Ms: number[]) => Ms.map((M) => mlxKernel(m, s, M).kernel);
/** The per-chip policies (not the narrow pin), without and with fma. */
const CHIP_POLICIES = ['mlx-m1', 'mlx-m1-ultra', 'mlx-m3plus', 'mlx-m3plus-ultra', 'mlx-m5'];

describe('MLX quantized-matmul dispatch (quantized.cpp)', () => {
  it('get_qmv_batch_limit by generation, size class and shape', () => {
    const gpu = (gen: number, size: string): AppleGpu => ({ gen, size, label: '' });
    const shapes = [q4(2048, 2048), q4(4096, 4096), q4(3840, 15360)];
    const limits = (g: AppleGpu) => shapes.map((s) => qmvBatchLimit(s.K, s.N, g));
    expect(limits(gpu(17, 's'))).toEqual([33, 25, 13]); // M5 Max
    expect(limits(gpu(15, 's'))).toEqual([13, 15, 13]); // M3 Max
    expect(limits(gpu(15, 'd'))).toEqual([32, 18, 12]); // M3 Ultra: 12 at the 12B's MLP shape
    expect(limits(gpu(13, 'g'))).toEqual([14, 10, 6]); // M1
    expect(limits(gpu(12, 'p'))).toEqual([18, 12, 10]);
  });

  it('12B MLP gate/up (3840 -> 15360, 4-bit): qmv at M = 1; M3+: qmv_wide for 2..12, qmm from 13', () => {
    const s = q4(3840, 15360); // 3840 % 512 != 0: qmv, not qmv_fast
    expect(kernels(M3, s, [1, 2, 5, 12, 13])).toEqual(['qmv', 'qmv_wide', 'qmv_wide', 'qmv_wide', 'qmm']);
    expect(kernels(NARROW, s, [1, 2, 5, 12, 13])).toEqual(['qmv', 'qmv', 'qmv', 'qmv', 'qmm']);
    expect(kernels(M1, s, [1, 2, 5, 6])).toEqual(['qmv', 'qmv', 'qmv', 'qmm']);
    // the 12B down projection (15360 -> 3840): 15360 % 512 == 0, N % 8 == 0
    expect(kernels(M3, q4(15360, 3840), [1, 4])).toEqual(['qmv_fast', 'qmv_wide']);
    // 8-bit aligns at 256
    expect(mlxKernel(M1, { K: 3840, N: 15360, bits: 8, groupSize: 64 }, 1).kernel).toBe('qmv_fast');
  });

  it('qmv_quad for K = 64 or 128 whatever M below the limit; qmv_fast needs N % 8 == 0', () => {
    expect(kernels(M3, q4(128, 100), [1, 4])).toEqual(['qmv_quad', 'qmv_quad']);
    expect(kernels(M3, { K: 128, N: 100, bits: 6, groupSize: 64 }, [1])).toEqual(['qmv']);
    expect(kernels(M1, q4(512, 12), [1])).toEqual(['qmv']);
    expect(kernels(M1, q4(512, 16), [1])).toEqual(['qmv_fast']);
  });

  it('qmv_wide tiles of at most five rows; launches and weight passes per kernel', () => {
    const s = q4(3840, 15360);
    expect([2, 5, 6, 8, 11].map((M) => mlxKernel(M3, s, M).vecsPerTg)).toEqual([2, 5, 3, 4, 4]);
    expect(mlxKernel(M3, s, 8)).toMatchObject({ threadgroups: 2 * 1920, weightPasses: 2 });
    expect(mlxKernel(NARROW, s, 8)).toMatchObject({ threadgroups: 8 * 1920, weightPasses: 8 });
  });

  it('the page and the CLI list every MLX policy with a description each, each with its +fma twin', () => {
    const names = policiesFor('gemma4')
      .filter((p) => p.mlx)
      .map((p) => p.name);
    const machines = [...CHIP_POLICIES, 'mlx-m3plus-narrow'];
    expect(names).toEqual(machines.flatMap((n) => [n, `${n}${FMA_SUFFIX}`]));
    for (const name of machines) {
      const [plain, fused] = [policyByName(name), policyByName(`${name}${FMA_SUFFIX}`)];
      expect(plain.description.length, name).toBeGreaterThan(40);
      expect(fused.description, name).toMatch(new RegExp(`^${name} with each a \\* b \\+ c of MLX's kernels fused`));
      expect(plain.mlx!.fma).toBe(false);
      expect(fused.mlx).toEqual({ ...plain.mlx!, fma: true });
    }
  });
});

describe('the per-chip policies (get_qmv_batch_limit and use_qmv_wide at 846d176)', () => {
  // K and N <= 2048 / <= 4096 / larger, and the edges of each class
  const SHAPES = [q4(2048, 2048), q4(2049, 2048), q4(4096, 4096), q4(3840, 4097), q4(3840, 15360)];
  const LIMITS: Record<string, number[]> = {
    'mlx-m1': [14, 10, 10, 6, 6],
    'mlx-m1-ultra': [32, 18, 18, 12, 12],
    'mlx-m3plus': [13, 15, 15, 13, 13],
    'mlx-m3plus-ultra': [32, 18, 18, 12, 12],
    'mlx-m5': [33, 25, 25, 13, 13],
  };

  for (const name of CHIP_POLICIES)
    it(`${name} and ${name}${FMA_SUFFIX}: batch limits, qmv_wide, and the qmm refusal at the limit`, () => {
      for (const m of [policyByName(name).mlx!, policyByName(`${name}${FMA_SUFFIX}`).mlx!]) {
        expect(SHAPES.map((s) => qmvBatchLimit(s.K, s.N, m.gpu))).toEqual(LIMITS[name]);
        const wide = m.gpu.gen >= 15;
        SHAPES.forEach((s, i) => {
          const limit = LIMITS[name][i];
          expect(kernels(m, s, [limit - 1, limit]), `${name} ${s.K} -> ${s.N}`).toEqual([
            wide ? 'qmv_wide' : s.K % 512 === 0 ? 'qmv_fast' : 'qmv',
            'qmm',
          ]);
        });
        // what the engine refuses: M at the limit of the 12B's q_proj (3840 -> 4096, 4-bit), named
        const qProj: AffineLinear = {
          kind: 'affine',
          name: 'layers.0.self_attn.q_proj',
          outFeatures: 4096,
          inFeatures: 3840,
          bits: 4,
          groupSize: 64,
        } as AffineLinear;
        const limit = qmvBatchLimit(3840, 4096, m.gpu);
        expect(mlxChoiceFor(m, qProj, limit - 1).kernel).toBe(wide ? 'qmv_wide' : 'qmv');
        expect(() => mlxChoiceFor(m, qProj, limit)).toThrow(
          `q_proj (4-bit, 3840 -> 4096) on ${m.gpu.label}: MLX runs qmm for M = ${limit} (at or above its batch limit)`,
        );
      }
    });

  it("the 12B's 8-bit MLP takes qmv_fast at K = 3840 where 4-bit takes qmv (qmv_fast_k_alignment 256 vs 512)", () => {
    for (const m of [M1, M1_ULTRA, M3, M3_ULTRA, M5]) {
      expect(mlxKernel(m, q8(3840, 15360), 1).kernel).toBe('qmv_fast');
      expect(mlxKernel(m, q4(3840, 15360), 1).kernel).toBe('qmv');
      // down_proj (15360 -> 3840): aligned for both
      expect(mlxKernel(m, q8(15360, 3840), 1).kernel).toBe('qmv_fast');
      expect(mlxKernel(m, q4(15360, 3840), 1).kernel).toBe('qmv_fast');
    }
    // a verify block of 4 rows: M1/M2 (Ultra or not) keep qmv_fast, M3 and newer switch to qmv_wide
    expect(kernels(M1_ULTRA, q8(3840, 15360), [1, 4, 11])).toEqual(['qmv_fast', 'qmv_fast', 'qmv_fast']);
    expect(kernels(M5, q8(3840, 15360), [1, 4, 12, 13])).toEqual(['qmv_fast', 'qmv_wide', 'qmv_wide', 'qmm']);
    expect(kernels(M3_ULTRA, q8(3840, 15360), [1, 4, 11, 12])).toEqual(['qmv_fast', 'qmv_wide', 'qmv_wide', 'qmm']);
  });

  it('the chip table names each per-chip policy once, with the architecture its machine stands for', () => {
    expect(MLX_CHIP_TABLE.map((r) => r.policy)).toEqual(CHIP_POLICIES);
    for (const row of MLX_CHIP_TABLE) {
      const { gpu } = policyByName(row.policy).mlx!;
      const arch = [...row.architecture.matchAll(/applegpu_g(\d\d)(d?)/g)];
      expect(arch.length, row.chips).toBeGreaterThan(0);
      expect(
        arch.map((a) => Number(a[1])),
        row.chips,
      ).toContain(gpu.gen);
      for (const [, , d] of arch) expect(d === 'd', row.chips).toBe(gpu.size === 'd');
      // every generation a row names gets the same batch limits and the same qmv_wide rule
      for (const [, g] of arch) {
        const other: AppleGpu = { ...gpu, gen: Number(g) };
        expect(qmvBatchLimit(3840, 4096, other), row.chips).toBe(qmvBatchLimit(3840, 4096, gpu));
        expect(Number(g) >= 15, row.chips).toBe(gpu.gen >= 15);
      }
    }
  });

  it('docs/NUMERICS.md carries the chip table and the mlx-metal line', () => {
    const doc = readFileSync(new URL('../../docs/NUMERICS.md', import.meta.url), 'utf8');
    for (const r of MLX_CHIP_TABLE) expect(doc).toContain(`| ${r.chips} | \`${r.architecture}\` | \`${r.policy}\` |`);
    expect(doc.replace(/\s+/g, ' ')).toContain(MLX_METAL_NOTE); // as a paragraph, wrapped
  });
});

describe('explaining a divergence under the MLX policies', () => {
  let desc: TargetDescription;
  it('names the kernel pair of the stage and the narrow pin cost, in counts', async () => {
    desc = (await tinyTarget()).description as TargetDescription;
    const mlp = explainMlx(M3, desc, 0, 'mlp', 4)!;
    // tiny-a layer 0: 8-bit gate/up (256 -> 512) and down (512 -> 256), all aligned for qmv_fast
    expect(mlp).toContain('gate_proj, up_proj, down_proj: qmv_fast (M = 1) vs qmv_wide (M = 4)');
    const c = narrowPinCost(M3, desc, 4);
    expect(c.pinned.weightPasses).toBe(4 * c.dispatches);
    expect(c.now.weightPasses).toBe(c.dispatches);
    expect(mlp).toContain(`still ${c.dispatches} quantized-matmul dispatches`);
    expect(explainMlx(M3, desc, 0, 'q', 4)).toMatch(/q_proj: qmv \(M = 1\) vs qmv_wide \(M = 4\)/);
    expect(explainMlx(M3, desc, null, 'logits', 2)).toMatch(/LM head: qmv \(M = 1\) vs qmv_wide \(M = 2\)/);
    // no pair where MLX runs one kernel for both (M1, the narrow pin), nor for a stage without a linear
    expect(explainMlx(M1, desc, 0, 'mlp', 4)).toBeUndefined();
    expect(explainMlx(NARROW, desc, 0, 'q', 4)).toBeUndefined();
    expect(explainMlx(M3, desc, 0, 'layer', 4)).toBeUndefined();
  });

  it('names the chip class and the contraction; no pair on M1/M2 Ultra', async () => {
    desc = (await tinyTarget()).description as TargetDescription;
    const fused = policyByName('mlx-m5+fma').mlx!;
    expect(explainMlx(M5, desc, 0, 'q', 4)).toMatch(
      /^MLX on M5, not Ultra \(applegpu_g17\): q_proj: qmv \(M = 1\) vs qmv_wide \(M = 4\); narrow pin/,
    );
    expect(explainMlx(fused, desc, 0, 'q', 4)).toMatch(
      /^MLX on M5, not Ultra \(applegpu_g17\), a \* b \+ c fused: q_proj: /,
    );
    expect(explainMlx(M3_ULTRA, desc, 0, 'q', 4)).toMatch(
      /^MLX on M3 Ultra \(applegpu_g15d\): q_proj: qmv \(M = 1\) vs qmv_wide/,
    );
    expect(explainMlx(M1_ULTRA, desc, 0, 'q', 4)).toBeUndefined();
    expect(explainMlx(policyByName('mlx-m1-ultra+fma').mlx!, desc, 0, 'mlp', 8)).toBeUndefined();
  });
});
