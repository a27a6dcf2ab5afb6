/**
 * Synthetic Gemma 4 checkpoints (target + MTP assistant) of any geometry, in the layout mlx-vlm publishes:
 * config.json with text_config, vision_config and audio_config, quantization with its quantization_config copy and
 * per-module entries; the towers' tensors beside language_model.model.* (synthetic-towers.ts); a target's
 * tokenizer.json, tokenizer_config.json and chat_template.jinja (synthetic-tokenizer.ts). Weights are
 * deterministic pseudo-random. Nothing is materialised: each weight file is a virtual ByteSource
 * whose bytes are computed on demand from (seed, tensor, element index) by a counter-based hash, so any
 * byte range can be produced independently. That lets tests open a 31B checkpoint without a byte on disk
 * (headers only) and lets src/node/synthetic.ts stream an 11 GB 12B to disk in bounded chunks.
 *
 * Weights are random codes with bf16 scales/biases chosen so each weight has mean 0 and std 1/sqrt(in)
 * (so activations stay O(1) through any depth); norms ~1, layer_scalar ~0.95.
 */
import { bytesSource, checkRange, type ByteSource } from './bytesource.ts';
import { roundToBf16 } from './dtype.ts';
import type { AffineBits } from './quantization.ts';
import { E_SYNTH_PRESETS, type ESeriesSynth, type ESynthPreset } from './synthetic-gemma4-family-presets.ts';
import { syntheticESeries } from './synthetic-gemma4-family.ts';
import { MOE_SYNTH_PRESETS, type MoeSynth, type MoeSynthPreset } from './synthetic-gemma4-moe-presets.ts';
import type { DenseSynthGeometry } from './synthetic-geometry.ts';
import { checkMoeGeometry, moeLayer, moeQuantOverrides, moeTextConfig } from './synthetic-gemma4-moe.ts';
import { planTowers, type TowerConfigs } from './synthetic-towers.ts';
import { syntheticTokenizerFiles } from './synthetic-tokenizer.ts';

export interface SynthGeometry extends DenseSynthGeometry {
  /** E2B / E4B: per-layer inputs, KV sharing, a centroid-head assistant (planned by synthetic-gemma4-family.ts). */
  eSeries?: ESeriesSynth;
  /** 26B-A4B: router and stacked experts beside the dense MLP (planned by synthetic-gemma4-moe.ts). */
  moe?: MoeSynth;
}

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

/** MLX's default shard size is 5 GB; stay strictly under it. */
export const DEFAULT_SHARD_BYTES = 5e9;

export interface SynthOptions {
  seed?: number;
  /** Largest data section per weight file; more data is split into model-0000k-of-0000n shards + index. */
  shardBytes?: number;
}

export interface SyntheticPair {
  geometry: SynthGeometry;
  target: ByteSource[];
  assistant: ByteSource[] | null;
}

/** The files of both checkpoints (config.json, weights, index when sharded) as ByteSources. */
export function syntheticCheckpoint(g: SynthGeometry, opts: SynthOptions = {}): SyntheticPair {
  if (g.eSeries)
    return syntheticESeries({ ...g, eSeries: g.eSeries }, opts, {
      Planner,
      files,
      defaultShardBytes: DEFAULT_SHARD_BYTES,
    });
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

// ---------------------------------------------------------------- tensors

/**
 * How a tensor's elements are made: random u32 words, or bf16 (table) or f32 (table32) values drawn from a
 * 256-entry table.
 */
type Gen =
  | { kind: 'words'; seed: number }
  | { kind: 'table'; seed: number; table: Uint16Array }
  | { kind: 'table32'; seed: number; table: Float32Array }
  | { kind: 'ints'; data: Int32Array }; // exact values (an E-series assistant's token_ordering)

export interface PlannedTensor {
  name: string;
  dtype: 'U32' | 'BF16' | 'F32' | 'I32';
  shape: number[];
  byteLength: number;
  gen: Gen;
}

/** 32-bit integer hash (Wellons' lowbias32): good avalanche, a handful of ops per element. */
function hash32(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d);
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b);
  return (x ^ (x >>> 16)) >>> 0;
}

function seedOf(globalSeed: number, key: string): number {
  let h = 0x811c9dc5 ^ hash32(globalSeed >>> 0);
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return hash32(h >>> 0);
}

const bf16Bits = (x: number): number => {
  const f = new Float32Array([roundToBf16(x)]);
  return new Uint32Array(f.buffer)[0] >>> 16;
};
/** 256 bf16 values, f(u) for u evenly spread over (0, 1). */
const table = (f: (u: number) => number) => Uint16Array.from({ length: 256 }, (_, k) => bf16Bits(f((k + 0.5) / 256)));
/** The same in f32 (tensors MLX keeps in float32, such as Qwen3.5's A_log). */
const table32 = (f: (u: number) => number) => Float32Array.from({ length: 256 }, (_, k) => f((k + 0.5) / 256));
const ELEMENT_BYTES = { U32: 4, BF16: 2, F32: 4, I32: 4 } as const;

/**
 * Uniform codes over L = 2^bits levels give w = s q + b mean 0, std s sqrt((L^2-1)/12) when b = -s (L-1)/2.
 * Per group s varies by +-25% around the value giving std 1/sqrt(in); scales and biases tensors of one
 * module share a seed, so group k of both draws the same table index and each (s, b) pair stays mean-zero.
 */
function scaleBiasTables(bits: number, inF: number): { scales: Uint16Array; biases: Uint16Array } {
  const L = 2 ** bits;
  const s0 = Math.sqrt(12 / (L * L - 1)) / Math.sqrt(inF);
  const s = (u: number) => roundToBf16(s0 * (0.75 + 0.5 * u));
  return { scales: table(s), biases: table((u) => (-s(u) * (L - 1)) / 2) };
}

/** Plans tensors (names, dtypes, shapes, generators); the Qwen3.5 presets (src/format/qwen3_5/synthetic.ts) use it too. */
export class Planner {
  readonly tensors: PlannedTensor[] = [];
  constructor(private readonly seed: number) {}

  private add(name: string, dtype: PlannedTensor['dtype'], shape: number[], gen: Gen): void {
    this.tensors.push({
      name,
      dtype,
      shape,
      byteLength: shape.reduce((a, d) => a * d, 1) * ELEMENT_BYTES[dtype],
      gen,
    });
  }

  /** A float tensor of any shape whose values are f(u), u drawn uniformly per element from 256 levels. */
  values(name: string, dtype: 'BF16' | 'F32', shape: number[], f: (u: number) => number): void {
    const seed = seedOf(this.seed, name);
    this.add(
      name,
      dtype,
      shape,
      dtype === 'F32' ? { kind: 'table32', seed, table: table32(f) } : { kind: 'table', seed, table: table(f) },
    );
  }

  linear(path: string, out: number, inF: number, bits: AffineBits | null, groupSize: number): void {
    if (bits === null) {
      const a = Math.sqrt(3 / inF); // uniform +-a has std 1/sqrt(in)
      this.add(`${path}.weight`, 'BF16', [out, inF], {
        kind: 'table',
        seed: seedOf(this.seed, path),
        table: table((u) => a * (2 * u - 1)),
      });
      return;
    }
    const t = scaleBiasTables(bits, inF);
    const sb = seedOf(this.seed, `${path}:scales+biases`);
    this.add(`${path}.weight`, 'U32', [out, (inF * bits) / 32], { kind: 'words', seed: seedOf(this.seed, path) });
    this.add(`${path}.scales`, 'BF16', [out, inF / groupSize], { kind: 'table', seed: sb, table: t.scales });
    this.add(`${path}.biases`, 'BF16', [out, inF / groupSize], { kind: 'table', seed: sb, table: t.biases });
  }

  vector(name: string, size: number, center: number, spread: number): void {
    this.add(name, 'BF16', [size], {
      kind: 'table',
      seed: seedOf(this.seed, name),
      table: table((u) => center + spread * (u - 0.5)),
    });
  }
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

// ---------------------------------------------------------------- files

const json = (name: string, value: unknown) =>
  bytesSource(name, new TextEncoder().encode(JSON.stringify(value, null, 2)));

/**
 * config.json and the weight files (sharded past shardBytes, with an index) of one checkpoint folder, then `extra`
 * files (a target's tokenizer files).
 */
export function files(
  config: unknown,
  tensors: PlannedTensor[],
  shardBytes: number,
  extra: readonly ByteSource[] = [],
): ByteSource[] {
  const shards: PlannedTensor[][] = [[]];
  let used = 0;
  for (const t of tensors) {
    if (used > 0 && used + t.byteLength > shardBytes) {
      shards.push([]);
      used = 0;
    }
    shards[shards.length - 1].push(t);
    used += t.byteLength;
  }
  const out: ByteSource[] = [json('config.json', config)];
  if (shards.length === 1) return [...out, new SyntheticFile('model.safetensors', shards[0]), ...extra];
  const n = shards.length;
  const names = shards.map(
    (_, i) => `model-${String(i + 1).padStart(5, '0')}-of-${String(n).padStart(5, '0')}.safetensors`,
  );
  const weightMap: Record<string, string> = {};
  shards.forEach((s, i) =>
    s.forEach((t) => {
      weightMap[t.name] = names[i];
    }),
  );
  const total = tensors.reduce((a, t) => a + t.byteLength, 0);
  out.push(json('model.safetensors.index.json', { metadata: { total_size: total }, weight_map: weightMap }));
  return [...out, ...shards.map((s, i) => new SyntheticFile(names[i], s)), ...extra];
}

/** Elements generated per step when filling a range (bounds the scratch to 4 MB). */
const STEP = 1 << 20;

/** A safetensors file whose bytes are computed on read: header as MLX writes it (no padding), then data. */
export class SyntheticFile implements ByteSource {
  readonly size: number;
  private readonly header: Uint8Array;
  /** Absolute start offset of each tensor's data, ascending. */
  private readonly starts: number[] = [];
  /** Allocated on the first data read, so header-only use (opening a 31B in a test) costs nothing. */
  private scratch?: Uint32Array;

  constructor(
    readonly name: string,
    private readonly tensors: readonly PlannedTensor[],
  ) {
    const h: Record<string, unknown> = { __metadata__: { format: 'mlx' } };
    let off = 0;
    for (const t of tensors) {
      h[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [off, off + t.byteLength] };
      off += t.byteLength;
    }
    const text = new TextEncoder().encode(JSON.stringify(h));
    this.header = new Uint8Array(8 + text.byteLength);
    new DataView(this.header.buffer).setBigUint64(0, BigInt(text.byteLength), true);
    this.header.set(text, 8);
    let start = this.header.byteLength;
    for (const t of tensors) {
      this.starts.push(start);
      start += t.byteLength;
    }
    this.size = start;
  }

  async read(offset: number, length: number): Promise<Uint8Array> {
    const out = new Uint8Array(length);
    this.readInto(offset, out);
    return out;
  }

  /** Fills `out` with the file's bytes from `offset` (synchronous: pure computation). */
  readInto(offset: number, out: Uint8Array): void {
    checkRange(this.name, this.size, offset, out.byteLength);
    const end = offset + out.byteLength;
    let pos = offset;
    if (pos < this.header.byteLength) {
      const n = Math.min(end, this.header.byteLength) - pos;
      out.set(this.header.subarray(pos, pos + n), 0);
      pos += n;
    }
    for (let i = this.tensorAt(pos); pos < end && i < this.tensors.length; i++) {
      const t = this.tensors[i];
      const from = pos - this.starts[i];
      const n = Math.min(end - pos, t.byteLength - from);
      this.fill(t, from, out.subarray(pos - offset, pos - offset + n));
      pos += n;
    }
  }

  /** Index of the tensor containing absolute byte `pos` (binary search over starts). */
  private tensorAt(pos: number): number {
    let lo = 0;
    let hi = this.starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.starts[mid] <= pos) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  /** Writes bytes [from, from + out.length) of tensor t's data into out (any alignment). */
  private fill(t: PlannedTensor, from: number, out: Uint8Array): void {
    const es = ELEMENT_BYTES[t.dtype];
    const scratch = (this.scratch ??= new Uint32Array(STEP));
    const bytes = new Uint8Array(scratch.buffer);
    let done = 0;
    while (done < out.byteLength) {
      const byte = from + done;
      const first = Math.floor(byte / es);
      const skip = byte - first * es;
      const count = Math.min(Math.ceil((skip + out.byteLength - done) / es), (STEP * 4) / es);
      generate(t.gen, first, count, scratch);
      const n = Math.min(count * es - skip, out.byteLength - done);
      out.set(bytes.subarray(skip, skip + n), done);
      done += n;
    }
  }
}

/**
 * Elements [first, first+count) of a generator into `scratch` (u32 words, f32 values, or u16 values packed two
 * per word).
 */
function generate(gen: Gen, first: number, count: number, scratch: Uint32Array): void {
  if (gen.kind === 'ints') {
    scratch.set(new Uint32Array(gen.data.buffer, gen.data.byteOffset + 4 * first, count));
    return;
  }
  const seed = gen.seed;
  if (gen.kind === 'words') {
    for (let j = 0; j < count; j++) scratch[j] = hash32((first + j + seed) | 0);
    return;
  }
  if (gen.kind === 'table32') {
    const f32 = new Float32Array(scratch.buffer, 0, count);
    for (let j = 0; j < count; j++) f32[j] = gen.table[hash32((first + j + seed) | 0) & 255];
    return;
  }
  const u16 = new Uint16Array(scratch.buffer, 0, count);
  const tab = gen.table;
  for (let j = 0; j < count; j++) u16[j] = tab[hash32((first + j + seed) | 0) & 255];
}
