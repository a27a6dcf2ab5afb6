/**
 * Under a policy that predicts MLX (Policy.mlx), a failing draw's first divergence is explained by the
 * MLX kernels of the linears that stage is the first capture of: which kernel the chain (M = 1) and the
 * verify block (M = K) run there, and what pinning qmv_wide off (mlxcel MLXCEL_QMV_WIDE=0) would cost the
 * verify forward in launches. Counts only: the time is the Mac's.
 */
import type { AffineLinear, Linear, TargetDescription } from '../format/model-description.ts';
import { kernelPair, mlxKernel, type MlxMachine, type QuantShape } from '../model/mlx-dispatch.ts';
import type { Stage } from './report.ts';

const shapeOf = (x: AffineLinear): QuantShape => ({
  N: x.outFeatures,
  K: x.inFeatures,
  bits: x.bits,
  groupSize: x.groupSize,
});

/** The linears whose output a stage capture is the first to contain (target.ts forward order). */
export function stageLinears(desc: TargetDescription, layer: number | null, stage: Stage): Linear[] {
  if (layer === null) return stage === 'logits' ? [desc.embed] : [];
  const l = desc.layers[layer];
  const by: Partial<Record<Stage, (Linear | null)[]>> = {
    q: [l.qProj],
    k: [l.kProj],
    v: [l.vProj ?? l.kProj], // k_eq_v: V is the normed raw K projection
    attn: [l.oProj],
    mlp: [l.gate, l.up, l.down],
    // E-series: the per-layer input path runs after the MLP and first shows in the layer's ple capture (the
    // contribution as added); the model-level projection of the per-layer inputs, in layer 0's.
    ple: l.perLayerInput
      ? [
          ...(layer === 0 && desc.perLayer ? [desc.perLayer.modelProjection] : []),
          l.perLayerInput.gate,
          l.perLayerInput.projection,
        ]
      : [],
  };
  return (by[stage] ?? []).filter((x): x is Linear => x !== null);
}

/**
 * Every quantized linear one forward runs: each layer's projections and MLP, then the LM head; on E-series
 * targets also the per-layer inputs' projection and each layer's per-layer input gate and projection (the
 * per-layer table is a gather, not a matmul).
 */
function forwardLinears(desc: TargetDescription): AffineLinear[] {
  const all = desc.layers.flatMap((l) => [
    l.qProj,
    l.kProj,
    l.vProj,
    l.oProj,
    l.gate,
    l.up,
    l.down,
    ...(l.perLayerInput ? [l.perLayerInput.gate, l.perLayerInput.projection] : []),
  ]);
  const ple = desc.perLayer ? [desc.perLayer.modelProjection] : [];
  return [...ple, ...all, desc.embed].filter((x): x is AffineLinear => x !== null && x.kind === 'affine');
}

export interface LaunchCount {
  threadgroups: number;
  /** Times the weights of every linear are streamed, summed over the linears. */
  weightPasses: number;
}

/**
 * MLX launches for one forward of M rows as `machine` runs it (`now`) and with qmv_wide pinned off
 * (`pinned`): one dispatch per quantized linear either way (qmv takes all M rows in one grid).
 */
export function narrowPinCost(
  machine: MlxMachine,
  desc: TargetDescription,
  M: number,
): { dispatches: number; now: LaunchCount; pinned: LaunchCount } {
  const lins = forwardLinears(desc);
  const total = (m: MlxMachine) =>
    lins.reduce(
      (t, x) => {
        const c = mlxKernel(m, shapeOf(x), M);
        return { threadgroups: t.threadgroups + c.threadgroups, weightPasses: t.weightPasses + c.weightPasses };
      },
      { threadgroups: 0, weightPasses: 0 },
    );
  return { dispatches: lins.length, now: total(machine), pinned: total({ ...machine, narrowPin: true }) };
}

/** A linear's name without its layer prefix: "gate_proj", "q_proj"; the tied embedding as the LM head. */
const shortName = (x: AffineLinear) => (/embed_tokens$/.test(x.name) ? 'LM head' : x.name.split('.').pop()!);

/**
 * "MLX on M3/M4, not Ultra (applegpu_g15, g16): gate_proj, up_proj: qmv (M = 1) vs qmv_wide (M = 4); narrow
 * pin (MLXCEL_QMV_WIDE=0): ..." for a first divergence at (layer, stage) of a block of M rows (", a * b + c
 * fused" after the GPU under a +fma policy); undefined when no linear of that stage switches kernels between
 * M = 1 and M. The kernel pair depends on the chip class only through the batch limit and qmv_wide, so the
 * same divergence is blamed alike under a policy and its +fma twin.
 */
export function explainMlx(
  machine: MlxMachine,
  desc: TargetDescription,
  layer: number | null,
  stage: Stage,
  M: number,
): string | undefined {
  const affine = stageLinears(desc, layer, stage).filter((x): x is AffineLinear => x.kind === 'affine');
  const byPair = new Map<string, string[]>();
  for (const x of affine) {
    const pair = kernelPair(machine, shapeOf(x), 1, M);
    if (pair) byPair.set(pair, [...(byPair.get(pair) ?? []), shortName(x)]);
  }
  if (byPair.size === 0) return undefined;
  const pairs = [...byPair].map(([pair, names]) => `${names.join(', ')}: ${pair}`).join('; ');
  const wide = affine.some((x) => mlxKernel(machine, shapeOf(x), M).kernel === 'qmv_wide');
  const c = narrowPinCost(machine, desc, M);
  const pin = wide
    ? `; narrow pin (MLXCEL_QMV_WIDE=0): still ${c.dispatches} quantized-matmul dispatches per verify forward, ` +
      `${c.pinned.threadgroups} threadgroups instead of ${c.now.threadgroups}, ` +
      `weights streamed ${c.pinned.weightPasses} times instead of ${c.now.weightPasses}`
    : '';
  const fused = machine.fma ? ', a * b + c fused' : '';
  return `MLX on ${machine.gpu.label}${fused}: ${pairs}${pin}`;
}
