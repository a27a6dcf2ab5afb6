import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openQwen35Checkpoint } from '../../src/format/qwen3_5/index.ts';
import { qwenSynthGeometry } from '../../src/format/qwen3_5/synthetic.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import { uploadQwenWeights } from '../../src/model/qwen3_5/weights.ts';
import { nodeFolderSources } from '../../src/node/file-source.ts';
import { writeSynthetic } from '../../src/node/synthetic.ts';
import { runProbe } from '../../src/parity/probe.ts';
import { validateReport } from '../../src/parity/report.ts';
import { qwenCheckpointInfo } from '../../src/parity/summary.ts';
import { testGpu } from './gpu-context.ts';

/**
 * The probe on a synthetic Qwen3.5 folder written by `synth --preset qwen-tiny` (seeded random weights, MTP
 * head inside): exact passes, gdn-chunked is blamed on the recurrence. The real-shape presets are for the H200;
 * docs/QWEN35.md says how a real-width variant was checked on lavapipe.
 */
describe('probe on a synthetic Qwen3.5 folder', () => {
  let ctx: GpuContext;
  let tmp: string;
  beforeAll(async () => {
    ctx = await testGpu();
    tmp = await mkdtemp(path.join(os.tmpdir(), 'ringside-qsynth-probe-'));
  });
  afterAll(async () => {
    ctx?.destroy();
    await rm(tmp, { recursive: true, force: true });
  });

  it('exact passes and gdn-chunked diverges at layer 0 (linear) recurrence', async () => {
    await writeSynthetic(tmp, qwenSynthGeometry('qwen-tiny'), { seed: 11 });
    const ck = await openQwen35Checkpoint(await nodeFolderSources(path.join(tmp, 'target')), 'synth-qwen-tiny');
    const weights = await uploadQwenWeights(ctx.device, ck.description);
    try {
      const env = { ctx, weights, target: qwenCheckpointInfo(ck), platform: 'test' };
      const ok = await runProbe(env, { block: 4, policy: 'exact', precision: 'f32', localize: true, lengths: [8, 20] });
      expect(validateReport(ok)).toEqual([]);
      expect(ok.verdict).toBe('equal');
      const bad = await runProbe(env, {
        block: 4,
        policy: 'gdn-chunked',
        precision: 'f32',
        localize: true,
        lengths: [8],
      });
      expect(bad.draws[0].firstDivergence!.text).toBe(
        'first divergence: layer 0 (linear) recurrence (o = S q) at position 0',
      );
    } finally {
      weights.destroy();
    }
  });
});
