/**
 * Split drafter folders for tests, in the layout mlx-vlm's qwen3_5_mtp splitter writes from an MLX source
 * (docs/QWEN35.md section 8): the target's `mtp.*` tensors with the prefix removed, bytes and quantization
 * unchanged, in one model.safetensors with metadata format=mlx, beside config.json
 * {block_size, model_type: "qwen3_5_mtp", text_config: the source's, tie_word_embeddings, quantization}.
 * Also the same target without its `mtp.*` tensors (an mlx_lm conversion, which drops them).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { bytesSource, readAll, type ByteSource } from '../../src/format/bytesource.ts';
import { readSafetensorsHeader, readTensorBytes } from '../../src/format/safetensors.ts';
import { writeSafetensors, type TensorToWrite } from '../../src/format/safetensors-writer.ts';

export type Files = Map<string, Uint8Array>;

export interface SplitOptions {
  /** Renames a head tensor (name without mtp.) as it is written; return null to drop it. */
  rename?: (name: string) => string | null;
  /** Edits the drafter's config.json before it is written. */
  editConfig?: (c: Record<string, unknown>) => void;
}

const json = (o: unknown) => new TextEncoder().encode(JSON.stringify(o, null, 2));

/** The drafter folder's files and the target's files without mtp.*, from a target with its own head. */
export async function splitQwenDrafter(
  target: ByteSource[],
  opts: SplitOptions = {},
): Promise<{ drafter: Files; bareTarget: Files }> {
  const cfgFile = target.find((f) => f.name === 'config.json')!;
  const weights = target.find((f) => f.name === 'model.safetensors')!;
  const source = JSON.parse(new TextDecoder().decode(await readAll(cfgFile))) as Record<string, unknown>;
  const head: TensorToWrite[] = [];
  const rest: TensorToWrite[] = [];
  for (const t of (await readSafetensorsHeader(weights)).tensors) {
    const w = { name: t.name, dtype: t.dtype, shape: t.shape, data: await readTensorBytes(t) };
    if (!t.name.startsWith('mtp.')) {
      rest.push(w);
      continue;
    }
    const name = opts.rename ? opts.rename(t.name.slice(4)) : t.name.slice(4);
    if (name !== null) head.push({ ...w, name });
  }
  const tc = source.text_config as Record<string, unknown>;
  const config: Record<string, unknown> = {
    block_size: ((tc.mtp_num_hidden_layers as number) ?? 1) + 2,
    model_type: 'qwen3_5_mtp',
    text_config: tc,
    tie_word_embeddings: tc.tie_word_embeddings ?? false,
  };
  if (head.some((t) => t.name.endsWith('.scales'))) {
    config.quantization = source.quantization;
    config.quantization_config = source.quantization;
  }
  opts.editConfig?.(config);
  return {
    drafter: new Map([
      ['config.json', json(config)],
      ['model.safetensors', writeSafetensors(head, { format: 'mlx' })],
    ]),
    bareTarget: new Map([
      ['config.json', await readAll(cfgFile)],
      ['model.safetensors', writeSafetensors(rest, { format: 'mlx' })],
    ]),
  };
}

export function asSources(files: Files): ByteSource[] {
  return [...files].map(([name, bytes]) => bytesSource(name, bytes));
}

export function writeFolder(dir: string, files: Files): string {
  mkdirSync(dir, { recursive: true });
  for (const [name, bytes] of files) writeFileSync(path.join(dir, name), bytes);
  return dir;
}
