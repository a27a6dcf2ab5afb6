/**
 * The MLX explanation of a divergence (src/parity/mlx-blame.ts) on an E-series target (gemma4-e-tiny): the
 * per-layer input linears are counted among a verify forward's quantized matmuls, and a divergence first seen in a
 * layer's per-layer input stage (ple) is blamed on them (layer 0's also on the per-layer inputs' projection) where MLX
 * switches kernels; the layer output stage has no linear of its own.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { TargetDescription } from '../../src/format/model-description.ts';
import { policyByName } from '../../src/model/policy-registry.ts';
import { openCheckpointDir } from '../../src/node/file-source.ts';
import { explainMlx, narrowPinCost, stageLinears } from '../../src/parity/mlx-blame.ts';
import { GEMMA4_E_TINY } from '../support/fixtures.ts';

describe('MLX blame on gemma4-e-tiny', () => {
  it('counts the per-layer input linears and names them for a per-layer input divergence', async () => {
    const desc = (await openCheckpointDir(path.join(GEMMA4_E_TINY, 'target'))).description as TargetDescription;
    const M3 = policyByName('mlx-m3plus').mlx!;
    // 10 layers x (q, o, gate, up, down, per-layer gate, per-layer projection) + k, v on the 6 cache owners
    // + the per-layer inputs' projection + the LM head
    expect(narrowPinCost(M3, desc, 4).dispatches).toBe(10 * 7 + 6 * 2 + 1 + 1);
    const names = (layer: number) => stageLinears(desc, layer, 'ple').map((x) => x.name);
    expect(names(0)).toEqual([
      'per_layer_model_projection',
      'layers.0.per_layer_input_gate',
      'layers.0.per_layer_projection',
    ]);
    expect(names(7)).toEqual(['layers.7.per_layer_input_gate', 'layers.7.per_layer_projection']);
    expect(stageLinears(desc, 7, 'k')).toEqual([]); // a KV-shared layer has no k_proj
    expect(stageLinears(desc, 0, 'layer')).toEqual([]); // its per-layer linears show first in ple
    // The tiny per-layer linears (K = 128 and 64) run qmv_quad for every M: nothing to blame there ...
    expect(explainMlx(M3, desc, 3, 'ple', 4)).toBeUndefined();
    // ... while o_proj (K = 256) switches, and the launch count of the verify forward includes them.
    const why = explainMlx(M3, desc, 3, 'attn', 4);
    expect(why).toMatch(/o_proj: qmv \(M = 1\) vs qmv_wide \(M = 4\)/);
    expect(why).toContain('still 84 quantized-matmul dispatches per verify forward');
  });
});
