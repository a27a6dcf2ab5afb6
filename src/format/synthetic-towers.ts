/**
 * The vision and audio parts of a published multimodal folder, for `synth`: the `vision_config` / `audio_config`
 * blocks of config.json and tower tensors beside `language_model.model.*`, named as mlx-vlm saves them. Ringside
 * never loads them (src/format/tensor-names.ts skips their roots); they are there so that every synthetic folder
 * exercises that skipping, as a real folder does.
 *
 * The towers are small (hidden 64, one block, a representative subset of each block's tensors), not the real towers'
 * sizes: nothing reads their values, and a folder with them is not meant for mlx-vlm's image or audio paths. As
 * mlx-vlm's converter does, the towers stay bf16 (its quantization predicate skips "vision_tower" / "audio_tower")
 * while the embedders that project into the text model (embed_vision, embed_audio, the 12B's vision_embedder)
 * are quantized like the text model.
 *
 * Which model has which (mlx-vlm's gemma4, gemma4_unified and qwen3_5 model files; Hugging Face config.json copies):
 * - Gemma 4 31B, 26B-A4B and the tiny dense preset: a vision tower (`vision_tower.*`, `embed_vision.*`);
 *   audio_config null.
 * - Gemma 4 E2B / E4B: that vision tower and an audio tower (`audio_tower.*`, `embed_audio.*`).
 * - Gemma 4 12B (gemma4_unified): encoder-free embedders (`vision_embedder.*`, `embed_vision.*`, `embed_audio.*`).
 * - Qwen3.5 / 3.6: a vision tower (`vision_tower.*`, Qwen3-VL's blocks and merger).
 */
import type { AffineBits } from './quantization.ts';
// Types only: synthetic.ts imports this module and hands over its Planner instance.
import type { Planner } from './synthetic-files.ts';

export type TowerKind = 'gemma4' | 'gemma4-e' | 'gemma4_unified' | 'qwen3_5';

/** Width of every synthetic tower (a multiple of the group sizes the presets use, so embedders quantize). */
const W = 64;

export interface TowerConfigs {
  vision_config: Record<string, unknown>;
  audio_config: Record<string, unknown> | null;
}

interface TextSide {
  hidden: number;
  bits: AffineBits | null;
  groupSize: number;
}

/** Plans the tower tensors on `p` and returns the config blocks that describe them. */
export function planTowers(p: Planner, kind: TowerKind, text: TextSide): TowerConfigs {
  if (kind === 'gemma4_unified') return unifiedEmbedders(p, text);
  if (kind === 'qwen3_5') return { vision_config: qwenVision(p, text), audio_config: null };
  const vision = gemmaVision(p, text);
  return { vision_config: vision, audio_config: kind === 'gemma4-e' ? gemmaAudio(p, text) : null };
}

const bf16 = (p: Planner, name: string, shape: number[]) => {
  const a = Math.sqrt(3 / shape[shape.length - 1]);
  p.values(name, 'BF16', shape, (u) => a * (2 * u - 1));
};
const norm = (p: Planner, name: string, size: number) => p.vector(name, size, 1, 0.2);
/** An embedder's projection into the text model: quantized as the text model's linears are (mlx-vlm does). */
const projection = (p: Planner, path: string, text: TextSide, inF: number) =>
  p.linear(path, text.hidden, inF, inF % text.groupSize === 0 ? text.bits : null, text.groupSize);

/** Gemma 4's vision encoder (mlx-vlm gemma4/vision.py): patch embedder, transformer blocks of clippable linears. */
function gemmaVision(p: Planner, text: TextSide): Record<string, unknown> {
  const patch = 16;
  const heads = 2;
  const hd = W / heads;
  const positions = 64;
  bf16(p, 'vision_tower.patch_embedder.input_proj.weight', [W, 3 * patch * patch]);
  p.values('vision_tower.patch_embedder.position_embedding_table', 'BF16', [2, positions, W], (u) => u - 0.5);
  const l = 'vision_tower.encoder.layers.0';
  for (const x of ['q_proj', 'k_proj', 'v_proj', 'o_proj']) bf16(p, `${l}.self_attn.${x}.linear.weight`, [W, W]);
  norm(p, `${l}.self_attn.q_norm.weight`, hd);
  norm(p, `${l}.self_attn.k_norm.weight`, hd);
  bf16(p, `${l}.mlp.gate_proj.linear.weight`, [2 * W, W]);
  bf16(p, `${l}.mlp.up_proj.linear.weight`, [2 * W, W]);
  bf16(p, `${l}.mlp.down_proj.linear.weight`, [W, 2 * W]);
  for (const n of ['input', 'post_attention', 'pre_feedforward', 'post_feedforward'])
    norm(p, `${l}.${n}_layernorm.weight`, W);
  projection(p, 'embed_vision.embedding_projection', text, W);
  return {
    model_type: 'gemma4_vision',
    hidden_size: W,
    intermediate_size: 2 * W,
    num_hidden_layers: 1,
    num_attention_heads: heads,
    num_key_value_heads: heads,
    head_dim: hd,
    global_head_dim: hd,
    hidden_activation: 'gelu_pytorch_tanh',
    rms_norm_eps: 1e-6,
    patch_size: patch,
    position_embedding_size: positions,
    pooling_kernel_size: 3,
    default_output_length: 280,
    use_clipped_linears: false,
    standardize: false,
    rope_parameters: { rope_theta: 100.0, rope_type: 'default' },
  };
}

/** Gemma 4's audio encoder (mlx-vlm gemma4/audio.py): subsampling convolutions and a conformer block. */
function gemmaAudio(p: Planner, text: TextSide): Record<string, unknown> {
  const channels = [8, 4];
  const s = 'audio_tower.subsample_conv_projection';
  bf16(p, `${s}.layer0.conv.weight`, [channels[0], 3, 3, 1]);
  norm(p, `${s}.layer0.norm.weight`, channels[0]);
  bf16(p, `${s}.layer1.conv.weight`, [channels[1], 3, 3, channels[0]]);
  norm(p, `${s}.layer1.norm.weight`, channels[1]);
  bf16(p, `${s}.input_proj_linear.weight`, [W, 32 * channels[1]]); // 128 mel bins -> 32 after two stride-2 convs
  const l = 'audio_tower.layers.0';
  const clipped = (path: string, out: number, inF: number) => {
    bf16(p, `${path}.linear.weight`, [out, inF]);
    for (const [k, v] of [
      ['input_min', -8],
      ['input_max', 8],
      ['output_min', -8],
      ['output_max', 8],
    ] as const)
      p.values(`${path}.${k}`, 'F32', [], () => v);
  };
  norm(p, `${l}.feed_forward1.pre_layer_norm.weight`, W);
  clipped(`${l}.feed_forward1.ffw_layer_1`, 4 * W, W);
  clipped(`${l}.feed_forward1.ffw_layer_2`, W, 4 * W);
  for (const x of ['q_proj', 'k_proj', 'v_proj', 'post']) clipped(`${l}.self_attn.${x}`, W, W);
  bf16(p, `${l}.self_attn.relative_k_proj.weight`, [W, W]);
  p.values(`${l}.self_attn.per_dim_scale`, 'BF16', [W / 2], (u) => 0.1 * u);
  bf16(p, 'audio_tower.output_proj.weight', [W, W]);
  p.values('audio_tower.output_proj.bias', 'BF16', [W], () => 0);
  projection(p, 'embed_audio.embedding_projection', text, W);
  return {
    model_type: 'gemma4_audio',
    hidden_size: W,
    num_hidden_layers: 1,
    num_attention_heads: 2,
    hidden_act: 'silu',
    subsampling_conv_channels: channels,
    conv_kernel_size: 5,
    residual_weight: 0.5,
    attention_chunk_size: 12,
    attention_context_left: 13,
    attention_context_right: 0,
    attention_logit_cap: 50.0,
    attention_invalid_logits_value: -1e9,
    use_clipped_linears: true,
    rms_norm_eps: 1e-6,
    gradient_clipping: 1e10,
    output_proj_dims: W,
  };
}

/** Gemma 4 12B's encoder-free embedders (mlx-vlm gemma4_unified): patch projection, 2-D positions, projections. */
function unifiedEmbedders(p: Planner, text: TextSide): TowerConfigs {
  const modelPatch = 8; // the real model's is 48; a small patch keeps the projection small
  const patchDim = 3 * modelPatch * modelPatch;
  const posemb = 64;
  const v = 'vision_embedder';
  norm(p, `${v}.patch_ln1.weight`, patchDim);
  p.values(`${v}.patch_ln1.bias`, 'BF16', [patchDim], () => 0);
  projection(p, `${v}.patch_dense`, { ...text, hidden: W }, patchDim);
  p.values(`${v}.patch_dense.bias`, 'BF16', [W], () => 0);
  norm(p, `${v}.patch_ln2.weight`, W);
  p.values(`${v}.patch_ln2.bias`, 'BF16', [W], () => 0);
  p.values(`${v}.pos_embedding`, 'BF16', [posemb, 2, W], (u) => u - 0.5);
  norm(p, `${v}.pos_norm.weight`, W);
  p.values(`${v}.pos_norm.bias`, 'BF16', [W], () => 0);
  projection(p, 'embed_vision.embedding_projection', text, W);
  projection(p, 'embed_audio.embedding_projection', text, W);
  return {
    vision_config: {
      model_type: 'gemma4_unified_vision',
      patch_size: 16,
      pooling_kernel_size: 3,
      model_patch_size: modelPatch,
      mm_embed_dim: W,
      mm_posemb_size: posemb,
      num_soft_tokens: 280,
      rms_norm_eps: 1e-6,
      output_proj_dims: W,
    },
    audio_config: {
      model_type: 'gemma4_unified_audio',
      audio_samples_per_token: 640,
      audio_embed_dim: W,
      hidden_size: W,
      output_proj_dims: W,
      rms_norm_eps: 1e-6,
    },
  };
}

/** Qwen3.5's vision tower (mlx-vlm qwen3_vl/vision.py): 3-D patch convolution, blocks, patch merger. */
function qwenVision(p: Planner, text: TextSide): Record<string, unknown> {
  const patch = 16;
  const temporal = 2;
  const merge = 2;
  const positions = 64;
  const v = 'vision_tower';
  bf16(p, `${v}.patch_embed.proj.weight`, [W, temporal, patch, patch, 3]);
  p.values(`${v}.patch_embed.proj.bias`, 'BF16', [W], () => 0);
  bf16(p, `${v}.pos_embed.weight`, [positions, W]);
  const b = `${v}.blocks.0`;
  for (const n of ['norm1', 'norm2']) {
    norm(p, `${b}.${n}.weight`, W);
    p.values(`${b}.${n}.bias`, 'BF16', [W], () => 0);
  }
  bf16(p, `${b}.attn.qkv.weight`, [3 * W, W]);
  p.values(`${b}.attn.qkv.bias`, 'BF16', [3 * W], () => 0);
  bf16(p, `${b}.attn.proj.weight`, [W, W]);
  p.values(`${b}.attn.proj.bias`, 'BF16', [W], () => 0);
  bf16(p, `${b}.mlp.linear_fc1.weight`, [2 * W, W]);
  p.values(`${b}.mlp.linear_fc1.bias`, 'BF16', [2 * W], () => 0);
  bf16(p, `${b}.mlp.linear_fc2.weight`, [W, 2 * W]);
  p.values(`${b}.mlp.linear_fc2.bias`, 'BF16', [W], () => 0);
  const merged = W * merge * merge;
  norm(p, `${v}.merger.norm.weight`, W);
  p.values(`${v}.merger.norm.bias`, 'BF16', [W], () => 0);
  bf16(p, `${v}.merger.linear_fc1.weight`, [merged, merged]);
  p.values(`${v}.merger.linear_fc1.bias`, 'BF16', [merged], () => 0);
  bf16(p, `${v}.merger.linear_fc2.weight`, [text.hidden, merged]);
  p.values(`${v}.merger.linear_fc2.bias`, 'BF16', [text.hidden], () => 0);
  return {
    model_type: 'qwen3_5',
    depth: 1,
    hidden_size: W,
    intermediate_size: 2 * W,
    out_hidden_size: text.hidden,
    num_heads: 2,
    in_channels: 3,
    patch_size: patch,
    spatial_merge_size: merge,
    temporal_patch_size: temporal,
    num_position_embeddings: positions,
    deepstack_visual_indexes: [],
    hidden_act: 'gelu_pytorch_tanh',
  };
}
