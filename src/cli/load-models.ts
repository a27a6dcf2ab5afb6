import { nodeFolderSources } from '../node/file-source.ts';
import { nodeGpuContext } from './node-gpu.ts';
import { uploadWeights, type GpuWeights } from '../model/gpu-weights.ts';
import { checkCompatibility } from '../format/compat.ts';
import { ASSISTANT_MODEL_TYPES, TARGET_MODEL_TYPES } from '../format/config.ts';
import { FormatError } from '../format/errors.ts';
import type { AssistantDescription, TargetDescription } from '../format/model-description.ts';
import { openCheckpoint, type Checkpoint } from '../format/checkpoint.ts';
import { checkpointFamily } from '../format/open-target.ts';
import type { GpuContext } from '../gpu/device.ts';
import { checkpointTokenizer, type TextCodec } from '../format/tokenizer.ts';
import { checkpointLabel } from './checkpoint-dir.ts';

/**
 * Opens a Gemma 4 folder for one role and refuses a folder of another family or of the other role, saying which
 * folder it is: Gemma's config parser names only config.json (ambiguous when --target and --draft are both given),
 * and an assistant opened as a target (or the reverse) lacks what that role reads, so checkCompatibility would
 * compare fields that are not there. `targetLabel` names the target an assistant should draft for.
 */
export async function openGemmaDir(
  dir: string,
  role: 'target' | 'assistant',
  targetLabel?: string,
): Promise<Checkpoint> {
  const label = checkpointLabel(dir);
  return namingFolder(dir, label, () => openGemmaRole(dir, label, role, targetLabel));
}

/**
 * Runs `open` and puts the folder as the user typed it at the head of any error: the checkpoint's label is its
 * folder's name, and fixtures, `synth` output and many downloads name their folders target/ and assistant/, so
 * "assistant: ..." or "model.safetensors: ..." alone does not say which of --target and --draft is at fault. The
 * label stays the folder's name for reports (no local paths in a shared report).
 */
export async function namingFolder<T>(dir: string, label: string, open: () => Promise<T>): Promise<T> {
  try {
    return await open();
  } catch (e) {
    if (e instanceof Error && !e.message.startsWith(`${dir}: `))
      e.message = e.message.startsWith(`${label}: `)
        ? `${dir}: ${e.message.slice(label.length + 2)}`
        : `${dir}: ${e.message}`;
    throw e;
  }
}

async function openGemmaRole(
  dir: string,
  label: string,
  role: 'target' | 'assistant',
  targetLabel?: string,
): Promise<Checkpoint> {
  const files = await nodeFolderSources(dir);
  const expected =
    role === 'target'
      ? `a Gemma 4 target: ${TARGET_MODEL_TYPES.join(', ')}`
      : `a Gemma 4 MTP assistant: ${ASSISTANT_MODEL_TYPES.join(', ')}`;
  const use = role === 'target' ? "as this command's target" : `to draft for the Gemma 4 target "${targetLabel}"`;
  if ((await checkpointFamily(files)) === 'qwen3_5')
    throw new FormatError(
      `${label}: config.json declares a Qwen3.5 model_type, which cannot be used ${use} (expected ${expected})`,
      'config.json',
      'model_type',
    );
  const ck = await openCheckpoint(files, label);
  if (ck.description.role !== role)
    throw new FormatError(
      `${label}: config.json declares model_type "${ck.modelType}", ${role === 'target' ? 'an MTP assistant, not a target model' : 'a target model, not an MTP assistant'} (expected ${expected})`,
      'config.json',
      'model_type',
    );
  return ck;
}

/** A Gemma 4 target and, with `draftDir`, its assistant, opened (config and headers only) and checked to fit. */
export async function openGemmaPair(
  targetDir: string,
  draftDir?: string,
): Promise<{ target: Checkpoint; assistant?: Checkpoint }> {
  const target = await openGemmaDir(targetDir, 'target');
  if (!draftDir) return { target };
  const assistant = await openGemmaDir(draftDir, 'assistant', targetDir);
  await namingFolder(draftDir, assistant.label, async () =>
    checkCompatibility(target.description as TargetDescription, assistant.description as AssistantDescription),
  );
  return { target, assistant };
}

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

/** What loadModels has opened, before it uploads anything: for checks that need the config or the tokenizer. */
export interface OpenedModels {
  target: Checkpoint;
  assistant?: Checkpoint;
  tokenizer?: TextCodec;
}

/**
 * Opens a target and optionally its assistant, checks them, runs `beforeUpload` (a command's checks that need the
 * config or the tokenizer, such as the positions a prompt will reach), and only then asks for a GPU and uploads.
 */
export async function loadModels(
  targetDir: string,
  draftDir?: string,
  beforeUpload?: (opened: OpenedModels) => void,
): Promise<LoadedModels> {
  const { target, assistant } = await openGemmaPair(targetDir, draftDir);
  const tokenizer = await checkpointTokenizer(target);
  beforeUpload?.({ target, assistant, tokenizer });
  const ctx = await nodeGpuContext();
  const targetWeights = await uploadWeights(ctx.device, target.description as TargetDescription);
  const assistantWeights = assistant
    ? await uploadWeights(ctx.device, assistant.description as AssistantDescription)
    : undefined;
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
