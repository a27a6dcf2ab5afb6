import { parseJsonBytes, type ByteSource } from './bytesource.ts';
import { sha256Hex } from '../util/sha256.ts';
import { locateCheckpointFiles, normalisedTensors, weightFilesSummary } from './checkpoint-files.ts';
import { parseConfig, type ModelType } from './config.ts';
import { describeModel, TensorTable } from './describe.ts';
import type { ModelDescription } from './model-description.ts';
import type { TensorRef } from './safetensors.ts';
import { namingCheckpoint } from './errors.ts';

export interface Checkpoint {
  /** A name for messages and reports (e.g. the folder name). */
  label: string;
  modelType: ModelType;
  description: ModelDescription;
  /** Language-model tensors by normalised name (vision/audio tensors excluded). */
  tensors: Map<string, TensorRef>;
  tokenizer?: ByteSource;
  /** tokenizer_config.json and chat_template.jinja, where the folder has them (src/format/tokenizer.ts reads them). */
  tokenizerConfig?: ByteSource;
  chatTemplate?: ByteSource;
  /** SHA-256 hex of config.json bytes + canonical JSON of every tensor header entry (for report provenance). */
  digest: string;
  /** Total bytes of the weight files. */
  totalBytes: number;
  /** Number of vision/audio tensors that were skipped. */
  ignoredTensors: number;
}

/**
 * Opens a checkpoint from its files: reads config and headers only (no tensor data), validates everything,
 * and returns the typed description. Throws FormatError with a user-facing message on any problem.
 */
export async function openCheckpoint(files: ByteSource[], label = 'checkpoint'): Promise<Checkpoint> {
  return namingCheckpoint(label, () => open(files, label));
}

async function open(files: ByteSource[], label: string): Promise<Checkpoint> {
  const f = await locateCheckpointFiles(files, label);
  const config = parseConfig(parseJsonBytes(f.configBytes, f.config.name), f.config.name, f.generationConfig);
  const { tensors, ignored } = normalisedTensors(f, label);
  const { fileSet, totalBytes } = weightFilesSummary(f);
  const description = describeModel(config, new TensorTable(tensors, fileSet));
  const digest = await checkpointDigest(f.configBytes, f.tensors);
  return {
    label,
    modelType: config.modelType,
    description,
    tensors,
    tokenizer: f.tokenizer,
    tokenizerConfig: f.tokenizerConfig,
    chatTemplate: f.chatTemplate,
    digest,
    totalBytes,
    ignoredTensors: ignored,
  };
}

/** Digest over config bytes and a canonical (name-sorted) listing of every tensor's header entry. */
export async function checkpointDigest(configBytes: Uint8Array, all: Map<string, TensorRef>): Promise<string> {
  const entries = [...all.values()]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((t) => [t.name, t.dtype, t.shape, t.file.name, t.byteLength]);
  const headerBytes = new TextEncoder().encode(JSON.stringify(entries));
  const buf = new Uint8Array(configBytes.byteLength + headerBytes.byteLength);
  buf.set(configBytes, 0);
  buf.set(headerBytes, configBytes.byteLength);
  return sha256Hex(buf);
}
