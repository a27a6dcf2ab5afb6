/**
 * Opening a Qwen3.5 target from its files (config and headers only, no tensor data), with or without its own
 * `mtp.*` head (a split MTP drafter folder opens in drafter.ts). The same file handling as Gemma's
 * openCheckpoint (shards, index.json, name prefixes, digest).
 */
import { parseJsonBytes, type ByteSource } from '../bytesource.ts';
import { checkpointDigest } from '../checkpoint.ts';
import { locateCheckpointFiles, normalisedTensors, weightFilesSummary } from '../checkpoint-files.ts';
import { TensorTable } from '../describe.ts';
import { namingCheckpoint } from '../errors.ts';
import type { TensorRef } from '../safetensors.ts';
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
  /** tokenizer_config.json and chat_template.jinja, where the folder has them (src/format/tokenizer.ts reads them). */
  tokenizerConfig?: ByteSource;
  chatTemplate?: ByteSource;
  /** SHA-256 hex of config.json bytes + canonical JSON of every tensor header entry. */
  digest: string;
  totalBytes: number;
  ignoredTensors: number;
}

/** Opens a Qwen3.5 target; throws FormatError with a user-facing message on any problem. */
export async function openQwen35Checkpoint(files: ByteSource[], label = 'checkpoint'): Promise<Qwen35Checkpoint> {
  return namingCheckpoint(label, async () => {
    const { config, tensors, ignored, digest, totalBytes, fileSet, ...text } = await load(files, label);
    const description = describeQwen35(config, new TensorTable(tensors, fileSet), label);
    return { family: 'qwen3_5', label, description, tensors, ...text, digest, totalBytes, ignoredTensors: ignored };
  });
}

async function load(files: ByteSource[], label: string) {
  const f = await locateCheckpointFiles(files, label);
  const config = parseQwen35Config(parseJsonBytes(f.configBytes, f.config.name), f.config.name, 'target');
  const { tensors, ignored } = normalisedTensors(f, label);
  return {
    config,
    tensors,
    ignored,
    tokenizer: f.tokenizer,
    tokenizerConfig: f.tokenizerConfig,
    chatTemplate: f.chatTemplate,
    ...weightFilesSummary(f),
    digest: await checkpointDigest(f.configBytes, f.tensors),
  };
}
