/**
 * Opening Qwen3.5 checkpoints from their files (config and headers only, no tensor data): the target, with or
 * without its own `mtp.*` head, and a split MTP drafter folder. The same file handling as Gemma's
 * openCheckpoint (shards, index.json, name prefixes, digest).
 */
import type { ByteSource } from '../bytesource.ts';
import { checkpointDigest } from '../checkpoint.ts';
import { locateCheckpointFiles } from '../checkpoint-files.ts';
import { TensorTable } from '../describe.ts';
import { FormatError } from '../errors.ts';
import type { TensorRef } from '../safetensors.ts';
import { isIgnoredTensor, normaliseTensorName } from '../tensor-names.ts';
import { parseQwen35Config, type Qwen35Config } from './config.ts';
import { describeQwen35, describeQwen35Drafter } from './describe.ts';
import type { Qwen35Description, Qwen35MtpHead } from './description.ts';

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

export interface Qwen35DrafterCheckpoint {
  family: 'qwen3_5';
  label: string;
  config: Qwen35Config;
  head: Qwen35MtpHead;
  tensors: Map<string, TensorRef>;
  digest: string;
  totalBytes: number;
}

/** Opens a Qwen3.5 target; throws FormatError with a user-facing message on any problem. */
export async function openQwen35Checkpoint(files: ByteSource[], label = 'checkpoint'): Promise<Qwen35Checkpoint> {
  const { config, tensors, ignored, digest, totalBytes, fileSet, tokenizer } = await load(
    files,
    label,
    'target',
    (n) => n,
  );
  const description = describeQwen35(config, new TensorTable(tensors, fileSet), label);
  return { family: 'qwen3_5', label, description, tensors, tokenizer, digest, totalBytes, ignoredTensors: ignored };
}

/** Opens a split MTP drafter folder (its tensors with or without the `mtp.` prefix). */
export async function openQwen35Drafter(files: ByteSource[], label = 'drafter'): Promise<Qwen35DrafterCheckpoint> {
  const strip = (n: string) => (n.startsWith('mtp.') ? n.slice('mtp.'.length) : n);
  const { config, tensors, digest, totalBytes, fileSet } = await load(files, label, 'drafter', strip);
  const head = describeQwen35Drafter(config, new TensorTable(tensors, fileSet), label);
  return { family: 'qwen3_5', label, config, head, tensors, digest, totalBytes };
}

/**
 * The target with a split drafter's head as its MTP head (replacing its own, if any). Throws a FormatError
 * listing every mismatch: the head reads the target's hidden state and shares its embedding and LM head.
 */
export function attachQwen35Drafter(target: Qwen35Description, drafter: Qwen35DrafterCheckpoint): Qwen35Description {
  const problems: string[] = [];
  const d = drafter.config;
  if (d.hidden !== target.hidden) problems.push(`hidden_size ${d.hidden} != target hidden_size ${target.hidden}`);
  if (d.vocab !== target.vocab) problems.push(`vocab_size ${d.vocab} != target vocab_size ${target.vocab}`);
  if (problems.length > 0)
    throw new FormatError(
      `MTP drafter ${drafter.label} does not fit target (${target.modelType}): ${problems.join('; ')}`,
    );
  return { ...target, mtp: drafter.head, mtpUnavailable: null };
}

async function load(files: ByteSource[], label: string, role: 'target' | 'drafter', rename: (n: string) => string) {
  const f = await locateCheckpointFiles(files, label);
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder().decode(f.configBytes));
  } catch (e) {
    throw new FormatError(`${f.config.name}: not valid JSON (${(e as Error).message})`, f.config.name);
  }
  const config = parseQwen35Config(json, f.config.name, role);
  const tensors = new Map<string, TensorRef>();
  let ignored = 0;
  for (const t of f.tensors.values()) {
    if (isIgnoredTensor(t.name)) {
      ignored++;
      continue;
    }
    const n = rename(normaliseTensorName(t.name));
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
