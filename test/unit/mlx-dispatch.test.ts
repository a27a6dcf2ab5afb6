/**
 * MLX's quantized-matmul dispatch as src/model/mlx-dispatch.ts reads it from mlx/backend/metal/
 * quantized.cpp, and the report's explanation of a divergence under the MLX policies
 * (src/parity/mlx-blame.ts). The kernels' arithmetic is tested on the GPU (test/gpu/mlx-policies.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { mlxKernel, qmvBatchLimit, type AppleGpu, type QuantShape } from '../../src/model/mlx-dispatch.ts';
import { policyByName, POLICIES } from '../../src/model/policy.ts';
import { explainMlx, narrowPinCost } from '../../src/parity/mlx-blame.ts';
import type { TargetDescription } from '../../src/format/model-description.ts';
import { tinyTarget } from '../support/fixtures.ts';

const M1 = policyByName('mlx-m1').mlx!;
const M3 = policyByName('mlx-m3plus').mlx!;
const NARROW = policyByName('mlx-m3plus-narrow').mlx!;
const q4 = (K: number, N: number): QuantShape => ({ K, N, bits: 4, groupSize: 64 });
const kernels = (m: typeof M1, s: QuantShape, Ms: number[]) => Ms.map((M) => mlxKernel(m, s, M).kernel);

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

  it('the page and the CLI list the three policies with a description each', () => {
    for (const name of ['mlx-m1', 'mlx-m3plus', 'mlx-m3plus-narrow']) {
      const p = POLICIES.find((x) => x.name === name);
      expect(p?.description.length, name).toBeGreaterThan(40);
    }
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
});
