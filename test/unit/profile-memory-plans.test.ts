import { beforeAll, describe, expect, it } from 'vitest';
import { openCheckpoint } from '../../src/format/checkpoint.ts';
import type { AssistantDescription, TargetDescription } from '../../src/format/model-description.ts';
import { openQwen35Checkpoint } from '../../src/format/qwen3_5/index.ts';
import { qwenSynthGeometry, syntheticQwen } from '../../src/format/qwen3_5/synthetic.ts';
import { synthGeometry, syntheticCheckpoint } from '../../src/format/synthetic.ts';
import { cappedLimits, type LimitProfileName, limitProfile } from '../../src/gpu/limit-profiles.ts';
import {
  checkMemory,
  fmtBytes,
  longestContext,
  type MemoryOptions,
  type MemoryPlan,
  type PlanLimits,
  planMemory,
} from '../../src/model/memory-budget.ts';
import { planQwenMemory } from '../../src/model/qwen3_5/memory.ts';

/**
 * What the 12B, 31B, 26B-A4B and Qwen3.6-27B memory plans (synthetic checkpoints of the real geometries, planned
 * without allocating) allow under each browser's limits on a Mac: every weight fits, split by rows as the upload
 * splits it; what stops a longer context is one workspace buffer, the target's attention scores, whose bytes are
 * 2 x prefill rows x heads x keys x 4 (attentionScratchBytes). Settings: a verify block of K = 8, prefill chunks of
 * 512 rows (the probe's default), the k-major layout the GPU kernel class uploads on a Mac.
 */
const GiB = 2 ** 30;
/**
 * The Mac each profile is applied to. Safari: a Metal maxBufferLength of 6 GiB, the least at which WebKit's
 * maxBufferSize() reaches its ceiling (L / 3 >= INT_MAX); a Mac with less gets L / 3 and shorter contexts. Chrome: Dawn
 * reports min(maxBufferLength, 2^32 - 1) on Metal.
 */
const MAC: Record<LimitProfileName, Record<string, number>> = {
  safari: { maxBufferSize: 6 * GiB, maxStorageBufferBindingSize: 6 * GiB },
  'safari-subgroups': { maxBufferSize: 6 * GiB, maxStorageBufferBindingSize: 6 * GiB },
  'chrome-mac': { maxBufferSize: 2 ** 32 - 1, maxStorageBufferBindingSize: 2 ** 32 - 1 },
};
const limitsUnder = (name: LimitProfileName): PlanLimits => {
  const l = cappedLimits(limitProfile(name), MAC[name], MAC[name]);
  return { maxBufferSize: l.maxBufferSize, maxStorageBufferBindingSize: l.maxStorageBufferBindingSize, profile: name };
};
const options = (maxContext: number): MemoryOptions => ({
  maxContext,
  maxBlock: 8,
  prefillChunk: 512,
  layout: 'k-major',
});

type Model = { name: string; heads: number; planAt: (maxContext: number, limits: PlanLimits) => MemoryPlan };
const models: Model[] = [];

beforeAll(async () => {
  for (const [name, preset] of [
    ['12B', '12b'],
    ['31B', '31b'],
    ['26B-A4B', '26b-a4b'],
  ] as const) {
    const g = synthGeometry(preset);
    const pair = syntheticCheckpoint(g);
    const t = (await openCheckpoint(pair.target)).description as TargetDescription;
    const a = (await openCheckpoint(pair.assistant!)).description as AssistantDescription;
    models.push({ name, heads: g.heads, planAt: (ctx, limits) => planMemory(t, options(ctx), limits, a) });
  }
  const q = qwenSynthGeometry('qwen36-27b');
  const d = (await openQwen35Checkpoint(syntheticQwen(q).target, 'qwen36-27b')).description;
  models.push({
    name: 'Qwen3.6-27B',
    heads: q.heads,
    planAt: (ctx, limits) => planQwenMemory(d, options(ctx), limits),
  });
}, 120_000);

describe('memory plans under the browser limit profiles (a Mac, K = 8, prefill chunks of 512)', () => {
  it('the profiles give a Mac the per-buffer limits their sources give', () => {
    expect(limitsUnder('safari')).toMatchObject({
      maxBufferSize: 2_147_483_644,
      maxStorageBufferBindingSize: 2_147_483_644,
    });
    expect(limitsUnder('chrome-mac')).toMatchObject({
      maxBufferSize: 4_294_967_292,
      maxStorageBufferBindingSize: 4_294_967_292,
    });
  });

  // The verdict of each plan: the longest context its buffers allow (the attention scores' bound, floor(limit /
  // (2 x 512 x heads x 4))), and the refusal one position further, naming the buffer, the browser and its limit.
  const verdicts: [string, LimitProfileName, number][] = [
    ['12B', 'safari', 32_767],
    ['12B', 'chrome-mac', 65_535],
    ['31B', 'safari', 16_383],
    ['31B', 'chrome-mac', 32_767],
    ['26B-A4B', 'safari', 32_767],
    ['26B-A4B', 'chrome-mac', 65_535],
    ['Qwen3.6-27B', 'safari', 21_845],
    ['Qwen3.6-27B', 'chrome-mac', 43_690],
  ];
  it.each(verdicts)('%s under %s: every weight fits; the longest context is %i', (name, profile, longest) => {
    const m = models.find((x) => x.name === name)!;
    const limits = limitsUnder(profile);
    const limit = limits.maxStorageBufferBindingSize;
    expect(longest, 'the attention scores bound').toBe(Math.floor(limit / (2 * 512 * m.heads * 4)));
    expect(longestContext((ctx) => m.planAt(ctx, limits))).toBe(longest);
    const fits = m.planAt(longest, limits);
    expect(checkMemory(fits)).toBe(fits);
    // the weights split by rows into parts within the limit: no checkpoint of these geometries is refused for its weights
    expect(fits.oversize).toEqual([]);
    const over = m.planAt(longest + 1, limits);
    expect(over.oversize.map((o) => [o.use, o.limitName])).toEqual([['workspace', 'maxStorageBufferBindingSize']]);
    const browser = limitProfile(profile).browser;
    expect(() => checkMemory(over)).toThrow(
      new RegExp(
        `: attention scores .*${m.heads} heads x ${longest + 1} keys.* needs ${2 * 512 * m.heads * (longest + 1) * 4} bytes in one buffer, over ${browser}'s maxStorageBufferBindingSize of ${limit} bytes \\(limit profile ${profile}\\)`,
      ),
    );
  });

  it('at a 4096-token context every plan fits under both profiles; the totals are what a Mac must hold', () => {
    const totals = models.map((m) => {
      const plans = (['safari', 'chrome-mac'] as const).map((p) => checkMemory(m.planAt(4096, limitsUnder(p))));
      // the per-buffer limits split weights, they do not change what the model needs in all
      expect(plans[0].total).toBe(plans[1].total);
      return `${m.name} ${fmtBytes(plans[0].total)}`;
    });
    expect(totals).toEqual(['12B 12.46 GB', '31B 21.41 GB', '26B-A4B 16.03 GB', 'Qwen3.6-27B 18.03 GB']);
  });
});
