import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import { openQwen35Checkpoint } from '../../src/format/qwen3_5/index.ts';
import { nodeFolderSources } from '../../src/node/file-source.ts';
import { uploadQwenWeights } from '../../src/model/qwen/weights.ts';
import { runProbe, type ProbeEnv } from '../../src/parity/probe.ts';
import { validateReport } from '../../src/parity/report.ts';
import { qwenCheckpointInfo } from '../../src/parity/summary.ts';
import type { GpuContext } from '../../src/gpu/device.ts';

/**
 * The block-versus-chain probe on qwen-tiny through the probe's model contract (arms only: the ring view,
 * localization and logit lens are Gemma's so far). Default draws 8, 8, 8, 96: the long one reads two key
 * segments in the full-attention layers and passes the conv window many times.
 */
describe('block-versus-chain probe on a Qwen3.5 target (qwen-tiny)', () => {
  let ctx: GpuContext;
  let env: ProbeEnv;
  beforeAll(async () => {
    ctx = await testGpu();
    const ck = await openQwen35Checkpoint(
      await nodeFolderSources(path.resolve(process.cwd(), 'test/fixtures/qwen-tiny/target')),
      'qwen-tiny',
    );
    env = {
      ctx,
      weights: await uploadQwenWeights(ctx.device, ck.description),
      target: qwenCheckpointInfo(ck),
      platform: 'test',
    };
  });
  afterAll(() => {
    env?.weights.destroy();
    ctx?.destroy();
  });

  for (const precision of ['f32', 'bf16'] as const) {
    it(`exact passes every draw for K = 2, 3, 4, 8 in ${precision}`, async () => {
      for (const K of [2, 3, 4, 8]) {
        const r = await runProbe(env, { block: K, policy: 'exact', precision, localize: true });
        expect(validateReport(r)).toEqual([]);
        expect(r.provenance.drawLengths).toEqual([8, 8, 8, 96]);
        expect(r.verdict, `K=${K}`).toBe('equal');
      }
    });
  }

  for (const policy of ['matmul-m-split', 'attention-m-split', 'prefill-chunk-mismatch', 'gdn-state-bf16']) {
    it(`${policy} diverges on every draw`, async () => {
      const r = await runProbe(env, { block: 4, policy, precision: 'f32', localize: true });
      expect(validateReport(r)).toEqual([]);
      expect(r.draws.map((d) => d.verdict)).toEqual(['diverges', 'diverges', 'diverges', 'diverges']);
    });
  }

  it('refuses a policy whose mechanism the family lacks (the sliding ring)', async () => {
    await expect(
      runProbe(env, { block: 4, policy: 'ring-chronological', precision: 'f32', localize: true }),
    ).rejects.toThrow(/does not apply to Qwen3.5/);
  });
});
