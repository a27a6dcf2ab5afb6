/**
 * uploadQwenWeights reports progress and honours cancellation as Gemma's uploadWeights does (the page's load
 * bar and its Cancel button depend on both): bytes counted up to the total, and a cancelled token stops the
 * upload with CancelledError.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openQwen35Checkpoint } from '../../src/format/qwen3_5/index.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import { uploadQwenWeights } from '../../src/model/qwen3_5/weights.ts';
import { nodeFolderSources } from '../../src/node/file-source.ts';
import { CancelledError, CancelToken, type Progress } from '../../src/util/cancel.ts';
import { testGpu } from './gpu-context.ts';

describe('Qwen3.5 weight upload: progress and cancel', () => {
  let ctx: GpuContext;
  const open = async () =>
    openQwen35Checkpoint(
      await nodeFolderSources(path.resolve(process.cwd(), 'test/fixtures/qwen-tiny/target')),
      'qwen-tiny',
    );
  beforeAll(async () => {
    ctx = await testGpu();
  });
  afterAll(() => ctx?.destroy());

  it('reports upload progress that rises to the total', async () => {
    const ck = await open();
    const seen: Progress[] = [];
    const weights = await uploadQwenWeights(ctx.device, ck.description, (p) => seen.push(p));
    try {
      expect(seen.length).toBeGreaterThan(1);
      expect(seen.every((p) => p.phase === 'upload' && p.total === seen[0].total)).toBe(true);
      for (let i = 1; i < seen.length; i++) expect(seen[i].done).toBeGreaterThan(seen[i - 1].done);
      expect(seen.at(-1)?.done).toBe(seen[0].total);
    } finally {
      weights.destroy();
    }
  });

  it('stops with CancelledError once the token is cancelled', async () => {
    const ck = await open();
    const token = new CancelToken();
    let calls = 0;
    const upload = uploadQwenWeights(
      ctx.device,
      ck.description,
      () => {
        if (++calls === 3) token.cancel();
      },
      token,
    );
    await expect(upload).rejects.toBeInstanceOf(CancelledError);
    expect(calls).toBe(3);
  });
});
