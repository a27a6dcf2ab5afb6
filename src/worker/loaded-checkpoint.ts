/**
 * A checkpoint the engine Worker holds, tagged with its model family (src/format/open-target.ts), and the
 * facts the page shows about it. Gemma 4: a target or an MTP assistant; Qwen3.5: a target, with or without its
 * own `mtp.*` head, or a split MTP drafter folder on the assistant zone.
 */
import type { Checkpoint } from '../format/checkpoint.ts';
import type { DecoderLayer } from '../format/model-description.ts';
import type { ModelFamily } from '../format/open-target.ts';
import type { Qwen35Checkpoint } from '../format/qwen3_5/index.ts';
import type { GpuWeights } from '../model/gpu-weights.ts';
import type { QwenGpuWeights } from '../model/qwen3_5/weights.ts';
import type { CheckpointInfo } from '../parity/report.ts';
import { checkpointInfo, qwenCheckpointInfo } from '../parity/summary.ts';
import { fmtInt } from '../util/number-format.ts';
import { attachedTo, drafterHeadText, drafterInfo, drafterStatus, type LoadedDrafter } from './qwen-drafter.ts';

export type LoadedCheckpoint =
  | { family: 'gemma4'; ck: Checkpoint; weights: GpuWeights; loadMs: number }
  | { family: 'qwen3_5'; ck: Qwen35Checkpoint; weights: QwenGpuWeights; loadMs: number }
  | LoadedDrafter;

/** What the target zone holds (a split drafter goes on the assistant zone only). */
export type LoadedTarget = Exclude<LoadedCheckpoint, LoadedDrafter>;

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
  /**
   * Gemma 4 E-series targets (E2B / E4B): the per-layer embeddings, e.g. "64 per layer x 10 layers (table 512 x 640,
   * 1 buffer)". The table's buffer count is how the uploader split it by row ranges to fit the binding limit.
   */
  perLayerInputs?: string;
  /** The number of GPU buffers holding the per-layer table (E-series targets; more than one for an E4B-sized table). */
  perLayerTableParts?: number;
  /** E-series targets: which layers read an earlier layer's K/V, e.g. "4 of 10 (6-8 read 3, 9 reads 4); ...". */
  kvShared?: string;
  /** E-series assistants: the centroid LM head, e.g. "16 centroids, top 4 (32 tokens each: 128 scored)". */
  centroidHead?: string;
  /** Qwen3.5 targets: the label of the split MTP drafter whose head drafts for it (in place of its own). */
  mtpDrafter?: string;
  /** Split Qwen3.5 MTP drafters: which target the head drafts for, or that it waits for one. */
  drafter?: string;
}

export function loadedInfo(l: LoadedCheckpoint): CheckpointInfo {
  if (l.family === 'qwen3_5_mtp') return drafterInfo(l.ck, l.attached);
  return l.family === 'qwen3_5' ? qwenCheckpointInfo(l.ck) : checkpointInfo(l.ck);
}

/**
 * The facts of `l` for its zone's summary. `drafter`: the split MTP drafter on the assistant zone, which changes what
 * a Qwen3.5 target says about its MTP head when it is attached to it.
 */
export function familyFacts(l: LoadedCheckpoint, drafter?: LoadedDrafter): FamilyFacts {
  if (l.family === 'qwen3_5_mtp') return { family: 'qwen3_5', drafter: drafterStatus(l) };
  if (l.family === 'gemma4') {
    const d = l.ck.description;
    if (d.role === 'assistant') {
      const c = d.centroidHead;
      if (!c) return { family: 'gemma4' };
      const per = d.vocab / c.numCentroids;
      return {
        family: 'gemma4',
        centroidHead: `${fmtInt(c.numCentroids)} centroids, top ${c.topK} (${per} tokens each: ${fmtInt(c.topK * per)} of ${fmtInt(d.vocab)} scored)`,
      };
    }
    const moe = d.config.moe;
    const facts: FamilyFacts = { family: 'gemma4' };
    if (moe)
      facts.experts = `${moe.numExperts} experts, top ${moe.topK} (width ${moe.intermediate}) beside a dense MLP (${d.intermediate})`;
    const table = l.weights.perLayer?.table.weight;
    if (d.perLayer && table) {
      const rows = d.perLayer.table.weight.shape[0];
      const width = d.layers.length * d.perLayer.width;
      const n = table.parts.length;
      // The uploader splits a table larger than one binding by row ranges (E4B's 1.41 GB of codes: 2 on a 1 GiB limit).
      const where = n === 1 ? '1 buffer' : `split across ${n} buffers by row range`;
      facts.perLayerInputs = `${d.perLayer.width} per layer × ${d.layers.length} layers (table ${fmtInt(rows)} × ${fmtInt(width)}, ${where})`;
      facts.perLayerTableParts = n;
    }
    if (d.config.kvSharedLayers > 0) facts.kvShared = kvSharingText(d.layers, d.config.doubleWideMlp, d.intermediate);
    return facts;
  }
  const d = l.ck.description;
  const linear = d.layers.filter((x) => x.type === 'linear').length;
  const layerKinds = `${linear} Gated DeltaNet (linear), ${d.layers.length - linear} full attention`;
  const a = attachedTo(l.ck, drafter);
  if (a && drafter)
    return { family: 'qwen3_5', layerKinds, mtpHead: drafterHeadText(drafter.ck, a), mtpDrafter: drafter.ck.label };
  return {
    family: 'qwen3_5',
    layerKinds,
    ...(d.mtp ? { mtpHead: `own head (mtp.*, ${d.config.mtp.numLayers || 1} layer)` } : {}),
    ...(d.mtpUnavailable ? { mtpUnavailable: d.mtpUnavailable } : {}),
  };
}

/**
 * The KV-sharing structure in words: how many layers read an earlier layer's K/V, grouped by donor (the last cache
 * owner of the reader's type), and the double-wide MLP of the shared layers when the config asks for it.
 */
function kvSharingText(layers: readonly DecoderLayer[], doubleWide: boolean, intermediate: number): string {
  const readers = new Map<number, number[]>();
  for (const [i, layer] of layers.entries())
    if (layer.kvDonor !== undefined) readers.set(layer.kvDonor, [...(readers.get(layer.kvDonor) ?? []), i]);
  const shared = [...readers.values()].flat().length;
  const groups = [...readers.entries()].map(
    ([donor, r]) => `${ranges(r)} read${r.length === 1 ? 's' : ''} ${donor} (${layers[donor].type})`,
  );
  const mlp = doubleWide ? `; double-wide MLP (${2 * intermediate}) on the shared layers` : '';
  return `${shared} of ${layers.length} layers: ${groups.join(', ')}; ${layers.length - shared} own caches${mlp}`;
}

/** Sorted layer indices as ranges: [6, 7, 8] -> "6-8", [6, 8] -> "6, 8". */
function ranges(xs: readonly number[]): string {
  const out: string[] = [];
  for (let i = 0; i < xs.length; ) {
    let j = i;
    while (j + 1 < xs.length && xs[j + 1] === xs[j] + 1) j++;
    out.push(j > i ? `${xs[i]}–${xs[j]}` : `${xs[i]}`);
    i = j + 1;
  }
  return out.join(', ');
}

export function destroyLoaded(l: LoadedCheckpoint | undefined): void {
  if (l?.family === 'qwen3_5_mtp') l.attached?.upload.destroy();
  else l?.weights.destroy();
}
