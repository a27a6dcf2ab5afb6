import { openCheckpointDir } from '../node/file-source.ts';
import { nodeGpuContext } from './node-gpu.ts';
import { uploadWeights, type GpuWeights } from '../model/gpu-weights.ts';
import { checkCompatibility } from '../format/compat.ts';
import type { AssistantDescription, TargetDescription } from '../format/model-description.ts';
import type { Checkpoint } from '../format/checkpoint.ts';
import type { GpuContext } from '../gpu/device.ts';
import { loadTokenizer, type TextCodec } from '../format/tokenizer.ts';

/** Opens a target (and optionally an assistant) folder, checks them, and uploads them to the GPU. */
export interface LoadedModels {
  ctx: GpuContext;
  target: Checkpoint;
  targetWeights: GpuWeights<TargetDescription>;
  assistant?: Checkpoint;
  assistantWeights?: GpuWeights<AssistantDescription>;
  tokenizer?: TextCodec;
  close(): void;
}

export async function loadModels(targetDir: string, draftDir?: string): Promise<LoadedModels> {
  const target = await openCheckpointDir(targetDir);
  if (target.description.role !== 'target')
    throw new Error(`${target.label}: not a target model (model_type "${target.modelType}")`);
  const assistant = draftDir ? await openCheckpointDir(draftDir) : undefined;
  if (assistant) {
    if (assistant.description.role !== 'assistant')
      throw new Error(`${assistant.label}: not an MTP assistant (model_type "${assistant.modelType}")`);
    checkCompatibility(target.description as TargetDescription, assistant.description as AssistantDescription);
  }
  const ctx = await nodeGpuContext();
  const targetWeights = await uploadWeights(ctx.device, target.description as TargetDescription);
  const assistantWeights = assistant
    ? await uploadWeights(ctx.device, assistant.description as AssistantDescription)
    : undefined;
  const tokenizer = target.tokenizer ? await loadTokenizer(target.tokenizer) : undefined;
  return {
    ctx,
    target,
    targetWeights,
    assistant,
    assistantWeights,
    tokenizer,
    close() {
      targetWeights.destroy();
      assistantWeights?.destroy();
      ctx.destroy();
    },
  };
}
