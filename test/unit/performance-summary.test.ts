/**
 * The performance block a report carries ("Measure this GPU"), read back from untrusted JSON: the end to end's
 * warm-up figure (how close to the FMA yardstick the GPU ran before the timed steps) survives the reading, and
 * anything but a finite number becomes NaN, shown as a dash.
 */
import { describe, expect, it } from 'vitest';
import { normalizePerformance } from '../../src/ui/adapter/performance-view.ts';

const block = {
  timing: 'timestamp-query',
  copyGBps: 3946,
  fmaF32Gflops: 43003,
  msPerChainToken: 3.4,
  chainTokensPerSecond: 294,
  warmupFmaRatio: 0.84,
};

describe('a report performance block', () => {
  it("keeps the warm-up's FMA ratio, and leaves it absent where the bench ran none (software adapters)", () => {
    expect(normalizePerformance(block)?.warmupFmaRatio).toBe(0.84);
    const { warmupFmaRatio: _, ...none } = block;
    expect(normalizePerformance(none)?.warmupFmaRatio).toBeUndefined();
  });
  it('turns a warm-up figure that is not a finite number into NaN', () => {
    expect(normalizePerformance({ ...block, warmupFmaRatio: '0.84' })?.warmupFmaRatio).toBeNaN();
    expect(normalizePerformance({ ...block, warmupFmaRatio: null })?.warmupFmaRatio).toBeNaN();
  });
});
