/**
 * Opening a Qwen3.5 target from its files (config and headers only, no tensor data), with or without its own
 * `mtp.*` head (a split MTP drafter folder opens in drafter.ts). The same file handling as Gemma's
 * openCheckpoint (shards, index.json, name prefixes, digest).
 */
import type { ByteSource } from '../bytesource.ts';
import { checkpointDigest } from '../checkpoint.ts';
import { locateCheckpointFiles } from '../checkpoint-files.ts';
import { TensorTable } from '../describe.ts';
import { FormatError } from '../errors.ts';
import type { TensorRef } from '../safetensors.ts';
import { isIgnoredTensor, normaliseTensorName } from '../tensor-names.ts';
import { parseQwen35Config } from './config.ts';
import { describeQwen35 } from './describe.ts';
import type { Qwen35Description } from './description.ts';

export interface Qwen35Checkpoint {
  family: 'qwen3_5';
  label: string;
  description: Qwen35Description;
  /** Language-model tensors by normalised name (vision tensors excluded). */
  tensors: Map<string, TensorRef>;
  tokenizer?: ByteSource;
  /** SHA-256 hex of config.json bytes + canonical JSON of every tensor header entry. */
  digest: string;
  totalBytes: number;
  ignoredTensors: number;
}

/** Opens a Qwen3.5 target; throws FormatError with a user-facing message on any problem. */
export async function openQwen35Checkpoint(files: ByteSource[], label = 'checkpoint'): Promise<Qwen35Checkpoint> {
  const { config, tensors, ignored, digest, totalBytes, fileSet, tokenizer } = await load(files, label);
  const description = describeQwen35(config, new TensorTable(tensors, fileSet), label);
  return { family: 'qwen3_5', label, description, tensors, tokenizer, digest, totalBytes, ignoredTensors: ignored };
}

async function load(files: ByteSource[], label: string) {
  const f = await locateCheckpointFiles(files, label);
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder().decode(f.configBytes));
  } catch (e) {
    throw new FormatError(`${f.config.name}: not valid JSON (${(e as Error).message})`, f.config.name);
  }
  const config = parseQwen35Config(json, f.config.name, 'target');
  const tensors = new Map<string, TensorRef>();
  let ignored = 0;
  for (const t of f.tensors.values()) {
    if (isIgnoredTensor(t.name)) {
      ignored++;
      continue;
    }
    const n = normaliseTensorName(t.name);
    const prev = tensors.get(n);
    if (prev)
      throw new FormatError(
        `${label}: tensors "${prev.name}" and "${t.name}" both normalise to "${n}"`,
        t.file.name,
        t.name,
      );
    tensors.set(n, t);
  }
  return {
    config,
    tensors,
    ignored,
    tokenizer: f.tokenizer,
    fileSet: f.weightFiles.map((w) => w.name).join(', '),
    digest: await checkpointDigest(f.configBytes, f.tensors),
    totalBytes: f.weightFiles.reduce((a, w) => a + w.size, 0),
  };
}
