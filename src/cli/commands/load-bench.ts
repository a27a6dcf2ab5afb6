import { existsSync } from 'node:fs';
import { open } from 'node:fs/promises';
import path from 'node:path';
import type { TensorRef } from '../../format/safetensors.ts';
import type { AssistantDescription } from '../../format/model-description.ts';
import { openFamilyCheckpoint, type FamilyCheckpoint } from '../../format/open-target.ts';
import { nodeFolderSources } from '../../node/file-source.ts';
import { defaultLayout, uploadWeights } from '../../model/gpu-weights.ts';
import {
  checkMemory,
  planLimitsOf,
  planMemory,
  type MemoryOptions,
  type MemoryPlan,
} from '../../model/memory-budget.ts';
import { planQwenMemory } from '../../model/qwen3_5/memory.ts';
import { uploadQwenWeights } from '../../model/qwen3_5/weights.ts';
import type { ProgressFn } from '../../util/cancel.ts';
import { namingFolder } from '../load-models.ts';
import { checkpointLabel } from '../checkpoint-dir.ts';
import { nodeGpuContext } from '../node-gpu.ts';
import { intOption, positiveNumberOption } from '../args.ts';
import { MAX_POSITIONS } from '../bounds.ts';
import type { Command } from '../command.ts';

const CHUNK = 8 << 20;
const MB = 1e6;

export const loadBench: Command = {
  name: 'load-bench',
  summary:
    'Measure raw read vs GPU upload throughput of a checkpoint (Gemma 4 or Qwen3.5), with peak JS heap and RSS (JSON).',
  usage: 'load-bench --model DIR|ORG/NAME [--memory-budget GB] [--max-context N]',
  options: {
    model: {
      type: 'string',
      help: 'checkpoint folder, or a folder with target/ and assistant/ (as synth writes; a Qwen3.5 target alone), or a Hub id in the local Hugging Face cache',
      checkpoint: 'folder',
    },
    'memory-budget': {
      type: 'string',
      help: 'refuse before uploading when the plan exceeds this many GB (10^9 bytes)',
    },
    'max-context': { type: 'string', help: 'context length for the memory plan', default: '4096' },
  },
  async run({ values: v }, io) {
    // Every option is checked before a file is read: a typo must not cost a read of a whole checkpoint first.
    if (typeof v.model !== 'string') throw new Error('--model DIR is required');
    const maxContext = intOption(v, 'max-context', 1, MAX_POSITIONS)!;
    // GB; a budget past 100,000 GB (100 TB) is no budget any machine has
    const gb = positiveNumberOption(v, 'memory-budget', 100_000);
    const budget = gb !== undefined ? gb * 1e9 : undefined;
    const dirs = modelDirs(path.resolve(v.model));
    const cks: FamilyCheckpoint[] = [];
    for (const d of dirs) {
      const label = checkpointLabel(d);
      cks.push(await namingFolder(d, label, async () => openFamilyCheckpoint(await nodeFolderSources(d), label)));
    }
    const qwen = cks.findIndex((c) => c.family === 'qwen3_5');
    // The Qwen3.5 target drafts with its own mtp.* head, planned and uploaded with it; a folder beside it (a split
    // drafter, or a Gemma 4 assistant) is not part of what the engine would load here, so it is refused, not skipped.
    if (qwen >= 0 && cks.length > 1)
      throw new Error(
        `${path.resolve(v.model)}: a Qwen3.5 target (${dirs[qwen]}) with another checkpoint beside it (${dirs.filter((_, i) => i !== qwen).join(', ')}); load-bench measures a Qwen3.5 target alone (its MTP head is inside it): give its folder as --model`,
      );
    const tensors = (c: FamilyCheckpoint): TensorRef[] => [...c.checkpoint.tensors.values()];
    const files = [...new Set(cks.flatMap((c, i) => tensors(c).map((t) => path.join(dirs[i], t.file.name))))];

    const mem = new PeakMemory();
    const raw = await rawRead(files);
    const viaSource = await sourceRead(cks.flatMap(tensors));

    const ctx = await nodeGpuContext();
    const limits = planLimitsOf(ctx); // under RINGSIDE_LIMITS, the browser's
    const opts: MemoryOptions = { maxContext, maxBlock: 8, prefillChunk: 64, layout: defaultLayout(ctx.device) };
    let plan: MemoryPlan;
    if (cks[0].family === 'qwen3_5') plan = planQwenMemory(cks[0].checkpoint.description, opts, limits);
    else {
      const gemma = cks.flatMap((c) => (c.family === 'gemma4' ? [c.checkpoint.description] : []));
      const target = gemma.find((d) => d.role === 'target') ?? gemma[0];
      const asst = gemma.find((d) => d.role === 'assistant') as AssistantDescription | undefined;
      plan = planMemory(target, opts, limits, asst === target ? undefined : asst);
    }
    checkMemory(plan, budget);

    const loaded: { bytes: number; destroy(): void }[] = [];
    let lastLog = 0;
    const t0 = performance.now();
    mem.start();
    try {
      for (const c of cks) {
        const onProgress: ProgressFn = (p) => {
          mem.sample();
          const now = performance.now();
          if (now - lastLog > 5000) {
            lastLog = now;
            io.err(`load-bench: ${c.checkpoint.label}: ${p.detail}`);
          }
        };
        loaded.push(
          c.family === 'qwen3_5'
            ? await uploadQwenWeights(ctx.device, c.checkpoint.description, onProgress)
            : await uploadWeights(ctx.device, c.checkpoint.description, onProgress),
        );
      }
      await ctx.device.queue.onSubmittedWorkDone(); // the copies into the buffers are part of the load
    } finally {
      mem.stop();
    }
    const seconds = (performance.now() - t0) / 1000;
    const bytes = loaded.reduce((a, w) => a + w.bytes, 0);
    const loadMBps = bytes / MB / seconds;
    io.out(
      JSON.stringify(
        {
          model: dirs,
          adapter: ctx.report.description || ctx.report.vendor,
          ...(ctx.report.limitProfile ? { limitProfile: ctx.report.limitProfile } : {}),
          bytes,
          fileBytes: raw.bytes,
          rawReadMBps: round(raw.MBps),
          sourceReadMBps: round(viaSource),
          loadMBps: round(loadMBps),
          ratio: +(loadMBps / raw.MBps).toFixed(3),
          peakHeapMB: round(mem.heap / MB),
          peakArrayBuffersMB: round(mem.arrayBuffers / MB),
          peakRssMB: round(process.resourceUsage().maxRSS / 1024),
          seconds: +seconds.toFixed(2),
          rawReadSeconds: +raw.seconds.toFixed(2),
          plan: {
            weightsGB: plan.weights / 1e9,
            cacheGB: plan.cache / 1e9,
            workspaceGB: plan.workspace / 1e9,
            kMajorRewriteGB: plan.rewrite / 1e9,
            buffers: plan.buffers,
          },
        },
        null,
        2,
      ),
    );
    loaded.forEach((w) => w.destroy());
    ctx.destroy();
    return 0;
  },
};

const round = (x: number) => Math.round(x * 10) / 10;

/** A checkpoint folder, or the target/ and assistant/ folders under it. */
function modelDirs(dir: string): string[] {
  if (existsSync(path.join(dir, 'config.json'))) return [dir];
  const subs = ['target', 'assistant']
    .map((s) => path.join(dir, s))
    .filter((d) => existsSync(path.join(d, 'config.json')));
  if (subs.length === 0) throw new Error(`${dir}: no config.json there or in target/ or assistant/`);
  return subs;
}

/** Sequential reads of whole files in 8 MB chunks into one reused buffer: the disk (or page cache) alone. */
async function rawRead(files: string[]): Promise<{ bytes: number; seconds: number; MBps: number }> {
  const buf = new Uint8Array(CHUNK);
  const t0 = performance.now();
  let bytes = 0;
  for (const f of files) {
    const fh = await open(f, 'r');
    try {
      for (let pos = 0; ; ) {
        const { bytesRead } = await fh.read(buf, 0, CHUNK, pos);
        if (bytesRead === 0) break;
        pos += bytesRead;
        bytes += bytesRead;
      }
    } finally {
      await fh.close();
    }
  }
  const seconds = (performance.now() - t0) / 1000;
  return { bytes, seconds, MBps: bytes / MB / seconds };
}

/** Reads every tensor through the checkpoint's ByteSources in 8 MB reads, as the uploader does, minus the GPU. */
async function sourceRead(tensors: TensorRef[]): Promise<number> {
  const t0 = performance.now();
  let bytes = 0;
  for (const t of tensors) {
    for (let off = 0; off < t.byteLength; off += CHUNK) {
      bytes += (await t.file.read(t.offset + off, Math.min(CHUNK, t.byteLength - off))).byteLength;
    }
  }
  return bytes / MB / ((performance.now() - t0) / 1000);
}

/** Peak heapUsed and ArrayBuffer memory, sampled on demand (progress callbacks) and every 20 ms. */
class PeakMemory {
  heap = 0;
  arrayBuffers = 0;
  private timer?: ReturnType<typeof setInterval>;
  start(): void {
    this.sample();
    this.timer = setInterval(() => this.sample(), 20);
  }
  stop(): void {
    this.sample();
    clearInterval(this.timer);
  }
  sample(): void {
    const m = process.memoryUsage();
    this.heap = Math.max(this.heap, m.heapUsed);
    this.arrayBuffers = Math.max(this.arrayBuffers, m.arrayBuffers);
  }
}
