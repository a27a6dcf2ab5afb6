import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import { qwenTinyEnv } from './helpers/qwen-tiny.ts';
import { runTrace, type TraceEnv } from '../../src/parity/trace.ts';
import { validateReport } from '../../src/parity/report.ts';
import type { GpuContext } from '../../src/gpu/device.ts';

/** The teacher-forced trace on qwen-tiny through the trace's model contract (QwenTargetModel). */
describe('teacher-forced trace on a Qwen3.5 target (qwen-tiny)', () => {
  let ctx: GpuContext;
  let env: TraceEnv;
  beforeAll(async () => {
    ctx = await testGpu();
    env = await qwenTinyEnv(ctx);
  });
  afterAll(() => {
    env?.weights.destroy();
    ctx?.destroy();
  });

  it('exact: every block row equals the chain byte for byte (K = 3, 4; f32 and bf16)', async () => {
    for (const precision of ['f32', 'bf16'] as const)
      for (const block of [3, 4]) {
        const r = await runTrace(env, { block, prefix: 20, traced: 32, policy: 'exact', precision });
        expect(validateReport(r)).toEqual([]);
        expect(r.verdict, `${precision} K=${block}`).toBe('equal');
        expect(r.metrics.rowsByteEqual).toBe(32);
      }
  });

  for (const policy of ['gdn-state-bf16', 'matmul-m-split']) {
    it(`${policy}: block rows differ from the chain`, async () => {
      const r = await runTrace(env, { block: 4, prefix: 20, traced: 32, policy, precision: 'f32' });
      expect(validateReport(r)).toEqual([]);
      expect(r.verdict).toBe('diverges');
      expect(r.metrics.rowsByteEqual).toBeLessThan(32);
      expect(r.provenance.policy).toBe(policy);
    });
  }

  it('refuses a policy the family lacks', async () => {
    await expect(
      runTrace(env, { block: 4, prefix: 20, traced: 8, policy: 'ring-chronological', precision: 'f32' }),
    ).rejects.toThrow(/^policy ring-chronological applies to Gemma 4 targets only; Qwen3.5 targets take exact, /);
  });
});
