/**
 * Small synthetic Qwen3.5 checkpoints for tests: config.json and an MLX-layout model.safetensors with dense F32
 * weights drawn from a seeded generator (the scales of tools/make_qwen_fixtures.py), optionally with the MTP
 * head's `mtp.*` tensors. `edit` hooks let a test break one thing (a shape, a config key) at a time.
 */
import { bytesSource, type ByteSource } from '../../src/format/bytesource.ts';
import { writeSafetensors, type TensorToWrite } from '../../src/format/safetensors-writer.ts';

export interface QwenSynthGeometry {
  vocab: number;
  hidden: number;
  inter: number;
  layers: number;
  interval: number;
  heads: number;
  kv: number;
  hd: number;
  lkHeads: number;
  lvHeads: number;
  lkDim: number;
  lvDim: number;
  conv: number;
  tie: boolean;
}

export const QWEN_SYNTH: QwenSynthGeometry = {
  vocab: 96,
  hidden: 32,
  inter: 48,
  layers: 4,
  interval: 2,
  heads: 4,
  kv: 2,
  hd: 16,
  lkHeads: 2,
  lvHeads: 4,
  lkDim: 8,
  lvDim: 8,
  conv: 4,
  tie: false,
};

/** Deterministic standard normal draws (mulberry32 + Box-Muller). */
export function normalRng(seed: number): () => number {
  let a = seed >>> 0;
  const u = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (((t ^ (t >>> 14)) >>> 0) + 0.5) / 4294967296;
  };
  return () => Math.sqrt(-2 * Math.log(u())) * Math.cos(2 * Math.PI * u());
}

export function qwenSynthConfig(g: QwenSynthGeometry): Record<string, unknown> {
  const types = Array.from({ length: g.layers }, (_, i) =>
    (i + 1) % g.interval === 0 ? 'full_attention' : 'linear_attention',
  );
  return {
    model_type: 'qwen3_5',
    tie_word_embeddings: g.tie,
    text_config: {
      model_type: 'qwen3_5_text',
      vocab_size: g.vocab,
      hidden_size: g.hidden,
      intermediate_size: g.inter,
      num_hidden_layers: g.layers,
      num_attention_heads: g.heads,
      num_key_value_heads: g.kv,
      head_dim: g.hd,
      hidden_act: 'silu',
      rms_norm_eps: 1e-6,
      tie_word_embeddings: g.tie,
      attn_output_gate: true,
      full_attention_interval: g.interval,
      layer_types: types,
      linear_conv_kernel_dim: g.conv,
      linear_key_head_dim: g.lkDim,
      linear_value_head_dim: g.lvDim,
      linear_num_key_heads: g.lkHeads,
      linear_num_value_heads: g.lvHeads,
      rope_parameters: { rope_type: 'default', rope_theta: 10000000, partial_rotary_factor: 0.25 },
      mtp_num_hidden_layers: 1,
      mtp_use_dedicated_embeddings: false,
    },
  };
}

/** Tensors by MLX name: float64 values and shapes (written as F32). */
export function qwenSynthTensors(
  g: QwenSynthGeometry,
  seed = 1,
  withMtp = true,
): Map<string, { shape: number[]; data: Float64Array }> {
  const rnd = normalRng(seed);
  const out = new Map<string, { shape: number[]; data: Float64Array }>();
  const put = (name: string, shape: number[], f: () => number) => {
    const n = shape.reduce((a, b) => a * b, 1);
    const data = new Float64Array(n);
    for (let i = 0; i < n; i++) data[i] = Math.fround(f());
    out.set(name, { shape, data });
  };
  const lin = (name: string, o: number, i: number) => put(`${name}.weight`, [o, i], () => rnd() / Math.sqrt(i));
  const norm = (name: string, n: number, scale = 1) => put(name, [n], () => scale * (1 + 0.25 * rnd()));
  const kd = g.lkHeads * g.lkDim;
  const vd = g.lvHeads * g.lvDim;
  const C = 2 * kd + vd;
  const common = (p: string) => {
    norm(`${p}.input_layernorm.weight`, g.hidden);
    norm(`${p}.post_attention_layernorm.weight`, g.hidden);
    lin(`${p}.mlp.gate_proj`, g.inter, g.hidden);
    lin(`${p}.mlp.up_proj`, g.inter, g.hidden);
    lin(`${p}.mlp.down_proj`, g.hidden, g.inter);
  };
  const attn = (p: string) => {
    lin(`${p}.self_attn.q_proj`, 2 * g.heads * g.hd, g.hidden);
    lin(`${p}.self_attn.k_proj`, g.kv * g.hd, g.hidden);
    lin(`${p}.self_attn.v_proj`, g.kv * g.hd, g.hidden);
    lin(`${p}.self_attn.o_proj`, g.hidden, g.heads * g.hd);
    norm(`${p}.self_attn.q_norm.weight`, g.hd);
    norm(`${p}.self_attn.k_norm.weight`, g.hd);
  };
  put('language_model.model.embed_tokens.weight', [g.vocab, g.hidden], rnd);
  for (let i = 0; i < g.layers; i++) {
    const p = `language_model.model.layers.${i}`;
    common(p);
    if ((i + 1) % g.interval === 0) attn(p);
    else {
      const a = `${p}.linear_attn`;
      lin(`${a}.in_proj_qkv`, C, g.hidden);
      lin(`${a}.in_proj_z`, vd, g.hidden);
      lin(`${a}.in_proj_b`, g.lvHeads, g.hidden);
      lin(`${a}.in_proj_a`, g.lvHeads, g.hidden);
      lin(`${a}.out_proj`, g.hidden, vd);
      put(`${a}.conv1d.weight`, [C, g.conv, 1], () => rnd() / Math.sqrt(g.conv));
      put(`${a}.dt_bias`, [g.lvHeads], () => 1 + 0.5 * rnd());
      put(`${a}.A_log`, [g.lvHeads], () => Math.log(0.02 + 0.98 * Math.abs(Math.tanh(rnd()))));
      norm(`${a}.norm.weight`, g.lvDim);
    }
  }
  norm('language_model.model.norm.weight', g.hidden, 3);
  if (!g.tie) lin('language_model.lm_head', g.vocab, g.hidden);
  if (withMtp) {
    norm('mtp.pre_fc_norm_embedding.weight', g.hidden);
    norm('mtp.pre_fc_norm_hidden.weight', g.hidden);
    lin('mtp.fc', g.hidden, 2 * g.hidden);
    common('mtp.layers.0');
    attn('mtp.layers.0');
    norm('mtp.norm.weight', g.hidden, 3);
  }
  return out;
}

export interface QwenSynthOptions {
  seed?: number;
  withMtp?: boolean;
  /** Edits config.json before it is written. */
  editConfig?: (c: Record<string, unknown>) => void;
  /** Edits the tensor list (rename, drop, reshape) before writing. */
  editTensors?: (t: Map<string, { shape: number[]; data: Float64Array }>) => void;
}

/** config.json + model.safetensors as ByteSources. */
export function qwenSynthFiles(g: QwenSynthGeometry = QWEN_SYNTH, opts: QwenSynthOptions = {}): ByteSource[] {
  const config = qwenSynthConfig(g);
  opts.editConfig?.(config);
  const tensors = qwenSynthTensors(g, opts.seed ?? 1, opts.withMtp ?? true);
  opts.editTensors?.(tensors);
  return [
    bytesSource('config.json', new TextEncoder().encode(JSON.stringify(config))),
    bytesSource('model.safetensors', safetensorsBytes(tensors)),
  ];
}

export function safetensorsBytes(tensors: Map<string, { shape: number[]; data: Float64Array }>): Uint8Array {
  const list: TensorToWrite[] = [...tensors].map(([name, t]) => ({
    name,
    dtype: 'F32',
    shape: t.shape,
    data: new Uint8Array(Float32Array.from(t.data).buffer),
  }));
  return writeSafetensors(list, { format: 'mlx' });
}
