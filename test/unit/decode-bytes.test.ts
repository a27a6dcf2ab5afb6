/**
 * decodeBytesPerToken (src/bench/e2e.ts): the traffic figure behind the bench's effective bandwidth and
 * its 614 GB/s projection. Checked against an independent count over the tiny-a fixture's files: every
 * tensor of the checkpoint is read once per decode token (the tied embedding as the LM head), plus one
 * embedding row, plus the K and V rows each layer attends to.
 */
import { describe, expect, it } from 'vitest';
import path from 'node:path';
import type { TargetDescription } from '../../src/format/model-description.ts';
import { openCheckpointDir } from '../../src/node/file-source.ts';
import { decodeBytesPerToken, presetDecodeBytes } from '../../src/bench/e2e.ts';
import { projectionCaveat } from '../../src/bench/run.ts';
import { TINY_A } from '../support/fixtures.ts';

describe('decode bytes per token', () => {
  it('tiny-a: every tensor once + one embedding row + the K/V each layer reads, at short and wrapped contexts', async () => {
    const ck = await openCheckpointDir(path.join(TINY_A, 'target'));
    const d = ck.description as TargetDescription;
    const tensorBytes = [...ck.tensors.values()].reduce((a, t) => a + t.byteLength, 0);
    const embedBytes =
      d.embed.kind === 'affine'
        ? d.embed.weight.byteLength + d.embed.scales.byteLength + d.embed.biases.byteLength
        : d.embed.weight.byteLength;
    for (const context of [3, 15, 40, 200]) {
      const kv = d.layers.reduce(
        (a, l) =>
          a + 2 * 4 * l.numKvHeads * l.headDim * (l.type === 'sliding' ? Math.min(context + 1, d.window) : context + 1),
        0,
      );
      expect(decodeBytesPerToken(d, context)).toBeCloseTo(tensorBytes + embedBytes / d.vocab + kv, 6);
    }
  });

  it('12b preset: about 11 GB per token at a short context (4-bit, 8-bit MLP, 262144-row tied head), 48 layers', async () => {
    const { bytesPerToken, layers } = await presetDecodeBytes('12b', 32);
    // 48 layers x 3 MLP projections of 3840 x 15360 at 8 bits (8.5 GB) and the rest at 4 bits; with the MLP at
    // 4 bits it was 6.72 GB. The bounds hold whatever the few-MB terms (norms, KV at 32 positions) are.
    expect(bytesPerToken).toBeGreaterThan(10.7e9);
    expect(bytesPerToken).toBeLessThan(11.2e9);
    // the 12B's num_hidden_layers: the projection says when its efficiency came from fewer
    expect(layers).toBe(48);
  });

  it('a projection from fewer layers than the model has says so, and how to measure them all', () => {
    expect(projectionCaveat({ measuredLayers: 2, modelLayers: 48 })).toBe(
      " (efficiency from 2 of 48 layers, where a token's fixed costs weigh more: a low estimate; --e2e-layers 48 measures them all)",
    );
    expect(projectionCaveat({ measuredLayers: 48, modelLayers: 48 })).toBe('');
  });
});
