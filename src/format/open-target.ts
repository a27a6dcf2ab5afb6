/**
 * Which model family a checkpoint folder holds, and opening it with that family's opener: Gemma 4's
 * openCheckpoint or Qwen3.5's openQwen35Checkpoint. The command line (src/cli/qwen-target.ts) and the page's
 * engine Worker (src/worker/engine.ts) both dispatch through here, so a folder opens the same way in both.
 */
import { readAll, type ByteSource } from './bytesource.ts';
import { openCheckpoint, type Checkpoint } from './checkpoint.ts';
import { openQwen35Checkpoint, type Qwen35Checkpoint } from './qwen3_5/index.ts';

export type ModelFamily = 'gemma4' | 'qwen3_5';

export type FamilyCheckpoint =
  | { family: 'gemma4'; checkpoint: Checkpoint }
  | { family: 'qwen3_5'; checkpoint: Qwen35Checkpoint };

/**
 * The family a config.json declares through its model_type: every `qwen3_5*` type (dense, text-only, MoE,
 * a split MTP drafter) is Qwen3.5's, so its own parser gives the specific message for the ones it refuses;
 * anything else (Gemma 4 and every unknown type) is Gemma's, whose parser says what it expected.
 */
export function familyOfConfig(json: unknown): ModelFamily {
  const mt = typeof json === 'object' && json !== null ? (json as { model_type?: unknown }).model_type : undefined;
  return typeof mt === 'string' && mt.startsWith('qwen3_5') ? 'qwen3_5' : 'gemma4';
}

/**
 * The family of the folder whose files are `files`. A missing, duplicated or unreadable config.json counts
 * as Gemma's: its opener then names what is wrong with the folder.
 */
export async function checkpointFamily(files: readonly ByteSource[]): Promise<ModelFamily> {
  const configs = files.filter((f) => f.name === 'config.json' || f.name.endsWith('/config.json'));
  if (configs.length !== 1) return 'gemma4';
  try {
    return familyOfConfig(JSON.parse(new TextDecoder().decode(await readAll(configs[0]))));
  } catch {
    return 'gemma4';
  }
}

/** Opens a checkpoint folder with its family's opener (config and headers only, no tensor data). */
export async function openFamilyCheckpoint(files: ByteSource[], label: string): Promise<FamilyCheckpoint> {
  if ((await checkpointFamily(files)) === 'qwen3_5')
    return { family: 'qwen3_5', checkpoint: await openQwen35Checkpoint(files, label) };
  return { family: 'gemma4', checkpoint: await openCheckpoint(files, label) };
}
