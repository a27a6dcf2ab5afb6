/**
 * `--router mlx|transformers`: the router convention of a Gemma 4 mixture-of-experts target (forward, generate,
 * compare). MLX's is the default, as MLX runs 26B-A4B; transformers' is the one the fixtures' goldens were made with.
 * A target without experts refuses it: the option would change nothing there.
 */
import type { Checkpoint } from '../format/checkpoint.ts';
import type { TargetDescription } from '../format/model-description.ts';
import { routerRefusal } from '../model/build-target.ts';
import type { GpuRouterOrder } from '../model/gemma4/moe/moe-ops.ts';
import { isMoeTarget } from '../model/gemma4/moe/moe-target.ts';
import { choice } from './args.ts';

export const ROUTER_OPTION = {
  type: 'string',
  help: "mixture-of-experts targets: the router convention, mlx (MLX's: top-k of the scores, softmax over the k, bf16 router scalar) | transformers (softmax over every expert, top-k, renormalised); default mlx",
} as const;

/** The --router given, or undefined (the target's default: MLX's on a MoE target). */
export function routerOption(values: Record<string, unknown>): GpuRouterOrder | undefined {
  return choice(values, 'router', ['mlx', 'transformers'] as const);
}

/** The refusal of --router for the folder `dir` (as the user typed it), whose target has no router. */
export function routerRefused(dir: string): Error {
  return new Error(`${dir}: ${routerRefusal('--router')}`);
}

/** A check for loadModels: refuses a --router given for a Gemma 4 target without experts, before any upload. */
export function refuseRouterWithoutExperts(
  router: GpuRouterOrder | undefined,
  dir: string,
): (target: Checkpoint) => void {
  return (target) => {
    if (router && !isMoeTarget(target.description as TargetDescription)) throw routerRefused(dir);
  };
}
