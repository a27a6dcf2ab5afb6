import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import { qwenTinyEnv } from './helpers/qwen-tiny.ts';
import { runProbe, type ProbeEnv } from '../../src/parity/probe.ts';
import { validateReport } from '../../src/parity/report.ts';
import type { GpuContext } from '../../src/gpu/device.ts';

/**
 * The probe's state view on qwen-tiny (layers 0, 1, 3, 4 Gated DeltaNet, 2 and 5 full): the long draw compares the
 * block arm's staged recurrent state after each block token with the chain arm's committed one, byte for byte.
 */
describe('recurrent state view of a Qwen3.5 probe (qwen-tiny)', () => {
  let ctx: GpuContext;
  let env: ProbeEnv;
  beforeAll(async () => {
    ctx = await testGpu();
    env = await qwenTinyEnv(ctx);
  });
  afterAll(() => {
    env?.weights.destroy();
    ctx?.destroy();
  });

  it('exact: the long draw records S of every linear layer, equal after every block token', async () => {
    const r = await runProbe(env, { block: 4, policy: 'exact', precision: 'f32', localize: true, lengths: [8, 20] });
    expect(validateReport(r)).toEqual([]);
    expect(r.draws[0].state).toBeUndefined();
    const s = r.draws[1].state!;
    expect(s.blockStart).toBe(20);
    expect([s.valueHeads, s.keyHeadDim, s.valueHeadDim, s.convKernel, s.convChannels]).toEqual([4, 32, 32, 4, 256]);
    expect(s.fullLayers).toEqual([2, 5]);
    expect(s.layers.map((l) => l.layer)).toEqual([0, 1, 3, 4]);
    for (const l of s.layers) {
      expect(l.rows.map((x) => x.position)).toEqual([0, 1, 2, 3]);
      for (const x of l.rows) {
        expect(x.bytesTotal).toBe(4 * 32 * 32 * 4);
        expect(x.bytesDiffering, `layer ${l.layer} t ${x.position}`).toBe(0);
      }
    }
  });

  it('gdn-state-bf16: the states part after the second block token, where the logits part', async () => {
    const r = await runProbe(env, {
      block: 4,
      policy: 'gdn-state-bf16',
      precision: 'f32',
      localize: true,
      lengths: [8],
    });
    const s = r.draws[0].state!;
    // Both arms store S rounded to bf16 after token 0 (the same f32 values, the same rounding); from token 1 the
    // block's S grew from the f32 state it kept in registers, the chain's from the rounded one it re-read.
    for (const l of s.layers) {
      expect(
        l.rows.map((x) => x.bytesDiffering > 0),
        `layer ${l.layer}`,
      ).toEqual([false, true, true, true]);
      // stored in bf16 by both arms: the low 16 bits of every f32 are zero, so at most 2 of 4 bytes differ
      for (const x of l.rows) expect(x.bytesDiffering).toBeLessThanOrEqual(x.bytesTotal / 2);
    }
    expect(r.draws[0].firstDivergence!.text).toBe(
      'first divergence: layer 0 (linear) recurrence (o = S q) at position 1',
    );
  });
});
