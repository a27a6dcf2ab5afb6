/**
 * Scalars the Gemma 4 family multiplies into activations (docs/GEMMA4-FAMILY.md, "bf16 constants").
 * MLX multiplies a Python float into a bf16 array, so the float is first made a bf16 array: the constant
 * is its bf16 rounding. transformers multiplies the float in the op's compute type (f32 on GPU, the model
 * dtype in float64 runs). The fixtures of tools/make_gemma4_family_fixtures.py set the bf16 values in
 * transformers too (golden.json `constants`), so 'mlx' is the default everywhere.
 */
import { roundBf16 } from './bf16.ts';

export type ConstantMode = 'mlx' | 'exact';

/** `x` as MLX uses it when it multiplies a bf16 array (mode 'mlx'), or `x` itself ('exact'). */
export function familyConstant(x: number, mode: ConstantMode = 'mlx'): number {
  return mode === 'mlx' ? roundBf16(x) : x;
}

export interface FamilyConstants {
  /** sqrt(H): token embedding scale (also the assistant's input embedding scale). */
  embedScale: number;
  /** sqrt(P): the per-layer embedding table scale (16 for P = 256, exact in bf16). */
  pleTableScale: number;
  /** H^-0.5: scale of per_layer_model_projection's output. */
  pleProjectionScale: number;
  /** 2^-0.5: scale of (projection + table) (0.70703125 in bf16). */
  pleInputScale: number;
  /** H^-0.5: the router's root size (MLX multiplies it into router.scale). */
  routerRootSize: number;
}

/** Every family constant for a hidden size H and per-layer width P (P = 0: no PLE). */
export function familyConstants(hidden: number, ple: number, mode: ConstantMode = 'mlx'): FamilyConstants {
  const c = (x: number) => familyConstant(x, mode);
  return {
    embedScale: c(Math.sqrt(hidden)),
    pleTableScale: ple > 0 ? c(Math.sqrt(ple)) : 0,
    pleProjectionScale: c(hidden ** -0.5),
    pleInputScale: c(2 ** -0.5),
    routerRootSize: c(hidden ** -0.5),
  };
}
