import { compareRows, type Storage } from './compare.ts';
import {
  STAGE_LABELS,
  type FirstDivergence,
  type LayerKind,
  type LensLayer,
  type StageDiff,
  type Stage,
} from './report.ts';

/**
 * Failure localization: given every captured stage of both arms (rows = block positions), find the
 * first stage and position that differ in execution order (layer by layer in the model's own stage
 * order, then final norm and logits; within a stage, position 0 first) and collect per-stage stats.
 * The stage order comes from the model: Gemma's layers are q k v attn mlp layer (TargetModel.stageOrder); a Qwen3.5
 * target's (src/model/qwen3_5/stages.ts) adds the Gated DeltaNet stages of its linear layers.
 */
export type StageCaptures = Map<string, Float32Array>;

export { captureName, finalStages, type StageStep } from '../model/stages.ts';
import type { StageStep } from '../model/stages.ts';

export function divergenceText(
  layer: number | null,
  layerKind: LayerKind | null,
  stage: Stage,
  position: number,
  labels: Record<Stage, string> = STAGE_LABELS,
): string {
  const where = layer === null ? labels[stage] : `layer ${layer} (${layerKind}) ${labels[stage]}`;
  return `first divergence: ${where} at position ${position}`;
}

export function localize(
  order: StageStep[],
  chain: StageCaptures,
  block: StageCaptures,
  rows: number,
  storage: Storage,
  /** The model family's stage labels (Gemma 4's by default; Qwen3.5's QWEN_STAGE_LABELS). */
  labels: Record<Stage, string> = STAGE_LABELS,
): { stages: StageDiff[]; first: FirstDivergence | null } {
  const stages: StageDiff[] = [];
  let first: FirstDivergence | null = null;
  for (const { layer, layerKind, stage, capture } of order) {
    const a = chain.get(capture);
    const b = block.get(capture);
    if (!a || !b) throw new Error(`capture ${capture} missing from ${a ? 'block' : 'chain'} arm`);
    const width = a.length / rows;
    const diffs = Array.from({ length: rows }, (_, r) =>
      compareRows(a.subarray(r * width, (r + 1) * width), b.subarray(r * width, (r + 1) * width), storage, r),
    );
    stages.push({ layer, layerKind, stage, rows: diffs });
    if (!first) {
      const bad = diffs.find((d) => d.bytesDiffering > 0);
      if (bad)
        first = {
          layer,
          layerKind,
          stage,
          position: bad.position,
          text: divergenceText(layer, layerKind, stage, bad.position, labels),
        };
    }
  }
  return { stages, first };
}

/** Softmax in float64. */
function softmax(row: Float32Array): Float64Array {
  let mx = -Infinity;
  for (const v of row) mx = Math.max(mx, v);
  const out = new Float64Array(row.length);
  let sum = 0;
  for (let i = 0; i < row.length; i++) sum += out[i] = Math.exp(row[i] - mx);
  for (let i = 0; i < row.length; i++) out[i] /= sum;
  return out;
}

function argmax(row: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
  return best;
}

/** KL(chain || block) and top-1 agreement of two lens logit rows. */
export function lensRow(chain: Float32Array, block: Float32Array): { kl: number; top1Agree: boolean } {
  const p = softmax(chain);
  const q = softmax(block);
  let kl = 0;
  for (let i = 0; i < p.length; i++) if (p[i] > 0) kl += p[i] * Math.log(p[i] / Math.max(q[i], 1e-300));
  return { kl: Math.max(0, kl), top1Agree: argmax(chain) === argmax(block) };
}

/** Builds the lens table from per-layer lens logits of both arms ([rows, V] each). */
export function lensLayers(chainLogits: Float32Array[], blockLogits: Float32Array[], rows: number): LensLayer[] {
  return chainLogits.map((c, layer) => {
    const b = blockLogits[layer];
    const V = c.length / rows;
    return {
      layer,
      rows: Array.from({ length: rows }, (_, r) => ({
        position: r,
        ...lensRow(c.subarray(r * V, (r + 1) * V), b.subarray(r * V, (r + 1) * V)),
      })),
    };
  });
}
