/**
 * The target model of a checkpoint, whatever its family: Qwen3.5 (QwenTargetModel), Gemma 4 MoE (MoETargetModel),
 * E-series (ETargetModel) or dense (TargetModel), and the numerics policy such a target takes. The probe, the trace,
 * generation and `forward` build their targets here, so a family reaches every command through one dispatch.
 */
import type { TargetDescription } from '../format/model-description.ts';
import type { GpuContext } from '../gpu/device.ts';
import { ETargetModel, isESeriesTarget } from './gemma4/e-series/e-target.ts';
import type { GpuRouterOrder, GpuRouterScale } from './gemma4/moe/moe-ops.ts';
import { isMoeTarget, MoETargetModel } from './gemma4/moe/moe-target.ts';
import type { GpuWeights } from './gpu-weights.ts';
import type { Policy } from './policy.ts';
import { policyFor, type PolicyFamily } from './policy-registry.ts';
import { QwenTargetModel } from './qwen3_5/target.ts';
import type { QwenGpuWeights } from './qwen3_5/weights.ts';
import type { TargetOptions } from './target.ts';
import { TargetModel } from './gemma4/dense/dense-target.ts';

/** A target's uploaded weights: a Gemma 4 target's (any member of the family) or a Qwen3.5 target's. */
export type AnyTargetWeights = GpuWeights<TargetDescription> | QwenGpuWeights;
/** The engines of the Gemma 4 family. */
export type GemmaTargetModel = TargetModel | ETargetModel | MoETargetModel;
export type AnyTargetModel = GemmaTargetModel | QwenTargetModel;

export interface BuildTargetOptions extends TargetOptions {
  /**
   * Mixture-of-experts targets only: the router convention (softmax order, with its router scalar: MLX's bf16
   * product for 'mlx', transformers' for 'transformers'; moe-target.ts). Default MLX's. Refused on other targets.
   */
  router?: GpuRouterOrder;
  /** With `router`: its router scalar, when a comparison of conventions mixes them (router-compare.ts). */
  routerScale?: GpuRouterScale;
}

export function isQwenWeights(w: AnyTargetWeights): w is QwenGpuWeights {
  return 'family' in w.desc && w.desc.family === 'qwen3_5';
}

/** Whether these weights are a Gemma 4 mixture-of-experts target's (the targets that have a router). */
export function hasRouter(w: AnyTargetWeights): boolean {
  return !isQwenWeights(w) && isMoeTarget(w.desc);
}

/** The refusal of a router convention for a target without experts (`what` names the option or setting). */
export function routerRefusal(what: string): string {
  return `${what} applies to Gemma 4 mixture-of-experts targets only; this target has no router`;
}

/** The engine of the target's family, sized by `o`. */
export function buildTarget(ctx: GpuContext, w: QwenGpuWeights, o: BuildTargetOptions): QwenTargetModel;
export function buildTarget(ctx: GpuContext, w: GpuWeights<TargetDescription>, o: BuildTargetOptions): GemmaTargetModel;
export function buildTarget(ctx: GpuContext, w: AnyTargetWeights, o: BuildTargetOptions): AnyTargetModel;
export function buildTarget(ctx: GpuContext, w: AnyTargetWeights, o: BuildTargetOptions): AnyTargetModel {
  const { router, routerScale, ...sizes } = o;
  // a router convention asked of a target without one would be silently ignored
  if ((router ?? routerScale) !== undefined && !hasRouter(w))
    throw new Error(routerRefusal(`router convention "${router ?? routerScale}"`));
  if (isQwenWeights(w)) return new QwenTargetModel(ctx, w, sizes);
  if (isMoeTarget(w.desc))
    return new MoETargetModel(ctx, w, {
      ...sizes,
      ...(router ? { router } : {}),
      ...(routerScale ? { routerScale } : {}),
    });
  if (isESeriesTarget(w.desc)) return new ETargetModel(ctx, w, sizes);
  return new TargetModel(ctx, w, sizes);
}

/** Which family's policies these weights' target takes (a MoE target's are every Gemma 4 policy and its own). */
function policyFamilyOf(w: AnyTargetWeights): PolicyFamily {
  if (isQwenWeights(w)) return 'qwen3_5';
  return isMoeTarget(w.desc) ? 'gemma4-moe' : 'gemma4';
}

/** The policy `name` for this target, refused naming the targets that take it when this one does not. */
export function targetPolicy(w: AnyTargetWeights, name: string): Policy {
  return policyFor(policyFamilyOf(w), name);
}
