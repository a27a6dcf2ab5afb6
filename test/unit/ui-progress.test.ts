import { describe, expect, it } from 'vitest';
import { settledProgress } from '../../src/ui/common/engine-client.ts';

describe('settledProgress: progress callbacks of an engine call', () => {
  it('passes progress on until the call settles, then ignores late messages', async () => {
    const seen: string[] = [];
    const progress = settledProgress((p: { detail: string }) => seen.push(p.detail));
    // A stand-in for the Worker call: progress, the result, then a progress message that arrives late (comlink
    // delivers proxied callbacks over their own MessagePort, so the order against the result is not fixed).
    const call = (cb: (p: { detail: string }) => void) => {
      cb({ detail: 'first' });
      setTimeout(() => cb({ detail: 'late' }), 0);
      return Promise.resolve('result');
    };
    expect(await call(progress.callback).finally(progress.close)).toBe('result');
    await new Promise((r) => setTimeout(r, 5));
    expect(seen).toEqual(['first']);
  });

  it('also goes quiet after the call fails', async () => {
    const seen: number[] = [];
    const progress = settledProgress((p: number) => seen.push(p));
    const failing = (cb: (p: number) => void) => {
      cb(1);
      setTimeout(() => cb(2), 0);
      return Promise.reject(new Error('bad file'));
    };
    await expect(failing(progress.callback).finally(progress.close)).rejects.toThrow('bad file');
    await new Promise((r) => setTimeout(r, 5));
    expect(seen).toEqual([1]);
  });
});
