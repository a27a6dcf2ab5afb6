import { describe, expect, it } from 'vitest';
import { MAX_VERIFY_BLOCK } from '../../src/model/target.ts';
import { checkBlockOption } from '../../src/worker/run-options.ts';

/** The worker is where the page's run options enter: a block width outside the lab's range is refused there. */
describe('worker run options', () => {
  it('takes K from 1 (probe, trace) or 2 (generation) to MAX_VERIFY_BLOCK, whole numbers only', () => {
    expect(() => checkBlockOption(1, 1)).not.toThrow();
    expect(() => checkBlockOption(MAX_VERIFY_BLOCK, 2)).not.toThrow();
    expect(() => checkBlockOption(1, 2)).toThrow('block width K must be a whole number from 2 to 16 (got 1)');
    for (const bad of [0, MAX_VERIFY_BLOCK + 1, 2.5, Number.NaN])
      expect(() => checkBlockOption(bad, 1)).toThrow(/^block width K must be a whole number from 1 to 16/);
  });
});
