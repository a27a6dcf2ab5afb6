import { describe, expect, it } from 'vitest';
import { settledProgress } from '../../src/ui/common/engine-client.ts';

describe('settledProgress: progress callbacks of an engine call', () => {
  it('passes progress on until the call settles, then ignores late messages', async () => {
    const seen: string[] = [];
    const progress = settledProgress((p: { detail: string }) => seen.push(p.detail));
    // A stand-in for the Worker call: progress, the result, then a progress message that arrives late (comlink
    // delivers proxied callbacks over their own MessagePort, so the order against the result is not fixed).
    // `late` settles once that message has reached the callback: the test waits for the event, not a delay.
    let late!: Promise<void>;
    const call = (cb: (p: { detail: string }) => void) => {
      cb({ detail: 'first' });
      late = new Promise((delivered) => setTimeout(() => delivered(cb({ detail: 'late' })), 0));
      return Promise.resolve('result');
    };
    expect(await call(progress.callback).finally(progress.close)).toBe('result');
    await late;
    expect(seen).toEqual(['first']);
  });

  it('also goes quiet after the call fails', async () => {
    const seen: number[] = [];
    const progress = settledProgress((p: number) => seen.push(p));
    let late!: Promise<void>;
    const failing = (cb: (p: number) => void) => {
      cb(1);
      late = new Promise((delivered) => setTimeout(() => delivered(cb(2)), 0));
      return Promise.reject(new Error('bad file'));
    };
    await expect(failing(progress.callback).finally(progress.close)).rejects.toThrow('bad file');
    await late;
    expect(seen).toEqual([1]);
  });
});
