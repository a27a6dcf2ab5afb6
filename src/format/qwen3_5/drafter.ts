/**
 * A split Qwen3.5 / Qwen3.6 MTP drafter folder (docs/QWEN35.md section 8): the target's `mtp.*` head saved on
 * its own, in the layout mlx-vlm's `qwen3_5_mtp` drafter loads (`--draft-model DIR --draft-kind mtp`) and its
 * splitter (`python -m mlx_vlm.speculative.drafters.qwen3_5_mtp.split`) writes, which is what the Hub's
 * "...-MTP" drafter repos hold:
 *   config.json        {"model_type": "qwen3_5_mtp", "text_config": {the target's text config}, "block_size",
 *                       "tie_word_embeddings", optional "quantization" / "quantization_config" (MLX affine)}
 *   model.safetensors  the head's tensors WITHOUT the `mtp.` prefix (fc, pre_fc_norm_embedding,
 *                       pre_fc_norm_hidden, norm, layers.0.*), norms stored as 1 + w (MLX), metadata format=mlx
 *   (tokenizer files copied from the source; an index.json beside the one shard in some repos).
 * mlx-vlm's loader treats `mtp.`-prefixed names as the HF layout (zero-centred norms, +1 added on load); this
 * lab multiplies by the stored norm weight, so such a folder, and a bare `mtp.safetensors` lifted from the HF
 * checkpoint, are refused with the reason instead of drafting with wrong norms.
 *
 * The head shares the target's embedding and LM head and reads its hidden state, so its tensors are checked
 * against the TARGET's geometry (hidden, heads, head dim, intermediate size) with the drafter's own
 * quantization, and its config against the target's config (vocab, eps, RoPE too).
 */
import { parseJsonBytes, type ByteSource } from '../bytesource.ts';
import { checkpointDigest } from '../checkpoint.ts';
import { locateCheckpointFiles, weightFilesSummary } from '../checkpoint-files.ts';
import { TensorTable } from '../describe.ts';
import { FormatError, namingCheckpoint } from '../errors.ts';
import { readSafetensorsHeader, type TensorRef } from '../safetensors.ts';
import { parseQwen35Config, type Qwen35Config } from './config.ts';
import { describeQwen35Drafter } from './describe.ts';
import type { Qwen35Description, Qwen35MtpHead } from './description.ts';

/** The model_type mlx-vlm's splitter writes and its drafter registry maps to `--draft-kind mtp`. */
export const QWEN35_MTP_DRAFTER_TYPE = 'qwen3_5_mtp';

/** The splitter's command, quoted in messages that tell the user how to make a folder this lab reads. */
const SPLIT_HINT =
  'split the head with `python -m mlx_vlm.speculative.drafters.qwen3_5_mtp.split --model SOURCE --output DIR`';

export interface Qwen35DrafterCheckpoint {
  family: 'qwen3_5';
  role: 'drafter';
  label: string;
  /** The config.json file name as given (for messages). */
  configFile: string;
  /** The text geometry and quantization of the drafter's config.json (its text_config). */
  config: Qwen35Config;
  /** mlx-vlm's default verify block for this drafter (config block_size), or null when absent. */
  blockSize: number | null;
  /** The head's tensors by name as written (no prefix). */
  tensors: Map<string, TensorRef>;
  /** "model.safetensors" or the shard list, for messages. */
  fileSet: string;
  /** SHA-256 hex of config.json bytes + canonical JSON of every tensor header entry. */
  digest: string;
  totalBytes: number;
}

/** Opens a split MTP drafter folder (config and headers only); throws FormatError saying what is wrong. */
export async function openQwen35Drafter(files: ByteSource[], label = 'drafter'): Promise<Qwen35DrafterCheckpoint> {
  return namingCheckpoint(label, () => openDrafter(files, label));
}

async function openDrafter(files: ByteSource[], label: string): Promise<Qwen35DrafterCheckpoint> {
  await refuseBareHead(files, label);
  const f = await locateCheckpointFiles(files, label);
  const file = f.config.name;
  const json = parseJsonBytes(f.configBytes, file, `${label}: ${file}`);
  const config = parseDrafterConfig(json, file, label);
  const { fileSet, totalBytes } = weightFilesSummary(f);
  const prefixed = [...f.tensors.keys()].filter((n) => n.startsWith('mtp.'));
  if (prefixed.length > 0)
    throw new FormatError(
      `${label}: ${fileSet} names the head's tensors with the mtp. prefix ("${prefixed[0]}"${prefixed.length > 1 ? `, ${prefixed.length - 1} more` : ''}), the HF checkpoint's layout, whose RMSNorm weights are zero-centred (mlx-vlm adds 1 to them on load); this lab reads the split MLX layout (names without mtp., norms stored as 1 + w): ${SPLIT_HINT}`,
      f.tensors.get(prefixed[0])!.file.name,
      prefixed[0],
    );
  if (!f.tensors.has('fc.weight'))
    throw new FormatError(
      `${label}: ${fileSet} has no "fc.weight", so it holds no Qwen3.5 MTP head (expected fc, pre_fc_norm_embedding, pre_fc_norm_hidden, norm and layers.0.*)`,
      f.weightFiles[0]?.name,
      'fc.weight',
    );
  const bs = (json as Record<string, unknown>).block_size;
  return {
    family: 'qwen3_5',
    role: 'drafter',
    label,
    configFile: file,
    config,
    blockSize: Number.isSafeInteger(bs) && (bs as number) > 0 ? (bs as number) : null,
    tensors: f.tensors,
    fileSet,
    digest: await checkpointDigest(f.configBytes, f.tensors),
    totalBytes,
  };
}

/**
 * The target's description with the drafter's head as its MTP head (replacing the target's own `mtp.*` head
 * when it has one: the drafter given explicitly wins). Throws a FormatError when the drafter does not fit:
 * a tensor of the wrong shape (file, tensor, found and expected), a missing or stray tensor, or config values
 * that differ from the target's (key, found and expected).
 */
export function attachQwen35Drafter(
  target: Qwen35Description,
  targetLabel: string,
  drafter: Qwen35DrafterCheckpoint,
): Qwen35Description {
  const where = `${drafter.label}: the split MTP drafter does not fit target ${targetLabel}`;
  const configDiffs = configMismatches(target.config, drafter.config);
  const configText = configDiffs.map((d) => `${drafter.configFile}: ${d}`).join('; ');
  let head: Qwen35MtpHead;
  try {
    // The target's geometry (the head reads its hidden state and shares its embedding and LM head) with the
    // drafter's own quantization (bf16 drafters are common beside 4-bit targets) and MTP settings.
    const geometry: Qwen35Config = {
      ...target.config,
      role: 'drafter',
      quantization: drafter.config.quantization,
      mtp: drafter.config.mtp,
    };
    head = describeQwen35Drafter(geometry, new TensorTable(drafter.tensors, drafter.fileSet), drafter.label);
  } catch (e) {
    if (!(e instanceof FormatError)) throw e;
    throw new FormatError(
      `${where}: ${e.message}${configText ? `; and ${configText}` : ''}`,
      e.file ?? drafter.fileSet,
      e.subject,
    );
  }
  if (configDiffs.length > 0) throw new FormatError(`${where}: ${configText}`, drafter.configFile);
  return { ...target, mtp: head, mtpUnavailable: null };
}

/** One line for output and reports: which MTP head drafts for this description. */
export function qwenMtpHeadText(d: Qwen35Description, targetLabel: string, replacedOwnHead: boolean): string {
  if (!d.mtp) return `no MTP head: ${d.mtpUnavailable ?? 'no mtp.* tensors'}`;
  if (d.mtp.source === 'target') return `${targetLabel}'s own mtp.* head drafts`;
  return replacedOwnHead
    ? `the split MTP drafter ${d.mtp.label} drafts (given as --draft, it replaces ${targetLabel}'s own mtp.* head)`
    : `the split MTP drafter ${d.mtp.label} drafts (${targetLabel} has no usable mtp.* head of its own)`;
}

/** mlx-vlm's drafter config: model_type qwen3_5_mtp with the text geometry under text_config. */
function parseDrafterConfig(json: unknown, file: string, label: string): Qwen35Config {
  const o = typeof json === 'object' && json !== null && !Array.isArray(json) ? (json as Record<string, unknown>) : {};
  const mt = o.model_type;
  if (mt === 'qwen3_5' || mt === 'qwen3_5_text')
    throw new FormatError(
      `${label}: ${file} declares model_type "${mt}", a Qwen3.5 target, not a split MTP drafter (model_type "${QWEN35_MTP_DRAFTER_TYPE}"); a checkpoint with its own mtp.* tensors drafts with them when given as --target, without --draft`,
      file,
      'model_type',
    );
  if (mt !== QWEN35_MTP_DRAFTER_TYPE)
    throw new FormatError(
      `${label}: ${file} declares model_type ${JSON.stringify(mt)}, not a Qwen3.5 MTP drafter (expected "${QWEN35_MTP_DRAFTER_TYPE}", as mlx-vlm's qwen3_5_mtp splitter writes)`,
      file,
      'model_type',
    );
  const tc = o.text_config;
  if (typeof tc !== 'object' || tc === null || Array.isArray(tc))
    throw new FormatError(
      `${label}: ${file} has no "text_config" object; a ${QWEN35_MTP_DRAFTER_TYPE} drafter carries its target's text config there (mlx-vlm's Qwen3_5MTPConfig requires it)`,
      file,
      'text_config',
    );
  return parseQwen35Config(json, file, 'drafter');
}

/** Drafter config values that must equal the target's, as "key found (target expected)". */
function configMismatches(t: Qwen35Config, d: Qwen35Config): string[] {
  const pairs: [string, number, number][] = [
    ['hidden_size', d.hidden, t.hidden],
    ['vocab_size', d.vocab, t.vocab],
    ['intermediate_size', d.intermediate, t.intermediate],
    ['num_attention_heads', d.attention.numHeads, t.attention.numHeads],
    ['num_key_value_heads', d.attention.numKvHeads, t.attention.numKvHeads],
    ['head_dim', d.attention.headDim, t.attention.headDim],
    ['rms_norm_eps', d.eps, t.eps],
    ['rope_theta', d.attention.rope.theta, t.attention.rope.theta],
    ['partial_rotary_factor', d.attention.rope.partialRotary, t.attention.rope.partialRotary],
  ];
  return pairs
    .filter(([, found, expected]) => found !== expected)
    .map(([key, found, expected]) => `text_config.${key} is ${found}, expected ${expected} (the target's)`);
}

/**
 * A folder without config.json whose weights hold `mtp.*` names is the head lifted verbatim from the HF
 * checkpoint (e.g. an `mtp.safetensors` published for vLLM): say so rather than only "no config.json".
 */
async function refuseBareHead(files: ByteSource[], label: string): Promise<void> {
  const base = (n: string) => n.slice(n.lastIndexOf('/') + 1);
  if (files.some((f) => base(f.name) === 'config.json')) return;
  for (const f of files.filter((x) => x.name.endsWith('.safetensors'))) {
    const h = await readSafetensorsHeader(f);
    const t = h.tensors.find((x) => x.name.startsWith('mtp.'));
    if (t)
      throw new FormatError(
        `${label}: no config.json, and ${f.name} holds the head as named in the HF checkpoint ("${t.name}": mtp.* names, zero-centred norms); that is not a split drafter folder this lab reads: ${SPLIT_HINT}`,
        f.name,
        t.name,
      );
  }
  // otherwise locateCheckpointFiles names what is missing
}
