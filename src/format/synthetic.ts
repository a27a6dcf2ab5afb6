/**
 * Synthetic Gemma 4 checkpoints (target + MTP assistant) of any geometry, in the layout mlx-vlm publishes:
 * config.json with text_config, vision_config and audio_config, quantization with its quantization_config copy and
 * per-module entries; the towers' tensors beside language_model.model.* (synthetic-towers.ts); a target's
 * tokenizer.json, tokenizer_config.json and chat_template.jinja (synthetic-tokenizer.ts). Weights are
 * deterministic pseudo-random. Nothing is materialised: each weight file is a virtual ByteSource
 * (synthetic-files.ts) whose bytes are computed on demand from (seed, tensor, element index) by a counter-based
 * hash, so any byte range can be produced independently. That lets tests open a 31B checkpoint without a byte on disk
 * (headers only) and lets src/node/synthetic.ts stream an 11 GB 12B to disk in bounded chunks.
 *
 * Weights are random codes with bf16 scales/biases chosen so each weight has mean 0 and std 1/sqrt(in)
 * (so activations stay O(1) through any depth); norms ~1, layer_scalar ~0.95.
 */
import type { ByteSource } from './bytesource.ts';
import type { AffineBits } from './quantization.ts';
import { E_SYNTH_PRESETS, type ESynthPreset } from './synthetic-gemma4-family-presets.ts';
import { syntheticESeries } from './synthetic-gemma4-family.ts';
import type { SynthGeometry } from './synthetic-gemma4-geometry.ts';
import { MOE_SYNTH_PRESETS, type MoeSynthPreset } from './synthetic-gemma4-moe-presets.ts';
import { DEFAULT_SHARD_BYTES, files, Planner, type PlannedTensor, type SynthOptions } from './synthetic-files.ts';
import { checkMoeGeometry, moeLayer, moeQuantOverrides, moeTextConfig } from './synthetic-gemma4-moe.ts';
import { planTowers, type TowerConfigs } from './synthetic-towers.ts';
import { syntheticTokenizerFiles } from './synthetic-tokenizer.ts';

export type { SynthGeometry };

export type SynthPreset = 'tiny' | '12b' | '31b' | ESynthPreset | MoeSynthPreset;

/** docs/MODEL.md section 1 (12b, 31b) and the tiny-a fixture (tiny). */
export const SYNTH_PRESETS: Readonly<Record<SynthPreset, SynthGeometry>> = {
  tiny: {
    modelType: 'gemma4',
    vocab: 1024,
    hidden: 256,
    intermediate: 512,
    layers: 12,
    heads: 4,
    kvHeads: 2,
    headDim: 64,
    globalKvHeads: 1,
    globalHeadDim: 128,
    window: 16,
    softcap: 30,
    bits: 4,
    groupSize: 64,
    mlpBits: 8,
    assistant: { hidden: 128, intermediate: 256, heads: 4, bits: 4 },
  },
  '12b': {
    modelType: 'gemma4_unified',
    vocab: 262144,
    hidden: 3840,
    intermediate: 15360,
    layers: 48,
    heads: 16,
    kvHeads: 8,
    headDim: 256,
    globalKvHeads: 1,
    globalHeadDim: 512,
    window: 1024,
    softcap: 30,
    bits: 4,
    groupSize: 64,
    // the published 4-bit 12B keeps its MLP projections at 8 bits (mlxcel PR #1192)
    mlpBits: 8,
    assistant: { hidden: 1024, intermediate: 8192, heads: 16, bits: 4 },
  },
  '31b': {
    modelType: 'gemma4',
    vocab: 262144,
    hidden: 5376,
    intermediate: 21504,
    layers: 60,
    heads: 32,
    kvHeads: 16,
    headDim: 256,
    globalKvHeads: 4,
    globalHeadDim: 512,
    window: 1024,
    softcap: 30,
    bits: 4,
    groupSize: 64,
    mlpBits: null,
    assistant: { hidden: 1024, intermediate: 8192, heads: 32, bits: null },
  },
  ...E_SYNTH_PRESETS,
  ...MOE_SYNTH_PRESETS,
};

export function synthGeometry(preset: SynthPreset, overrides: Partial<SynthGeometry> = {}): SynthGeometry {
  const base = Object.hasOwn(SYNTH_PRESETS, preset) ? SYNTH_PRESETS[preset] : undefined;
  if (!base)
    throw new Error(`unknown synthetic preset "${preset}" (expected ${Object.keys(SYNTH_PRESETS).join(', ')})`);
  return { ...base, ...overrides };
}

export interface SyntheticPair {
  geometry: SynthGeometry;
  target: ByteSource[];
  assistant: ByteSource[] | null;
}

/** The files of both checkpoints (config.json, weights, index when sharded) as ByteSources. */
export function syntheticCheckpoint(g: SynthGeometry, opts: SynthOptions = {}): SyntheticPair {
  if (g.eSeries) return syntheticESeries({ ...g, eSeries: g.eSeries }, opts);
  if (g.moe) checkMoeGeometry({ ...g, moe: g.moe });
  const seed = opts.seed ?? 0;
  const shard = opts.shardBytes ?? DEFAULT_SHARD_BYTES;
  const t = targetTensors(g, seed);
  const target = files(targetConfig(g, t.towers), t.tensors, shard, syntheticTokenizerFiles('gemma4', g.vocab));
  const assistant = g.assistant ? files(assistantConfig(g), assistantTensors(g, seed), shard) : null;
  return { geometry: g, target, assistant };
}

// ---------------------------------------------------------------- config.json

const ROPE = {
  sliding_attention: { rope_type: 'default', rope_theta: 10000.0 },
  full_attention: { rope_type: 'proportional', partial_rotary_factor: 0.25, rope_theta: 1000000.0 },
};

/** Five sliding then one full, repeated; the last layer always full (docs/MODEL.md section 1). */
export function layerTypes(n: number): string[] {
  return Array.from({ length: n }, (_, i) =>
    (i + 1) % 6 === 0 || i === n - 1 ? 'full_attention' : 'sliding_attention',
  );
}

function textConfig(g: SynthGeometry, asst: boolean): Record<string, unknown> {
  const a = g.assistant;
  const L = asst ? 4 : g.layers;
  return {
    vocab_size: g.vocab,
    hidden_size: asst ? a!.hidden : g.hidden,
    intermediate_size: asst ? a!.intermediate : g.intermediate,
    num_hidden_layers: L,
    num_attention_heads: asst ? a!.heads : g.heads,
    num_key_value_heads: g.kvHeads,
    head_dim: g.headDim,
    global_head_dim: g.globalHeadDim,
    num_global_key_value_heads: g.globalKvHeads,
    attention_k_eq_v: true,
    sliding_window: g.window,
    layer_types: asst
      ? ['sliding_attention', 'sliding_attention', 'sliding_attention', 'full_attention']
      : layerTypes(L),
    rms_norm_eps: 1e-6,
    final_logit_softcapping: asst ? null : g.softcap,
    hidden_activation: 'gelu_pytorch_tanh',
    hidden_size_per_layer_input: 0,
    vocab_size_per_layer_input: 0,
    num_kv_shared_layers: asst ? L : 0,
    max_position_embeddings: 131072,
    tie_word_embeddings: true,
    rope_parameters: ROPE,
    model_type: g.modelType === 'gemma4_unified' ? 'gemma4_unified_text' : 'gemma4_text',
  };
}

function quantBlock(bits: AffineBits | null, g: SynthGeometry, overrides: Record<string, unknown> = {}) {
  if (bits === null) return {};
  const q = { group_size: g.groupSize, bits, mode: 'affine', ...overrides };
  return { quantization: q, quantization_config: q };
}

function targetConfig(g: SynthGeometry, towers: TowerConfigs): Record<string, unknown> {
  const over: Record<string, unknown> = {};
  if (g.bits !== null && g.mlpBits !== null && g.mlpBits !== g.bits) {
    for (let i = 0; i < g.layers; i++) {
      for (const p of ['gate_proj', 'up_proj', 'down_proj'])
        over[`language_model.model.layers.${i}.mlp.${p}`] = { group_size: g.groupSize, bits: g.mlpBits };
    }
  }
  if (g.moe) Object.assign(over, moeQuantOverrides({ ...g, moe: g.moe }));
  const unified = g.modelType === 'gemma4_unified';
  return {
    model_type: g.modelType,
    architectures: [unified ? 'Gemma4UnifiedForConditionalGeneration' : 'Gemma4ForConditionalGeneration'],
    text_config: {
      ...textConfig(g, false),
      ...(g.moe ? moeTextConfig(g.moe) : {}),
      // the 12B attends bidirectionally within an image's soft tokens; text is causal as in every Gemma 4
      ...(unified ? { use_bidirectional_attention: 'vision' } : {}),
    },
    ...towers,
    eos_token_id: [1, 106],
    tie_word_embeddings: true,
    synthetic: true,
    ...quantBlock(g.bits, g, over),
  };
}

function assistantConfig(g: SynthGeometry): Record<string, unknown> {
  const unified = g.modelType === 'gemma4_unified';
  return {
    model_type: unified ? 'gemma4_unified_assistant' : 'gemma4_assistant',
    architectures: [unified ? 'Gemma4UnifiedAssistantForCausalLM' : 'Gemma4AssistantForCausalLM'],
    backbone_hidden_size: g.hidden,
    use_ordered_embeddings: false,
    text_config: textConfig(g, true),
    tie_word_embeddings: true,
    block_size: 4,
    synthetic: true,
    ...quantBlock(g.assistant!.bits, g),
  };
}

/** One decoder layer's tensors (MLX names), target or assistant. */
function layer(p: Planner, pre: string, i: number, g: SynthGeometry, asst: boolean): void {
  const full = asst ? i === 3 : layerTypes(g.layers)[i] === 'full_attention';
  const H = asst ? g.assistant!.hidden : g.hidden;
  const I = asst ? g.assistant!.intermediate : g.intermediate;
  const heads = asst ? g.assistant!.heads : g.heads;
  const bits = asst ? g.assistant!.bits : g.bits;
  const mlpBits = asst || bits === null ? bits : (g.mlpBits ?? bits);
  const hd = full ? g.globalHeadDim : g.headDim;
  const kv = (full ? g.globalKvHeads : g.kvHeads) * hd;
  const l = `${pre}layers.${i}`;
  const a = `${l}.self_attn`;
  p.vector(`${l}.input_layernorm.weight`, H, 1, 0.2);
  p.linear(`${a}.q_proj`, heads * hd, H, bits, g.groupSize);
  if (!asst) {
    p.linear(`${a}.k_proj`, kv, H, bits, g.groupSize);
    if (!full) p.linear(`${a}.v_proj`, kv, H, bits, g.groupSize); // k_eq_v: full layers have none
    p.vector(`${a}.k_norm.weight`, hd, 1, 0.2);
  }
  p.linear(`${a}.o_proj`, H, heads * hd, bits, g.groupSize);
  p.vector(`${a}.q_norm.weight`, hd, 1, 0.2);
  p.vector(`${l}.post_attention_layernorm.weight`, H, 1, 0.2);
  p.vector(`${l}.pre_feedforward_layernorm.weight`, H, 1, 0.2);
  p.linear(`${l}.mlp.gate_proj`, I, H, mlpBits, g.groupSize);
  p.linear(`${l}.mlp.up_proj`, I, H, mlpBits, g.groupSize);
  p.linear(`${l}.mlp.down_proj`, H, I, mlpBits, g.groupSize);
  p.vector(`${l}.post_feedforward_layernorm.weight`, H, 1, 0.2);
  if (g.moe && !asst) moeLayer(p, l, { ...g, moe: g.moe });
  p.vector(`${l}.layer_scalar`, 1, 0.95, 0.1);
}

/** The text model's tensors, then the towers' (synthetic-towers.ts) with the config blocks describing them. */
function targetTensors(g: SynthGeometry, seed: number): { tensors: PlannedTensor[]; towers: TowerConfigs } {
  const p = new Planner(seed);
  const pre = 'language_model.model.';
  p.linear(`${pre}embed_tokens`, g.vocab, g.hidden, g.bits, g.groupSize);
  for (let i = 0; i < g.layers; i++) layer(p, pre, i, g, false);
  p.vector(`${pre}norm.weight`, g.hidden, 1, 0.2);
  const towers = planTowers(p, g.modelType === 'gemma4_unified' ? 'gemma4_unified' : 'gemma4', {
    hidden: g.hidden,
    bits: g.bits,
    groupSize: g.groupSize,
  });
  return { tensors: p.tensors, towers };
}

function assistantTensors(g: SynthGeometry, seed: number): PlannedTensor[] {
  const a = g.assistant!;
  const p = new Planner(seed ^ 0x5a5a5a5a);
  p.linear('model.embed_tokens', g.vocab, a.hidden, a.bits, g.groupSize);
  for (let i = 0; i < 4; i++) layer(p, 'model.', i, g, true);
  p.vector('model.norm.weight', a.hidden, 1, 0.2);
  p.linear('pre_projection', a.hidden, 2 * g.hidden, a.bits, g.groupSize);
  p.linear('post_projection', g.hidden, a.hidden, a.bits, g.groupSize);
  return p.tensors;
}
