/**
 * uploadQwenMtpHead, the page's upload of a split drafter's head beside a target already on the GPU: it uploads the
 * head's tensors only (its byte count is theirs, a small part of the target's), every buffer holds the same bytes as
 * the in-checkpoint head that uploadQwenWeights puts beside a full target, and withQwenMtpHead shares the target's
 * buffers instead of copying them.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import { splitQwenDrafter, writeFolder } from '../support/qwen-drafter-folder.ts';
import { attachQwen35Drafter, openQwen35Checkpoint, openQwen35Drafter } from '../../src/format/qwen3_5/index.ts';
import { nodeFolderSources } from '../../src/node/file-source.ts';
import {
  qwenMtpHeadTensors,
  uploadQwenMtpHead,
  uploadQwenWeights,
  withQwenMtpHead,
  type QwenGpuMtpHead,
} from '../../src/model/qwen3_5/weights.ts';
import { readBytes } from '../../src/gpu/buffers.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import type { GpuLinear } from '../../src/model/gpu-linear.ts';

const TARGET = path.resolve('test/fixtures/qwen-tiny/target');

/** Every buffer of a head, in a fixed order, with a name for messages. */
function headBuffers(h: QwenGpuMtpHead): [string, GPUBuffer][] {
  const lin = (name: string, l: GpuLinear): [string, GPUBuffer][] =>
    [l.weight, l.scales, l.biases].flatMap((t, i) =>
      t ? t.parts.map((p, j) => [`${name}[${i}].${j}`, p.buffer] as [string, GPUBuffer]) : [],
    );
  const l = h.layer;
  return [
    ['preFcNormEmbedding', h.preFcNormEmbedding],
    ['preFcNormHidden', h.preFcNormHidden],
    ['norm', h.norm],
    ...lin('fc', h.fc),
    ['inputNorm', l.inputNorm],
    ['postAttnNorm', l.postAttnNorm],
    ['qNorm', l.qNorm],
    ['kNorm', l.kNorm],
    ...(['qProj', 'kProj', 'vProj', 'oProj', 'gate', 'up', 'down'] as const).flatMap((k) => lin(k, l[k])),
  ];
}

describe('uploadQwenMtpHead (qwen-tiny split drafter)', () => {
  let ctx: GpuContext;
  let dir: string;
  beforeAll(async () => {
    ctx = await testGpu();
    dir = mkdtempSync(path.join(tmpdir(), 'ringside-qhead-'));
  });
  afterAll(() => {
    ctx?.destroy();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('uploads the head alone, byte-equal to the in-checkpoint head; the target buffers are shared', async () => {
    const { drafter, bareTarget } = await splitQwenDrafter(await nodeFolderSources(TARGET));
    const bare = await openQwen35Checkpoint(
      await nodeFolderSources(writeFolder(path.join(dir, 'bare'), bareTarget)),
      'bare',
    );
    const dr = await openQwen35Drafter(await nodeFolderSources(writeFolder(path.join(dir, 'MTP'), drafter)), 'MTP');
    const own = await openQwen35Checkpoint(await nodeFolderSources(TARGET), 'target');
    const attached = attachQwen35Drafter(bare.description, bare.label, dr);

    const full = await uploadQwenWeights(ctx.device, own.description);
    const target = await uploadQwenWeights(ctx.device, bare.description);
    const progress: number[] = [];
    const head = await uploadQwenMtpHead(ctx.device, attached.mtp!, (p) => progress.push(p.total));
    try {
      const headBytes = qwenMtpHeadTensors(attached.mtp!).reduce((a, t) => a + t.byteLength, 0);
      expect(head.bytes).toBe(headBytes);
      expect(new Set(progress)).toEqual(new Set([headBytes]));
      expect(headBytes).toBeLessThan(target.bytes / 2);

      const ours = headBuffers(head.head);
      const theirs = headBuffers(full.mtp!);
      expect(ours.map(([n]) => n)).toEqual(theirs.map(([n]) => n));
      for (const [i, [name, b]] of ours.entries()) {
        expect(b.size, name).toBe(theirs[i][1].size);
        expect(await readBytes(ctx.device, b, b.size), name).toEqual(await readBytes(ctx.device, theirs[i][1], b.size));
      }

      const w = withQwenMtpHead(target, attached, head.head);
      expect(w.mtp).toBe(head.head);
      expect(w.desc.mtp?.source).toBe('drafter');
      expect(w.embed).toBe(target.embed);
      expect(w.layers).toBe(target.layers);
    } finally {
      head.destroy();
      target.destroy();
      full.destroy();
    }
  });
});
