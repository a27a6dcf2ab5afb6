/**
 * A checkpoint the engine Worker holds, tagged with its model family (src/format/open-target.ts), and the
 * facts the page shows about it. Gemma 4: a target or an MTP assistant; Qwen3.5: a target, with or without its
 * own `mtp.*` head.
 */
import type { Checkpoint } from '../format/checkpoint.ts';
import type { ModelFamily } from '../format/open-target.ts';
import type { Qwen35Checkpoint } from '../format/qwen3_5/index.ts';
import type { GpuWeights } from '../model/gpu-weights.ts';
import type { QwenGpuWeights } from '../model/qwen/weights.ts';
import type { CheckpointInfo } from '../parity/report.ts';
import { checkpointInfo, qwenCheckpointInfo } from '../parity/summary.ts';

export type LoadedCheckpoint =
  | { family: 'gemma4'; ck: Checkpoint; weights: GpuWeights; loadMs: number }
  | { family: 'qwen3_5'; ck: Qwen35Checkpoint; weights: QwenGpuWeights; loadMs: number };

/** What the page's model summary adds to CheckpointInfo for a family. */
export interface FamilyFacts {
  family: ModelFamily;
  /** Qwen3.5: how many layers of each kind, e.g. "4 Gated DeltaNet (linear), 2 full attention". */
  layerKinds?: string;
  /** Qwen3.5: "own head (mtp.*, 1 layer)" when the target drafts with its own head. */
  mtpHead?: string;
  /** Qwen3.5 without a usable head: why MTP drafting is unavailable (the format layer's words). */
  mtpUnavailable?: string;
  /**
   * Gemma 4 MoE targets (26B-A4B): the routed experts beside the dense MLP, e.g. "128 experts, top 8 (width 704) beside
   * a dense MLP (2112)". Its presence also means the target takes the MoE policies (moe-grouped).
   */
  experts?: string;
}

export function loadedInfo(l: LoadedCheckpoint): CheckpointInfo {
  return l.family === 'qwen3_5' ? qwenCheckpointInfo(l.ck) : checkpointInfo(l.ck);
}

export function familyFacts(l: LoadedCheckpoint): FamilyFacts {
  if (l.family === 'gemma4') {
    const d = l.ck.description;
    const moe = d.config.moe;
    if (d.role !== 'target' || !moe) return { family: 'gemma4' };
    return {
      family: 'gemma4',
      experts: `${moe.numExperts} experts, top ${moe.topK} (width ${moe.intermediate}) beside a dense MLP (${d.intermediate})`,
    };
  }
  const d = l.ck.description;
  const linear = d.layers.filter((x) => x.type === 'linear').length;
  return {
    family: 'qwen3_5',
    layerKinds: `${linear} Gated DeltaNet (linear), ${d.layers.length - linear} full attention`,
    ...(d.mtp ? { mtpHead: `own head (mtp.*, ${d.config.mtp.numLayers || 1} layer)` } : {}),
    ...(d.mtpUnavailable ? { mtpUnavailable: d.mtpUnavailable } : {}),
  };
}

export function destroyLoaded(l: LoadedCheckpoint | undefined): void {
  l?.weights.destroy();
}
