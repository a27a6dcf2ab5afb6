import path from 'node:path';
import { checkpointFamily } from '../format/open-target.ts';
import { openQwen35Checkpoint, type Qwen35Checkpoint } from '../format/qwen3_5/index.ts';
import { loadTokenizer, type TextCodec } from '../format/tokenizer.ts';
import type { GpuContext } from '../gpu/device.ts';
import { type QwenGpuWeights, uploadQwenWeights } from '../model/qwen/weights.ts';
import { nodeFolderSources } from '../node/file-source.ts';
import { nodeGpuContext } from './node-gpu.ts';

/**
 * The Qwen3.5 branch of the commands that open a target folder: whether its config.json declares a Qwen3.5
 * model (the family dispatch the page's engine uses too, src/format/open-target.ts), and opening it with the
 * family's own opener.
 */
export async function isQwenDir(dir: string): Promise<boolean> {
  try {
    return (await checkpointFamily(await nodeFolderSources(dir))) === 'qwen3_5';
  } catch {
    return false; // no such folder: the Gemma opener says what is wrong
  }
}

export async function openQwenTargetDir(dir: string): Promise<Qwen35Checkpoint> {
  return openQwen35Checkpoint(await nodeFolderSources(dir), path.basename(dir));
}

export interface LoadedQwenTarget {
  ctx: GpuContext;
  checkpoint: Qwen35Checkpoint;
  weights: QwenGpuWeights;
  tokenizer?: TextCodec;
  close(): void;
}

/** Opens a Qwen3.5 target folder and uploads it (with its MTP head when it has one), as loadModels does for Gemma. */
export async function loadQwenTarget(dir: string): Promise<LoadedQwenTarget> {
  const checkpoint = await openQwenTargetDir(dir);
  const ctx = await nodeGpuContext();
  const weights = await uploadQwenWeights(ctx.device, checkpoint.description);
  const tokenizer = checkpoint.tokenizer ? await loadTokenizer(checkpoint.tokenizer) : undefined;
  return {
    ctx,
    checkpoint,
    weights,
    tokenizer,
    close() {
      weights.destroy();
      ctx.destroy();
    },
  };
}
