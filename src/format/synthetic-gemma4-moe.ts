/**
 * What a synthetic Gemma 4 MoE target (26B-A4B; docs/GEMMA4-FAMILY.md sections 3 and 6) adds to the dense presets'
 * MLX layout (src/format/synthetic.ts calls in here): the text_config fields and router overrides of config.json, and
 * per layer the router and stacked experts beside the dense MLP, named and shaped as test/fixtures/gemma4-moe-tiny
 * (mlx-lm `Router`, `Experts` / `SwitchGLU` after `Model.sanitize`):
 *   router.proj [E, H] (8-bit), router.scale [H], router.per_expert_scale [E],
 *   experts.switch_glu.{gate,up}_proj [E, I_moe, H], experts.switch_glu.down_proj [E, H, I_moe] (quantized as
 *   QuantizedSwitchLinear: weight [E, out, in x bits / 32], scales / biases [E, out, in / group]),
 *   pre_feedforward_layernorm_2, post_feedforward_layernorm_1, post_feedforward_layernorm_2 [H].
 * Geometries and their sources: synthetic-gemma4-moe-presets.ts.
 *
 * Weight scales as the dense presets' (mean 0, std 1/sqrt(in) per row). router.scale is centred on sqrt(H) (not 1):
 * the router multiplies the normalised residual by scale x H^-0.5, so this gives router.proj unit-RMS inputs and scores
 * of standard deviation ~1, spread enough that the top-k experts differ from row to row and are rarely near ties.
 */
import type { AffineBits } from './quantization.ts';
import type { MoeSynth } from './synthetic-gemma4-moe-presets.ts';
// Types only: synthetic.ts calls in here with its Planner, so there is no import cycle.
import type { Planner, PlannedTensor } from './synthetic-files.ts';
import type { SynthGeometry } from './synthetic-gemma4-geometry.ts';

export type MoeGeometry = SynthGeometry & { moe: MoeSynth };

/** Refuses geometries that describe no loadable MoE target, naming the preset field at fault. */
export function checkMoeGeometry(g: MoeGeometry): void {
  const m = g.moe;
  const fail = (why: string) => {
    throw new Error(`synthetic MoE geometry: ${why}`);
  };
  if (!(m.experts >= 1 && m.topK >= 1 && m.topK <= m.experts))
    fail(`top_k_experts ${m.topK} must be between 1 and num_experts ${m.experts}`);
  if (g.bits !== null && m.expertIntermediate % g.groupSize !== 0)
    fail(`the expert width ${m.expertIntermediate} is not a multiple of the group size ${g.groupSize}`);
  if (g.mlpBits !== null && g.mlpBits !== g.bits)
    fail('per-module MLP bits (--mlp-bits) are not planned for MoE presets');
}

/** The MoE fields of the target's text_config (transformers' Gemma4TextConfig names). */
export function moeTextConfig(m: MoeSynth): Record<string, unknown> {
  return {
    enable_moe_block: true,
    num_experts: m.experts,
    top_k_experts: m.topK,
    moe_intermediate_size: m.expertIntermediate,
  };
}

/** mlx-lm's quant_predicate overrides: every layer's router.proj at routerBits (none for a bf16 target). */
export function moeQuantOverrides(g: MoeGeometry): Record<string, unknown> {
  const over: Record<string, unknown> = {};
  if (g.bits === null || g.moe.routerBits === g.bits) return over;
  for (let i = 0; i < g.layers; i++)
    over[`language_model.model.layers.${i}.router.proj`] = { group_size: g.groupSize, bits: g.moe.routerBits };
  return over;
}

/** One target layer's router, experts and their norms, after the dense layer's tensors (prefix `l`). */
export function moeLayer(p: Planner, l: string, g: MoeGeometry): void {
  const m = g.moe;
  const H = g.hidden;
  const I = m.expertIntermediate;
  const E = m.experts;
  p.linear(`${l}.router.proj`, E, H, g.bits === null ? null : m.routerBits, g.groupSize);
  p.vector(`${l}.router.scale`, H, Math.sqrt(H), 0.2 * Math.sqrt(H));
  p.vector(`${l}.router.per_expert_scale`, E, 1, 0.4);
  const sw = `${l}.experts.switch_glu`;
  stacked(p, `${sw}.gate_proj`, E, I, H, g.bits, g.groupSize);
  stacked(p, `${sw}.up_proj`, E, I, H, g.bits, g.groupSize);
  stacked(p, `${sw}.down_proj`, E, H, I, g.bits, g.groupSize);
  p.vector(`${l}.pre_feedforward_layernorm_2.weight`, H, 1, 0.2);
  p.vector(`${l}.post_feedforward_layernorm_1.weight`, H, 1, 0.2);
  p.vector(`${l}.post_feedforward_layernorm_2.weight`, H, 1, 0.2);
}

/**
 * A stacked [E, out, in] SwitchLinear: planned as one [E x out, in] linear (each row's statistics depend on `in`
 * alone), then its weight / scales / biases reshaped to MLX's three axes (the bytes are the same).
 */
function stacked(
  p: Planner,
  path: string,
  E: number,
  out: number,
  inF: number,
  bits: AffineBits | null,
  group: number,
) {
  const from = p.tensors.length;
  p.linear(path, E * out, inF, bits, group);
  for (const t of p.tensors.slice(from) as PlannedTensor[]) t.shape = [E, out, t.shape[1]];
}
