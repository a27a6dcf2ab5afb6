/**
 * Synthetic Qwen3.5 / Qwen3.6 dense hybrid checkpoints (Gated DeltaNet + gated full attention, with the MTP
 * head's `mtp.*` tensors) of any geometry, in the MLX layout the lab reads (docs/QWEN35.md section 2): tensors
 * under `language_model.model.` / `language_model.lm_head`, MTP under `mtp.`, linears and the embedding
 * affine-quantized, conv1d [C, K, 1], norms stored as their effective weight (about 1), A_log in f32.
 * Bytes are computed on read like the Gemma presets' (src/format/synthetic.ts, same Planner and files), so the
 * real-shape presets open from headers alone and stream to disk in bounded memory.
 *
 * Weight scales: linears as Gemma's (mean 0, std 1/sqrt(in)); A_log = ln(A) with A uniform in [1, 16] (the
 * transformers initialisation), dt_bias about 1, conv taps std 1/sqrt(K), so every gate stays in (0, 1) and
 * activations O(1).
 */
import type { ByteSource } from '../bytesource.ts';
import type { AffineBits } from '../quantization.ts';
import { DEFAULT_SHARD_BYTES, files, Planner, type SynthOptions } from '../synthetic-files.ts';
import { syntheticTokenizerFiles } from '../synthetic-tokenizer.ts';
import { planTowers, type TowerConfigs } from '../synthetic-towers.ts';

export interface QwenSynthGeometry {
  modelType: 'qwen3_5';
  vocab: number;
  hidden: number;
  intermediate: number;
  layers: number;
  /** full_attention_interval: layer i is full attention iff (i + 1) % interval == 0. */
  interval: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  linearKeyHeads: number;
  linearValueHeads: number;
  linearKeyDim: number;
  linearValueDim: number;
  convKernel: number;
  ropeTheta: number;
  partialRotary: number;
  tie: boolean;
  /** Affine bits of every linear and the embedding; null = dense bf16. */
  bits: AffineBits | null;
  groupSize: number;
  /** Write the MTP head (mtp.*), as MTP conversions keep it; false = a plain mlx_lm conversion. */
  mtp: boolean;
}

export type QwenSynthPreset = 'qwen-tiny' | 'qwen35-9b' | 'qwen36-27b';

/**
 * Sources of the real geometries (looked up with the lab's search tool; the official Qwen/... config.json files
 * themselves were not reachable from it, so each number is checked against a config.json of a checkpoint of
 * the same architecture and the official model card):
 * - qwen36-27b: the full text_config of the 27B Qwen3.5/3.6 dense architecture (hidden_size 5120,
 *   intermediate_size 17408, num_hidden_layers 64, full_attention_interval 4, num_attention_heads 24,
 *   num_key_value_heads 4, head_dim 256, linear_num_key_heads 16, linear_num_value_heads 48,
 *   linear_key_head_dim 128, linear_value_head_dim 128, linear_conv_kernel_dim 4, vocab_size 248320,
 *   rope_theta 10000000, partial_rotary_factor 0.25, tie_word_embeddings false, mtp_num_hidden_layers 1) as
 *   passed verbatim to transformers' Qwen3_5Config in a public benchmark script (search index id 55568797625);
 *   config.json at https://huggingface.co/EclipseMist/hababa/blob/main/config.json (Qwen3_5ForConditionalGeneration,
 *   5120 / 17408 / head_dim 256 / interval 4, layer_types 3 linear + 1 full); the Qwen3.6-27B model card
 *   (mirrored at https://shilu.ai/articles/qwen-hf/qwen-qwen3.6-27b: 64 layers, 16 x (3 Gated DeltaNet + 1
 *   gated attention), V 48 / QK 16 linear heads of dim 128, Q 24 / KV 4 heads of dim 256, RoPE dim 64, FFN
 *   17408, vocab 248320 padded, MTP).
 * - qwen35-9b: config.json at https://huggingface.co/khtsly/Mini-Coder/blob/main/config.json (declares
 *   model_name Qwen/Qwen3.5-9B: hidden_size 4096, intermediate_size 12288, head_dim 256, interval 4, 32
 *   layer_types in 8 groups of 3 linear + 1 full, linear heads 16 key / 32 value of dim 128, conv 4);
 *   attention heads 16, KV heads 4, vocab 248320, rope_theta 1e7, one MTP layer from the spec pages
 *   https://apxml.com/models/qwen35-9b and https://fitmygpu.com/models/qwen-3.5-9b. tie_word_embeddings was
 *   not visible in any source found: untied (an lm_head) is an assumption here; both layouts load.
 * - qwen-tiny: the geometry of the test/fixtures/qwen-tiny fixture (tools/make_qwen_fixtures.py).
 * 4-bit, group 64 is mlx_lm.convert's default quantization.
 */
export const QWEN_SYNTH_PRESETS: Readonly<Record<QwenSynthPreset, QwenSynthGeometry>> = {
  'qwen-tiny': {
    modelType: 'qwen3_5',
    vocab: 1024,
    hidden: 128,
    intermediate: 256,
    layers: 6,
    interval: 3,
    heads: 4,
    kvHeads: 2,
    headDim: 64,
    linearKeyHeads: 2,
    linearValueHeads: 4,
    linearKeyDim: 32,
    linearValueDim: 32,
    convKernel: 4,
    ropeTheta: 1e7,
    partialRotary: 0.25,
    tie: false,
    bits: 4,
    groupSize: 64,
    mtp: true,
  },
  'qwen35-9b': {
    modelType: 'qwen3_5',
    vocab: 248320,
    hidden: 4096,
    intermediate: 12288,
    layers: 32,
    interval: 4,
    heads: 16,
    kvHeads: 4,
    headDim: 256,
    linearKeyHeads: 16,
    linearValueHeads: 32,
    linearKeyDim: 128,
    linearValueDim: 128,
    convKernel: 4,
    ropeTheta: 1e7,
    partialRotary: 0.25,
    tie: false,
    bits: 4,
    groupSize: 64,
    mtp: true,
  },
  'qwen36-27b': {
    modelType: 'qwen3_5',
    vocab: 248320,
    hidden: 5120,
    intermediate: 17408,
    layers: 64,
    interval: 4,
    heads: 24,
    kvHeads: 4,
    headDim: 256,
    linearKeyHeads: 16,
    linearValueHeads: 48,
    linearKeyDim: 128,
    linearValueDim: 128,
    convKernel: 4,
    ropeTheta: 1e7,
    partialRotary: 0.25,
    tie: false,
    bits: 4,
    groupSize: 64,
    mtp: true,
  },
};

export function isQwenSynthPreset(name: string): name is QwenSynthPreset {
  return Object.hasOwn(QWEN_SYNTH_PRESETS, name);
}

export function qwenSynthGeometry(preset: QwenSynthPreset, overrides: Partial<QwenSynthGeometry> = {}) {
  if (!isQwenSynthPreset(preset))
    throw new Error(
      `unknown synthetic Qwen3.5 preset "${preset}" (expected ${Object.keys(QWEN_SYNTH_PRESETS).join(', ')})`,
    );
  const g = { ...QWEN_SYNTH_PRESETS[preset], ...overrides };
  checkQwenGeometry(g);
  return g;
}

/**
 * A preset cut to `layers` layers at its real widths (bench runs at real shapes with fewer layers): whole groups
 * of interval - 1 Gated DeltaNet layers and one full-attention layer, so the linear : full proportion and the
 * last layer's type stay the model's (qwen36-27b / qwen35-9b: 4 layers = 3 linear + 1 full).
 */
export function qwenTruncated(preset: QwenSynthPreset, layers: number, overrides: Partial<QwenSynthGeometry> = {}) {
  const base = QWEN_SYNTH_PRESETS[preset];
  const n = base.interval;
  if (!Number.isInteger(layers) || layers < n || layers % n !== 0 || layers > base.layers)
    throw new Error(
      `${preset}: ${layers} layers do not keep the ${n - 1} linear : 1 full pattern; use a multiple of ${n} up to ${base.layers}`,
    );
  return qwenSynthGeometry(preset, { ...overrides, layers });
}

/** The constraints the Qwen3.5 loader and the MLX layout put on a geometry, said before any file is made. */
export function checkQwenGeometry(g: QwenSynthGeometry): void {
  const bad: string[] = [];
  if (g.heads % g.kvHeads !== 0) bad.push(`heads ${g.heads} not a multiple of kvHeads ${g.kvHeads}`);
  if (g.linearValueHeads % g.linearKeyHeads !== 0)
    bad.push(`linearValueHeads ${g.linearValueHeads} not a multiple of linearKeyHeads ${g.linearKeyHeads}`);
  if (g.interval < 1 || g.interval > g.layers) bad.push(`interval ${g.interval} not in 1..layers (${g.layers})`);
  if (g.bits !== null) {
    // mlx_lm quantizes a linear only when its input dim divides by the group size; the presets quantize all
    for (const [what, inF] of [
      ['hidden', g.hidden],
      ['intermediate', g.intermediate],
      ['heads x headDim', g.heads * g.headDim],
      ['linearValueHeads x linearValueDim', g.linearValueHeads * g.linearValueDim],
    ] as const)
      if (inF % g.groupSize !== 0) bad.push(`${what} ${inF} not a multiple of the group size ${g.groupSize}`);
  }
  if (bad.length) throw new Error(`synthetic Qwen3.5 geometry: ${bad.join('; ')}`);
}

export function qwenLayerTypes(g: QwenSynthGeometry): string[] {
  return Array.from({ length: g.layers }, (_, i) =>
    (i + 1) % g.interval === 0 ? 'full_attention' : 'linear_attention',
  );
}

/** config.json and weight files of the target folder (the MTP head inside it when g.mtp). */
export function syntheticQwen(g: QwenSynthGeometry, opts: SynthOptions = {}): { target: ByteSource[] } {
  checkQwenGeometry(g);
  const { tensors, towers } = qwenTensors(g, opts.seed ?? 0);
  const tokenizer = syntheticTokenizerFiles('qwen3_5', g.vocab);
  return { target: files(qwenConfig(g, towers), tensors, opts.shardBytes ?? DEFAULT_SHARD_BYTES, tokenizer) };
}

function qwenConfig(g: QwenSynthGeometry, towers: TowerConfigs): Record<string, unknown> {
  const rot = Math.trunc(g.headDim * g.partialRotary);
  // M-RoPE sections over the rotary pairs (11, 11, 10 for 32 pairs as in the real configs); text uses 1-D RoPE
  const half = rot / 2;
  const s = Math.round((half * 11) / 32);
  const q = g.bits === null ? {} : { group_size: g.groupSize, bits: g.bits, mode: 'affine' };
  return {
    model_type: 'qwen3_5',
    architectures: ['Qwen3_5ForConditionalGeneration'],
    text_config: {
      model_type: 'qwen3_5_text',
      vocab_size: g.vocab,
      hidden_size: g.hidden,
      intermediate_size: g.intermediate,
      num_hidden_layers: g.layers,
      num_attention_heads: g.heads,
      num_key_value_heads: g.kvHeads,
      head_dim: g.headDim,
      hidden_act: 'silu',
      max_position_embeddings: 262144,
      rms_norm_eps: 1e-6,
      tie_word_embeddings: g.tie,
      attention_bias: false,
      attn_output_gate: true,
      full_attention_interval: g.interval,
      layer_types: qwenLayerTypes(g),
      linear_conv_kernel_dim: g.convKernel,
      linear_key_head_dim: g.linearKeyDim,
      linear_value_head_dim: g.linearValueDim,
      linear_num_key_heads: g.linearKeyHeads,
      linear_num_value_heads: g.linearValueHeads,
      rope_parameters: {
        rope_type: 'default',
        rope_theta: g.ropeTheta,
        partial_rotary_factor: g.partialRotary,
        mrope_section: [s, s, half - 2 * s],
        mrope_interleaved: true,
      },
      mtp_num_hidden_layers: g.mtp ? 1 : 0,
      mtp_use_dedicated_embeddings: false,
    },
    vision_config: towers.vision_config,
    tie_word_embeddings: g.tie,
    synthetic: true,
    ...(g.bits === null ? {} : { quantization: q, quantization_config: q }),
  };
}

const norm = (p: Planner, name: string, size: number) => p.vector(name, size, 1, 0.2);

/** A full-attention decoder layer (target layer or the MTP head's layers.0) under `l`. */
function attentionLayer(p: Planner, l: string, g: QwenSynthGeometry): void {
  const a = `${l}.self_attn`;
  const { hidden: H, headDim: hd } = g;
  p.linear(`${a}.q_proj`, 2 * g.heads * hd, H, g.bits, g.groupSize); // [query, gate] rows per head
  p.linear(`${a}.k_proj`, g.kvHeads * hd, H, g.bits, g.groupSize);
  p.linear(`${a}.v_proj`, g.kvHeads * hd, H, g.bits, g.groupSize);
  p.linear(`${a}.o_proj`, H, g.heads * hd, g.bits, g.groupSize);
  norm(p, `${a}.q_norm.weight`, hd);
  norm(p, `${a}.k_norm.weight`, hd);
}

function gatedDeltaNet(p: Planner, l: string, g: QwenSynthGeometry): void {
  const a = `${l}.linear_attn`;
  const H = g.hidden;
  const Hv = g.linearValueHeads;
  const valueDim = Hv * g.linearValueDim;
  const convDim = 2 * g.linearKeyHeads * g.linearKeyDim + valueDim;
  p.linear(`${a}.in_proj_qkv`, convDim, H, g.bits, g.groupSize);
  p.linear(`${a}.in_proj_z`, valueDim, H, g.bits, g.groupSize);
  p.linear(`${a}.in_proj_b`, Hv, H, g.bits, g.groupSize);
  p.linear(`${a}.in_proj_a`, Hv, H, g.bits, g.groupSize);
  const c = Math.sqrt(3 / g.convKernel); // uniform +-c: std 1/sqrt(K)
  p.values(`${a}.conv1d.weight`, 'BF16', [convDim, g.convKernel, 1], (u) => c * (2 * u - 1));
  p.values(`${a}.dt_bias`, 'BF16', [Hv], (u) => 0.5 + u);
  p.values(`${a}.A_log`, 'F32', [Hv], (u) => Math.log(1 + 15 * u));
  norm(p, `${a}.norm.weight`, g.linearValueDim);
  p.linear(`${a}.out_proj`, H, valueDim, g.bits, g.groupSize);
}

function decoderLayer(p: Planner, l: string, g: QwenSynthGeometry, full: boolean): void {
  const H = g.hidden;
  norm(p, `${l}.input_layernorm.weight`, H);
  if (full) attentionLayer(p, l, g);
  else gatedDeltaNet(p, l, g);
  norm(p, `${l}.post_attention_layernorm.weight`, H);
  p.linear(`${l}.mlp.gate_proj`, g.intermediate, H, g.bits, g.groupSize);
  p.linear(`${l}.mlp.up_proj`, g.intermediate, H, g.bits, g.groupSize);
  p.linear(`${l}.mlp.down_proj`, H, g.intermediate, g.bits, g.groupSize);
}

function qwenTensors(g: QwenSynthGeometry, seed: number) {
  const p = new Planner(seed);
  const pre = 'language_model.model.';
  p.linear(`${pre}embed_tokens`, g.vocab, g.hidden, g.bits, g.groupSize);
  const types = qwenLayerTypes(g);
  for (let i = 0; i < g.layers; i++) decoderLayer(p, `${pre}layers.${i}`, g, types[i] === 'full_attention');
  norm(p, `${pre}norm.weight`, g.hidden);
  if (!g.tie) p.linear('language_model.lm_head', g.vocab, g.hidden, g.bits, g.groupSize);
  if (g.mtp) {
    norm(p, 'mtp.pre_fc_norm_embedding.weight', g.hidden);
    norm(p, 'mtp.pre_fc_norm_hidden.weight', g.hidden);
    p.linear('mtp.fc', g.hidden, 2 * g.hidden, g.bits, g.groupSize);
    decoderLayer(p, 'mtp.layers.0', g, true);
    norm(p, 'mtp.norm.weight', g.hidden);
  }
  const towers = planTowers(p, 'qwen3_5', { hidden: g.hidden, bits: g.bits, groupSize: g.groupSize });
  return { tensors: p.tensors, towers };
}
