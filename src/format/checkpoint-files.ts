import { readAll, readJson, type ByteSource } from './bytesource.ts';
import { FormatError } from './errors.ts';
import { readSafetensorsHeader, type TensorRef } from './safetensors.ts';
import { isIgnoredTensor, normaliseTensorName } from './tensor-names.ts';

/** The files of one checkpoint folder, by role. */
export interface CheckpointFiles {
  config: ByteSource;
  configBytes: Uint8Array;
  generationConfig?: unknown;
  tokenizer?: ByteSource;
  /** tokenizer_config.json (special tokens, often the chat template) and chat_template.jinja, where present. */
  tokenizerConfig?: ByteSource;
  chatTemplate?: ByteSource;
  /** The safetensors files holding the weights (one, or the shards listed by the index). */
  weightFiles: ByteSource[];
  /** Every tensor of the weight files by its name as written, after index consistency checks. */
  tensors: Map<string, TensorRef>;
}

const INDEX = 'model.safetensors.index.json';

const baseName = (n: string) => n.slice(n.lastIndexOf('/') + 1);

/** Finds the file with this base name; refuses ambiguity (two config.json in one drop). */
function findOne(files: ByteSource[], name: string, label: string): ByteSource | undefined {
  const hits = files.filter((f) => baseName(f.name) === name);
  if (hits.length > 1)
    throw new FormatError(
      `${label}: more than one ${name} (${hits.map((h) => h.name).join(', ')}); drop one checkpoint folder at a time`,
    );
  return hits[0];
}

/** Resolves path `rel` (as written in the index) against the folder of the index file. */
function resolveSibling(files: ByteSource[], indexFile: ByteSource, rel: string): ByteSource | undefined {
  const dir = indexFile.name.includes('/') ? indexFile.name.slice(0, indexFile.name.lastIndexOf('/') + 1) : '';
  return files.find((f) => f.name === dir + rel) ?? files.find((f) => f.name === rel);
}

/** Locates config, weights (single file or shards + index) and tokenizer; reads and cross-checks all headers. */
export async function locateCheckpointFiles(files: ByteSource[], label: string): Promise<CheckpointFiles> {
  const config = findOne(files, 'config.json', label);
  if (!config)
    throw new FormatError(`${label}: no config.json among the ${files.length} files given (${summarise(files)})`);
  const configBytes = await readAll(config);
  const genFile = findOne(files, 'generation_config.json', label);
  const generationConfig = genFile ? await readJson(genFile) : undefined;
  const tokenizer = findOne(files, 'tokenizer.json', label);
  const tokenizerConfig = findOne(files, 'tokenizer_config.json', label);
  const chatTemplate = findOne(files, 'chat_template.jinja', label);
  const text = { tokenizer, tokenizerConfig, chatTemplate };
  const index = findOne(files, INDEX, label);

  const tensors = new Map<string, TensorRef>();
  const add = (t: TensorRef) => {
    const prev = tensors.get(t.name);
    if (prev)
      throw new FormatError(
        `${label}: tensor "${t.name}" appears in both ${prev.file.name} and ${t.file.name}`,
        t.file.name,
        t.name,
      );
    tensors.set(t.name, t);
  };

  if (index) {
    const idx = await readJson(index);
    const wm = (idx as { weight_map?: unknown } | null)?.weight_map;
    if (typeof wm !== 'object' || wm === null || Array.isArray(wm)) {
      throw new FormatError(`${index.name}: missing "weight_map" object`, index.name);
    }
    const map = wm as Record<string, unknown>;
    const shardNames = [...new Set(Object.values(map))];
    const weightFiles: ByteSource[] = [];
    for (const s of shardNames) {
      if (typeof s !== 'string')
        throw new FormatError(
          `${index.name}: weight_map values must be file names, found ${JSON.stringify(s)}`,
          index.name,
        );
      const f = resolveSibling(files, index, s);
      if (!f) {
        const n = Object.values(map).filter((v) => v === s).length;
        throw new FormatError(
          `${index.name}: weight_map points ${n} tensors to "${s}", which is not among the files given (${summarise(files)})`,
          index.name,
        );
      }
      weightFiles.push(f);
    }
    for (const f of weightFiles) {
      const h = await readSafetensorsHeader(f);
      for (const t of h.tensors) {
        const mapped = map[t.name];
        if (mapped === undefined)
          throw new FormatError(
            `${f.name}: tensor "${t.name}" is not listed in ${index.name}'s weight_map`,
            f.name,
            t.name,
          );
        if (resolveSibling(files, index, mapped as string) !== f) {
          throw new FormatError(
            `${index.name}: weight_map says tensor "${t.name}" is in "${mapped}" but it is in ${f.name}`,
            index.name,
            t.name,
          );
        }
        add(t);
      }
    }
    for (const [name, file] of Object.entries(map)) {
      if (!tensors.has(name))
        throw new FormatError(
          `${index.name}: weight_map lists tensor "${name}" in "${file}" but that file has no such tensor`,
          index.name,
          name,
        );
    }
    return { config, configBytes, generationConfig, ...text, weightFiles, tensors };
  }

  const st = files.filter((f) => f.name.endsWith('.safetensors'));
  const single = findOne(files, 'model.safetensors', label) ?? (st.length === 1 ? st[0] : undefined);
  if (!single) {
    throw new FormatError(
      st.length === 0
        ? `${label}: no .safetensors weights among the files given (${summarise(files)})`
        : `${label}: ${st.length} .safetensors shards but no ${INDEX} to say which tensor is where`,
    );
  }
  const h = await readSafetensorsHeader(single);
  for (const t of h.tensors) add(t);
  return { config, configBytes, generationConfig, ...text, weightFiles: [single], tensors };
}

function summarise(files: ByteSource[]): string {
  const names = files.map((f) => f.name);
  return names.length <= 8
    ? names.join(', ') || 'none'
    : `${names.slice(0, 8).join(', ')}, ... ${names.length - 8} more`;
}

/** The weight files' names for messages ("model.safetensors" or the shard list), and their total size in bytes. */
export function weightFilesSummary(f: CheckpointFiles): { fileSet: string; totalBytes: number } {
  return {
    fileSet: f.weightFiles.map((w) => w.name).join(', '),
    totalBytes: f.weightFiles.reduce((a, w) => a + w.size, 0),
  };
}

/**
 * The language-model tensors by normalised name (tensor-names.ts), the vision and audio ones skipped and counted;
 * two names that normalise to one are refused.
 */
export function normalisedTensors(
  f: CheckpointFiles,
  label: string,
): { tensors: Map<string, TensorRef>; ignored: number } {
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
  return { tensors, ignored };
}
