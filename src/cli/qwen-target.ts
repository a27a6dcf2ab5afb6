import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { isQwen35Config, openQwen35Checkpoint, type Qwen35Checkpoint } from '../format/qwen3_5/index.ts';
import { nodeFolderSources } from '../node/file-source.ts';

/**
 * The Qwen3.5 branch of the commands that open a target folder: whether its config.json declares a Qwen3.5
 * model (the Gemma opener does not read them), and opening it with the family's own opener.
 */
export async function isQwenDir(dir: string): Promise<boolean> {
  try {
    return isQwen35Config(JSON.parse(await readFile(path.join(dir, 'config.json'), 'utf8')));
  } catch {
    return false; // no or unreadable config.json: the Gemma opener says what is wrong
  }
}

export async function openQwenTargetDir(dir: string): Promise<Qwen35Checkpoint> {
  return openQwen35Checkpoint(await nodeFolderSources(dir), path.basename(dir));
}
