/**
 * src/model/build-target.ts without a GPU: which targets have a router, the policy each family's target takes, and
 * the refusal of a router convention on a target without experts, made before any engine is built (the descriptions
 * are the fixtures' own, opened from their folders; no weights are uploaded).
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { TargetDescription } from '../../src/format/model-description.ts';
import { openQwen35Checkpoint } from '../../src/format/qwen3_5/index.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import { buildTarget, hasRouter, targetPolicy, type AnyTargetWeights } from '../../src/model/build-target.ts';
import { nodeFolderSources, openCheckpointDir } from '../../src/node/file-source.ts';
import { FIXTURES, GEMMA4_E_TINY, GEMMA4_MOE_TINY, TINY_A } from '../support/fixtures.ts';

/** Weights as far as the dispatch reads them: the description (nothing is uploaded before a refusal). */
async function described(dir: string): Promise<AnyTargetWeights> {
  const target = path.join(dir, 'target');
  if (dir.endsWith('qwen-tiny'))
    return { desc: (await openQwen35Checkpoint(await nodeFolderSources(target))).description } as AnyTargetWeights;
  return { desc: (await openCheckpointDir(target)).description as TargetDescription } as AnyTargetWeights;
}

const SIZES = { maxContext: 8, maxBlock: 1, prefillChunk: 8, precision: 'f32' as const };
const NO_GPU = {} as GpuContext;

describe('buildTarget and targetPolicy', () => {
  it('only the MoE target has a router; a router convention for any other is refused before an engine is built', async () => {
    const all = {
      dense: await described(TINY_A),
      eSeries: await described(GEMMA4_E_TINY),
      moe: await described(GEMMA4_MOE_TINY),
      qwen: await described(path.join(FIXTURES, 'qwen-tiny')),
    };
    expect(Object.fromEntries(Object.entries(all).map(([k, w]) => [k, hasRouter(w)]))).toEqual({
      dense: false,
      eSeries: false,
      moe: true,
      qwen: false,
    });
    for (const w of [all.dense, all.eSeries, all.qwen])
      expect(() => buildTarget(NO_GPU, w, { ...SIZES, router: 'transformers' })).toThrow(
        'router convention "transformers" applies to Gemma 4 mixture-of-experts targets only; this target has no router',
      );
  });

  it("each family's policies: moe-grouped on the MoE target only, gdn-chunked on Qwen3.5 only", async () => {
    const moe = await described(GEMMA4_MOE_TINY);
    const eSeries = await described(GEMMA4_E_TINY);
    const qwen = await described(path.join(FIXTURES, 'qwen-tiny'));
    expect(targetPolicy(moe, 'moe-grouped').moeGrouped).toBe(true);
    expect(() => targetPolicy(eSeries, 'moe-grouped')).toThrow(
      'policy moe-grouped applies to Gemma 4 mixture-of-experts targets only; this target has no experts',
    );
    expect(targetPolicy(qwen, 'gdn-chunked').name).toBe('gdn-chunked');
    expect(() => targetPolicy(moe, 'gdn-chunked')).toThrow(
      /^policy gdn-chunked applies to Qwen3.5 targets only; Gemma 4 mixture-of-experts targets take exact, .*, moe-grouped$/,
    );
    expect(() => targetPolicy(eSeries, 'gdn-chunked')).toThrow(/policy gdn-chunked applies to Qwen3.5 targets only/);
    expect(targetPolicy(eSeries, 'exact').name).toBe('exact');
  });
});
