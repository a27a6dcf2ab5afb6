/**
 * A split Qwen3.5 MTP drafter folder on the page's assistant zone (docs/QWEN35.md section 8): opened with the format
 * layer's openQwen35Drafter, checked against the loaded Qwen3.5 target with attachQwen35Drafter (whose messages name
 * the file, tensor and shapes that do not fit), and only its head uploaded (uploadQwenMtpHead), so a large target is
 * not uploaded twice. Without a Qwen3.5 target the folder waits, opened but not on the GPU, and attaches when one
 * loads. The head then drafts in place of the target's own `mtp.*` head, as `generate --draft` does.
 */
import type { ByteSource } from '../format/bytesource.ts';
import { readAll } from '../format/bytesource.ts';
import { FormatError } from '../format/errors.ts';
import {
  attachQwen35Drafter,
  openQwen35Drafter,
  QWEN35_MTP_DRAFTER_TYPE,
  type Qwen35DrafterCheckpoint,
} from '../format/qwen3_5/drafter.ts';
import type { Qwen35Description } from '../format/qwen3_5/description.ts';
import type { Qwen35Checkpoint } from '../format/qwen3_5/index.ts';
import {
  uploadQwenMtpHead,
  withQwenMtpHead,
  type QwenGpuMtpHeadUpload,
  type QwenGpuWeights,
} from '../model/qwen3_5/weights.ts';
import type { CheckpointInfo } from '../parity/report.ts';
import type { CancelToken, ProgressFn } from '../util/cancel.ts';

/**
 * A split Qwen3.5 MTP drafter folder on the assistant zone (this module): opened, and attached (its head
 * on the GPU) while a Qwen3.5 target it fits is loaded; `attached` null while it waits for one.
 */
export interface LoadedDrafter {
  family: 'qwen3_5_mtp';
  ck: Qwen35DrafterCheckpoint;
  attached: AttachedHead | null;
  loadMs: number;
}

/** A drafter's head checked against a target and uploaded beside it. */
export interface AttachedHead {
  /** The target checkpoint it was checked against: it drafts for that one only. */
  target: Qwen35Checkpoint;
  /** The target's description with the drafter's head as its MTP head (attachQwen35Drafter). */
  desc: Qwen35Description;
  upload: QwenGpuMtpHeadUpload;
  /** Whether the target has an mtp.* head of its own, which this one replaces. */
  replacedOwnHead: boolean;
}

/**
 * Opens a Qwen3.5 folder dropped on the assistant zone as a split MTP drafter. A Qwen3.5 target folder there is
 * refused with where it goes instead; every other problem gets openQwen35Drafter's message.
 */
export async function openPageDrafter(sources: ByteSource[], label: string): Promise<Qwen35DrafterCheckpoint> {
  const mt = await configModelType(sources);
  if (mt === 'qwen3_5' || mt === 'qwen3_5_text')
    throw new FormatError(
      `${label}: a Qwen3.5 target (model_type "${mt}") on the MTP assistant zone. Drop it on the target zone: it drafts with its own mtp.* head. The assistant zone takes a split MTP drafter folder (model_type "${QWEN35_MTP_DRAFTER_TYPE}", as mlx-vlm's qwen3_5_mtp splitter writes it).`,
      'config.json',
      'model_type',
    );
  return openQwen35Drafter(sources, label);
}

/**
 * Checks `drafter` against `target` (throws attachQwen35Drafter's FormatError when it does not fit) and uploads its
 * head alone. The result drafts for that target only (AttachedHead.target).
 */
export async function attachPageDrafter(
  device: GPUDevice,
  target: Qwen35Checkpoint,
  drafter: Qwen35DrafterCheckpoint,
  onProgress?: ProgressFn,
  cancel?: CancelToken,
): Promise<AttachedHead> {
  const desc = attachQwen35Drafter(target.description, target.label, drafter);
  const upload = await uploadQwenMtpHead(device, desc.mtp!, onProgress, cancel);
  return { target, desc, upload, replacedOwnHead: target.description.mtp !== null };
}

/** The target's weights with the drafter's head when it is attached to that target; else the target's own. */
export function draftingWeights(
  target: { ck: Qwen35Checkpoint; weights: QwenGpuWeights },
  drafter: LoadedDrafter | undefined,
): QwenGpuWeights {
  const a = attachedTo(target.ck, drafter);
  return a ? withQwenMtpHead(target.weights, a.desc, a.upload.head) : target.weights;
}

/** The drafter's attachment when it drafts for `target`. */
export function attachedTo(target: Qwen35Checkpoint, drafter: LoadedDrafter | undefined): AttachedHead | undefined {
  return drafter?.attached?.target === target ? drafter.attached : undefined;
}

/** Where the drafter stands, for the assistant zone's summary. */
export function drafterStatus(d: LoadedDrafter): string {
  const a = d.attached;
  if (!a) return 'waiting for a Qwen3.5 target: drop one on the target zone and this head attaches to it';
  return a.replacedOwnHead
    ? `for ${a.target.label}, in place of its own mtp.* head`
    : `for ${a.target.label} (it has no mtp.* head of its own)`;
}

/** The target summary's MTP line when a drafter drafts for it. */
export function drafterHeadText(d: Qwen35DrafterCheckpoint, a: AttachedHead): string {
  return `split drafter ${d.label} (${QWEN35_MTP_DRAFTER_TYPE}${a.replacedOwnHead ? ', replaces the own mtp.* head' : ''})`;
}

/** The drafter's summary facts, and its provenance entry where a Gemma assistant's goes (as the command line's). */
export function drafterInfo(d: Qwen35DrafterCheckpoint, a: AttachedHead | null): CheckpointInfo {
  const c = d.config;
  let quantization: string;
  if (a?.desc.mtp) {
    const h = a.desc.mtp;
    const l = h.layer;
    const kinds = [h.fc, l.qProj, l.kProj, l.vProj, l.oProj, l.gate, l.up, l.down].map((x) =>
      x.kind === 'affine' ? `affine ${x.bits}-bit g${x.groupSize}` : `${x.weight.dtype} dense`,
    );
    quantization = [...new Set(kinds)].join(', ');
  } else {
    const q = c.quantization?.defaults;
    quantization = q ? `affine ${q.bits}-bit g${q.groupSize}` : `${d.tensors.get('fc.weight')?.dtype ?? '?'} dense`;
  }
  return {
    label: d.label,
    modelType: QWEN35_MTP_DRAFTER_TYPE,
    digest: d.digest,
    layers: 1,
    hidden: c.hidden,
    heads: c.attention.numHeads,
    window: 0,
    vocab: c.vocab,
    quantization,
    bytes: d.totalBytes,
  };
}

/** config.json's model_type, or undefined when there is no single readable config.json (the opener then says why). */
export async function configModelType(sources: readonly ByteSource[]): Promise<unknown> {
  const configs = sources.filter((f) => f.name === 'config.json' || f.name.endsWith('/config.json'));
  if (configs.length !== 1) return undefined;
  try {
    return (JSON.parse(new TextDecoder().decode(await readAll(configs[0]))) as { model_type?: unknown }).model_type;
  } catch {
    return undefined;
  }
}
