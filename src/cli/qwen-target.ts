import { namingFolder } from './load-models.ts';
import { checkpointFamily } from '../format/open-target.ts';
import {
  attachQwen35Drafter,
  openQwen35Checkpoint,
  openQwen35Drafter,
  qwenMtpHeadText,
  QWEN35_MTP_DRAFTER_TYPE,
  type Qwen35Checkpoint,
  type Qwen35DrafterCheckpoint,
} from '../format/qwen3_5/index.ts';
import { checkpointTokenizer, type TextCodec } from '../format/tokenizer.ts';
import type { GpuContext } from '../gpu/device.ts';
import type { CheckpointInfo } from '../parity/report.ts';
import { type QwenGpuWeights, uploadQwenWeights } from '../model/qwen3_5/weights.ts';
import { nodeFolderSources } from '../node/file-source.ts';
import { nodeGpuContext } from './node-gpu.ts';
import { checkpointLabel } from './checkpoint-dir.ts';

/**
 * The Qwen3.5 branch of the commands that open a target folder: whether its config.json declares a Qwen3.5
 * model (the family dispatch the page's engine uses too, src/format/open-target.ts), and opening it with the
 * family's own opener.
 */
export async function isQwenDir(dir: string): Promise<boolean> {
  try {
    return (await checkpointFamily(await nodeFolderSources(dir))) === 'qwen3_5';
  } catch {
    return false; // no such folder: the Gemma opener says what is wrong
  }
}

/** A Qwen3.5 target as the commands use it: with the split drafter's head attached when one was given. */
export interface QwenTargetCheckpoint extends Qwen35Checkpoint {
  /** The split MTP drafter folder given as --draft, whose head replaced the target's own (if any). */
  drafter?: Qwen35DrafterCheckpoint;
  /** Which MTP head drafts, for the output (the drafter given wins over the target's own mtp.* head). */
  mtpHead: string;
}

/**
 * Opens a Qwen3.5 target folder and, with `draftDir`, a split MTP drafter folder (mlx-vlm's qwen3_5_mtp
 * layout, src/format/qwen3_5/drafter.ts) checked against it; the drafter's head then drafts.
 */
export async function openQwenTargetDir(dir: string, draftDir?: string): Promise<QwenTargetCheckpoint> {
  const label = checkpointLabel(dir);
  const ck = await namingFolder(dir, label, async () => openQwen35Checkpoint(await nodeFolderSources(dir), label));
  if (!draftDir) return { ...ck, mtpHead: qwenMtpHeadText(ck.description, ck.label, false) };
  const draftLabel = checkpointLabel(draftDir);
  const drafter = await namingFolder(draftDir, draftLabel, async () =>
    openQwen35Drafter(await nodeFolderSources(draftDir), draftLabel),
  );
  const description = await namingFolder(draftDir, draftLabel, async () =>
    attachQwen35Drafter(ck.description, ck.label, drafter),
  );
  const replaced = ck.description.mtp !== null;
  return { ...ck, description, drafter, mtpHead: qwenMtpHeadText(description, ck.label, replaced) };
}

/** The provenance entry of a split drafter (the probe records it where Gemma's assistant goes). */
export function qwenDrafterInfo(ck: QwenTargetCheckpoint): CheckpointInfo | undefined {
  const dr = ck.drafter;
  const head = ck.description.mtp;
  if (!dr || !head) return undefined;
  const l = head.layer;
  const kinds = [head.fc, l.qProj, l.kProj, l.vProj, l.oProj, l.gate, l.up, l.down].map((x) =>
    x.kind === 'affine' ? `affine ${x.bits}-bit g${x.groupSize}` : `${x.weight.dtype} dense`,
  );
  return {
    label: dr.label,
    modelType: QWEN35_MTP_DRAFTER_TYPE,
    digest: dr.digest,
    layers: 1,
    hidden: ck.description.hidden,
    heads: ck.description.config.attention.numHeads,
    window: 0,
    vocab: ck.description.vocab,
    quantization: [...new Set(kinds)].join(', '),
    bytes: dr.totalBytes,
  };
}

export interface LoadedQwenTarget {
  ctx: GpuContext;
  checkpoint: QwenTargetCheckpoint;
  weights: QwenGpuWeights;
  tokenizer?: TextCodec;
  close(): void;
}

/**
 * Opens a Qwen3.5 target folder and uploads it with its MTP head: the split drafter's when `draftDir` is given,
 * else its own when it has one (as loadModels does for Gemma and its assistant); `beforeUpload` runs in between.
 */
export async function loadQwenTarget(
  dir: string,
  draftDir?: string,
  beforeUpload?: (checkpoint: QwenTargetCheckpoint, tokenizer: TextCodec | undefined) => void,
): Promise<LoadedQwenTarget> {
  const checkpoint = await openQwenTargetDir(dir, draftDir);
  const tokenizer = await checkpointTokenizer(checkpoint);
  beforeUpload?.(checkpoint, tokenizer);
  const ctx = await nodeGpuContext();
  const weights = await uploadQwenWeights(ctx.device, checkpoint.description);
  return {
    ctx,
    checkpoint,
    weights,
    tokenizer,
    close() {
      weights.destroy();
      ctx.destroy();
    },
  };
}
