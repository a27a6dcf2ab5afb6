/**
 * The bench's end-to-end model for any synthetic preset: the preset's real widths (hidden, heads, vocabulary,
 * MLP, experts, Gated DeltaNet shapes) with fewer layers, cut so that the family's structure stays valid, generated
 * in memory and opened and uploaded the way a checkpoint folder is (src/format/open-target.ts picks the family
 * from config.json). The engine is then built by src/model/generation-setup.ts, as `generate` builds it.
 *
 * Layer counts: dense and MoE presets take any count (default 2); E-series presets are cut in whole periods of
 * sliding + full layers with at least one owning and one KV-shared period (synthetic-gemma4-family-presets.ts
 * eSeriesTruncated; default the smallest, E2B 10, E4B 12); Qwen3.5 presets in whole linear : full groups
 * (qwenTruncated; default one group, 3 linear + 1 full). Browser-safe.
 */
import type { ByteSource } from '../format/bytesource.ts';
import type { TargetDescription } from '../format/model-description.ts';
import { openFamilyCheckpoint } from '../format/open-target.ts';
import {
  isQwenSynthPreset,
  QWEN_SYNTH_PRESETS,
  qwenTruncated,
  type QwenSynthPreset,
  syntheticQwen,
} from '../format/qwen3_5/synthetic.ts';
import { eSeriesTruncated, isESynthPreset } from '../format/synthetic-gemma4-family-presets.ts';
import {
  SYNTH_PRESETS,
  type SynthGeometry,
  type SynthPreset,
  synthGeometry,
  syntheticCheckpoint,
} from '../format/synthetic.ts';
import type { GpuContext } from '../gpu/device.ts';
import type { GenerationWeights } from '../model/generation-setup.ts';
import { uploadWeights } from '../model/gpu-weights.ts';
import { uploadQwenWeights } from '../model/qwen3_5/weights.ts';
import { checkpointInfo, qwenCheckpointInfo } from '../parity/summary.ts';
import type { CheckpointInfo } from '../parity/report.ts';

export type E2EPreset = SynthPreset | QwenSynthPreset;

export const E2E_PRESETS: readonly E2EPreset[] = [
  ...(Object.keys(SYNTH_PRESETS) as SynthPreset[]),
  ...(Object.keys(QWEN_SYNTH_PRESETS) as QwenSynthPreset[]),
];

export function isE2EPreset(name: string): name is E2EPreset {
  return (E2E_PRESETS as readonly string[]).includes(name);
}

/** The smallest layer count that keeps the preset's structure (dense and MoE: 2, as the 12B default). */
export function defaultE2ELayers(preset: E2EPreset): number {
  if (isQwenSynthPreset(preset)) return QWEN_SYNTH_PRESETS[preset].interval;
  const g = SYNTH_PRESETS[preset];
  if (isESynthPreset(preset)) return Math.min(g.layers, 2 * (g.eSeries!.slidingPerFull + 1));
  return Math.min(g.layers, 2);
}

export interface E2EModel {
  family: GenerationWeights['family'];
  /** "synthetic <model type> <preset> geometry, N layers". */
  label: string;
  layerTypes: string[];
  vocab: number;
  weights: GenerationWeights;
  weightBytes: number;
  /** What the probe's report says about the target. */
  info: CheckpointInfo;
  /** The Gemma 4 description (decode traffic is modelled for dense Gemma targets only); null for Qwen3.5. */
  gemma: TargetDescription | null;
  destroy(): void;
}

/** Throws (with the valid counts) when `layers` breaks the preset's family structure; generates nothing. */
export function checkE2ELayers(preset: E2EPreset, layers: number): void {
  if (isQwenSynthPreset(preset)) qwenTruncated(preset, layers);
  else if (isESynthPreset(preset)) eSeriesTruncated(preset, layers);
  else if (!Number.isInteger(layers) || layers < 1) throw new Error(`${preset}: layers must be a positive integer`);
}

/** Geometry and files of the preset cut to `layers` (refused with the reason when the cut breaks the family). */
function synthesize(
  preset: E2EPreset,
  layers: number,
  vocab: number | undefined,
  seed: number,
): { files: ByteSource[]; modelType: string } {
  const v = vocab ? { vocab } : {};
  if (isQwenSynthPreset(preset)) {
    // The MTP head is left out: the bench times the target's chain token and verify block only.
    const g = qwenTruncated(preset, layers, { ...v, mtp: false });
    return { files: syntheticQwen(g, { seed }).target, modelType: g.modelType };
  }
  if (!Object.hasOwn(SYNTH_PRESETS, preset))
    throw new Error(`unknown bench preset "${preset}" (expected ${E2E_PRESETS.join(', ')})`);
  const g: SynthGeometry = isESynthPreset(preset)
    ? { ...eSeriesTruncated(preset, layers), ...v, assistant: null }
    : synthGeometry(preset, { layers, ...v, assistant: null });
  return { files: syntheticCheckpoint(g, { seed }).target, modelType: g.modelType };
}

/** Generates, opens (by family, from config.json) and uploads the preset's target cut to `layers`. */
export async function buildE2EModel(
  ctx: GpuContext,
  preset: E2EPreset,
  layers: number,
  o: { vocab?: number; seed?: number } = {},
): Promise<E2EModel> {
  const { files, modelType } = synthesize(preset, layers, o.vocab, o.seed ?? 0);
  const opened = await openFamilyCheckpoint(files, `synthetic ${preset} x${layers}`);
  const label = `synthetic ${modelType} ${preset} geometry, ${layers} layer${layers === 1 ? '' : 's'}`;
  if (opened.family === 'qwen3_5') {
    const ck = opened.checkpoint;
    const w = await uploadQwenWeights(ctx.device, ck.description);
    return {
      family: 'qwen3_5',
      label,
      layerTypes: ck.description.layers.map((l) => l.type),
      vocab: ck.description.vocab,
      weights: { family: 'qwen3_5', target: w },
      weightBytes: w.bytes,
      info: qwenCheckpointInfo(ck),
      gemma: null,
      destroy: () => w.destroy(),
    };
  }
  const ck = opened.checkpoint;
  const desc = ck.description as TargetDescription;
  const w = await uploadWeights(ctx.device, desc);
  return {
    family: 'gemma4',
    label,
    layerTypes: desc.layers.map((l) => l.type),
    vocab: desc.vocab,
    weights: { family: 'gemma4', target: w },
    weightBytes: w.bytes,
    info: checkpointInfo(ck),
    gemma: desc,
    destroy: () => w.destroy(),
  };
}
