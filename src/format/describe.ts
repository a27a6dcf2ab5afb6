import type { ModelConfig } from './config.ts';
import { isFloatDtype, roundToBf16 } from './dtype.ts';
import { FormatError, fmtShape } from './errors.ts';
import { mlpWidth } from './kv-sharing.ts';
import type {
  AssistantDescription,
  CentroidHead,
  DecoderLayer,
  ExpertsLinear,
  MoeBlock,
  PerLayerEmbedding,
  Linear,
  ModelDescription,
  TargetDescription,
} from './model-description.ts';
import { quantParamsFor } from './quantization.ts';
import type { TensorRef } from './safetensors.ts';

/**
 * Normalised-name view of a checkpoint's tensors that records which ones the description used, so that
 * leftovers (a tensor the engine would silently ignore) can be reported.
 */
export class TensorTable {
  private readonly used = new Set<string>();
  constructor(
    readonly byName: ReadonlyMap<string, TensorRef>,
    /** For messages: "model.safetensors" or "model-00001-of-00002.safetensors, ...". */
    readonly fileSet: string,
  ) {}

  has(name: string): boolean {
    return this.byName.has(name);
  }

  /** The tensor, which must exist, be F32/F16/BF16 and have exactly `shape`; `what` describes it in errors. */
  take(name: string, shape: readonly number[], what = 'a float tensor'): TensorRef {
    const t = this.byName.get(name);
    if (!t)
      throw new FormatError(
        `missing tensor "${name}" (${what} of shape ${fmtShape(shape)}) in ${this.fileSet}`,
        undefined,
        name,
      );
    if (!isFloatDtype(t.dtype)) {
      throw new FormatError(
        `${t.file.name}: tensor "${t.name}" should be F32, F16 or BF16 (${what}) but is ${t.dtype}`,
        t.file.name,
        t.name,
      );
    }
    checkShape(t, shape, what);
    this.used.add(name);
    return t;
  }

  /** An integer tensor (I32 or I64) of exactly `shape`, e.g. the centroid head's token_ordering. */
  takeInt(name: string, shape: readonly number[], what: string): TensorRef {
    const t = this.byName.get(name);
    if (!t)
      throw new FormatError(
        `missing tensor "${name}" (${what}, I32 or I64 of shape ${fmtShape(shape)}) in ${this.fileSet}`,
        undefined,
        name,
      );
    if (t.dtype !== 'I32' && t.dtype !== 'I64')
      throw new FormatError(
        `${t.file.name}: tensor "${t.name}" should be I32 or I64 (${what}) but is ${t.dtype}`,
        t.file.name,
        t.name,
      );
    checkShape(t, shape, what);
    this.used.add(name);
    return t;
  }

  /**
   * Marks every tensor of these modules as used without reading it: tensors a checkpoint may or may not carry
   * and the model never uses (k/v projections of KV-shared layers, which mlx-lm's sanitize drops and
   * transformers lists in _keys_to_ignore_on_load_unexpected). Returns how many there were.
   */
  ignoreModules(paths: readonly string[]): number {
    let n = 0;
    for (const name of this.byName.keys())
      if (paths.some((p) => name === p || name.startsWith(`${p}.`))) {
        this.used.add(name);
        n++;
      }
    return n;
  }

  /** Marks a tensor as used without checks (e.g. the U32 weight of an affine linear, checked by the caller). */
  takeRaw(name: string): TensorRef | undefined {
    const t = this.byName.get(name);
    if (t) this.used.add(name);
    return t;
  }

  leftovers(): string[] {
    return [...this.byName.keys()].filter((n) => !this.used.has(n));
  }
}

function checkShape(t: TensorRef, shape: readonly number[], what: string): void {
  if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
    throw new FormatError(
      `${t.file.name}: tensor "${t.name}" has shape ${fmtShape(t.shape)}, expected ${fmtShape(shape)} (${what})`,
      t.file.name,
      t.name,
    );
  }
}

/**
 * A linear [out, in]: affine-quantized iff `${path}.scales` exists, else dense. `lead`: leading dimensions of a
 * stack of linears in one tensor (MLX SwitchLinear experts: [E]); the Linear then describes one of them.
 */
export function takeLinear(
  table: TensorTable,
  config: Pick<ModelConfig, 'quantization'>,
  path: string,
  out: number,
  inF: number,
  lead: readonly number[] = [],
): Linear {
  const wName = `${path}.weight`;
  if (!table.has(`${path}.scales`)) {
    // Packed codes or biases without scales: the scales are what is missing, not a float dense weight.
    const w = table.byName.get(wName);
    const packed = w?.dtype === 'U32';
    if (packed || table.has(`${path}.biases`)) {
      const q =
        w && config.quantization ? quantParamsFor(config.quantization, w.name.slice(0, -'.weight'.length)) : null;
      const shape =
        q && inF % q.groupSize === 0
          ? `, group size ${q.groupSize} of shape ${fmtShape([...lead, out, inF / q.groupSize])}`
          : '';
      throw new FormatError(
        `missing tensor "${path}.scales" (scales of ${path}${shape}; ${packed ? `"${wName}" holds packed U32 codes` : `"${path}.biases" exists`}) in ${table.fileSet}`,
        undefined,
        `${path}.scales`,
      );
    }
    const weight = table.take(wName, [...lead, out, inF], `dense weight of ${path}`);
    return { kind: 'dense', name: path, outFeatures: out, inFeatures: inF, weight };
  }
  const w = table.takeRaw(wName);
  if (!w)
    throw new FormatError(
      `missing tensor "${wName}" (packed U32 weight; "${path}.scales" exists) in ${table.fileSet}`,
      undefined,
      wName,
    );
  const file = w.file.name;
  const moduleInFile = w.name.slice(0, -'.weight'.length);
  const q = config.quantization;
  if (!q)
    throw new FormatError(
      `${file}: "${path}.scales" exists (quantized weights) but config.json has no "quantization" block`,
      file,
      w.name,
    );
  const p = quantParamsFor(q, moduleInFile);
  if (!p)
    throw new FormatError(
      `${file}: config.json marks "${moduleInFile}" unquantized but "${path}.scales" exists`,
      file,
      w.name,
    );
  const { bits, groupSize } = p;
  if (inF % groupSize !== 0 || (inF * bits) % 32 !== 0) {
    throw new FormatError(
      `${file}: "${moduleInFile}" has ${inF} input features, not a multiple of group size ${groupSize} and of ${32 / gcd(32, bits)} (for ${bits}-bit packing)`,
      file,
      w.name,
    );
  }
  if (w.dtype !== 'U32')
    throw new FormatError(
      `${file}: tensor "${w.name}" should be U32 packed ${bits}-bit codes but is ${w.dtype}`,
      file,
      w.name,
    );
  const packedCols = (inF * bits) / 32;
  const expected = [...lead, out, packedCols];
  if (w.shape.length !== expected.length || w.shape.some((d, i) => d !== expected[i])) {
    throw new FormatError(
      `${file}: tensor "${w.name}" has shape ${fmtShape(w.shape)}, expected ${fmtShape(expected)} (${lead.length ? `${lead.join(' x ')} x ` : ''}${out} x ${inF} at ${bits} bits${bitsHint(w.shape.slice(lead.length), out, inF)})`,
      file,
      w.name,
    );
  }
  const groups = inF / groupSize;
  const hint = groupHint(table.byName.get(`${path}.scales`)?.shape.slice(lead.length), out, inF, groups);
  const scales = table.take(
    `${path}.scales`,
    [...lead, out, groups],
    `scales of ${path}, group size ${groupSize}${hint}`,
  );
  const biases = table.take(
    `${path}.biases`,
    [...lead, out, groups],
    `biases of ${path}, group size ${groupSize}${hint}`,
  );
  return { kind: 'affine', name: path, outFeatures: out, inFeatures: inF, bits, groupSize, weight: w, scales, biases };
}

/** Says which bit width the packed shape would fit, to make a wrong quantization config obvious. */
function bitsHint(shape: readonly number[], out: number, inF: number): string {
  if (shape.length !== 2 || shape[0] !== out) return '';
  const b = (shape[1] * 32) / inF;
  return Number.isInteger(b) ? `; the stored shape fits ${b} bits — check config.json "quantization"` : '';
}

/** Says which group size the stored scales would fit, to make a wrong group_size obvious. */
function groupHint(shape: readonly number[] | undefined, out: number, inF: number, groups: number): string {
  if (shape?.length !== 2 || shape[0] !== out || shape[1] === groups || inF % shape[1] !== 0) return '';
  return `; the stored shape fits group size ${inF / shape[1]} — check config.json "quantization"`;
}

function gcd(a: number, b: number): number {
  return b === 0 ? a : gcd(b, a % b);
}

function takeLayer(table: TensorTable, c: ModelConfig, i: number, assistant: boolean): DecoderLayer {
  const g = c.layers[i];
  const H = c.hidden;
  const p = `layers.${i}`;
  const a = `${p}.self_attn`;
  const qDim = g.numHeads * g.headDim;
  const kvDim = g.numKvHeads * g.headDim;
  const norm = (n: string, size: number) => table.take(n, [size], 'norm weight');
  const inputNorm = norm(`${p}.input_layernorm.weight`, H);
  const qProj = takeLinear(table, c, `${a}.q_proj`, qDim, H);
  let kProj: Linear | null = null;
  let vProj: Linear | null = null;
  let kNorm = null;
  const kvModules = [`${a}.k_proj`, `${a}.v_proj`, `${a}.k_norm`];
  if (g.kvDonor !== undefined) {
    // KV-shared: reads layer kvDonor's K/V; k/v projections may be present (transformers checkpoints) or not (mlx-lm).
    table.ignoreModules(kvModules);
  } else if (!assistant) {
    if (!table.has(`${a}.k_proj.weight`))
      throw new FormatError(
        `missing tensor "${a}.k_proj.weight" in ${table.fileSet}: layer ${i} has no K projection, which only a KV-shared layer may lack, and config.json makes ${c.kvSharedLayers === 0 ? 'no layer KV-shared (num_kv_shared_layers is 0 or absent)' : `only layers ${c.numLayers - c.kvSharedLayers}.. KV-shared (num_kv_shared_layers = ${c.kvSharedLayers})`}`,
        undefined,
        `${a}.k_proj.weight`,
      );
    kProj = takeLinear(table, c, `${a}.k_proj`, kvDim, H);
    if (!g.kEqV) vProj = takeLinear(table, c, `${a}.v_proj`, kvDim, H);
    kNorm = norm(`${a}.k_norm.weight`, g.headDim);
  }
  const oProj = takeLinear(table, c, `${a}.o_proj`, H, qDim);
  const qNorm = norm(`${a}.q_norm.weight`, g.headDim);
  const I = mlpWidth(i, c.numLayers, c.kvSharedLayers, c.intermediate, c.doubleWideMlp);
  const ple = c.perLayerInput;
  const perLayerInput = ple
    ? {
        gate: takeLinear(table, c, `${p}.per_layer_input_gate`, ple.width, H),
        projection: takeLinear(table, c, `${p}.per_layer_projection`, H, ple.width),
        postNorm: norm(`${p}.post_per_layer_input_norm.weight`, H),
      }
    : undefined;
  return {
    index: i,
    type: g.type,
    headDim: g.headDim,
    numHeads: g.numHeads,
    numKvHeads: g.numKvHeads,
    kEqV: g.kEqV,
    rope: g.rope,
    ...(g.kvDonor !== undefined ? { kvDonor: g.kvDonor } : {}),
    ...(perLayerInput ? { perLayerInput } : {}),
    ...(c.moe ? { moe: takeMoeBlock(table, c, i) } : {}),
    inputNorm,
    qProj,
    kProj,
    vProj,
    oProj,
    qNorm,
    kNorm,
    postAttnNorm: norm(`${p}.post_attention_layernorm.weight`, H),
    preFfNorm: norm(`${p}.pre_feedforward_layernorm.weight`, H),
    gate: takeLinear(table, c, `${p}.mlp.gate_proj`, I, H),
    up: takeLinear(table, c, `${p}.mlp.up_proj`, I, H),
    down: takeLinear(table, c, `${p}.mlp.down_proj`, H, I),
    postFfNorm: norm(`${p}.post_feedforward_layernorm.weight`, H),
    layerScalar: table.take(`${p}.layer_scalar`, [1], 'layer scalar'),
  };
}

/** Layer i's router and experts (MLX layout: mlx-lm's sanitize splits transformers' gate_up_proj). */
function takeMoeBlock(table: TensorTable, c: ModelConfig, i: number): MoeBlock {
  const moe = c.moe!;
  const H = c.hidden;
  const E = moe.numExperts;
  const I = moe.intermediate;
  const p = `layers.${i}`;
  if (table.has(`${p}.experts.gate_up_proj`) || table.has(`${p}.experts.gate_up_proj.weight`))
    throw new FormatError(
      `${table.fileSet}: layer ${i} stores its experts in transformers' layout ("${p}.experts.gate_up_proj" [E, 2 x I, hidden]); this engine reads MLX's split layout ("${p}.experts.switch_glu.gate_proj" / "up_proj" / "down_proj"): convert the checkpoint with mlx-lm`,
      undefined,
      `${p}.experts.gate_up_proj`,
    );
  const experts = (name: string, out: number, inF: number): ExpertsLinear => ({
    numExperts: E,
    stacked: takeLinear(table, c, `${p}.experts.switch_glu.${name}`, out, inF, [E]),
  });
  const norm = (n: string) => table.take(`${p}.${n}.weight`, [H], 'norm weight');
  return {
    numExperts: E,
    topK: moe.topK,
    routerProj: takeLinear(table, c, `${p}.router.proj`, E, H),
    routerScale: table.take(`${p}.router.scale`, [H], 'router scale'),
    perExpertScale: table.take(`${p}.router.per_expert_scale`, [E], 'router per-expert scale'),
    gate: experts('gate_proj', I, H),
    up: experts('up_proj', I, H),
    down: experts('down_proj', H, I),
    preFfNorm2: norm('pre_feedforward_layernorm_2'),
    postFfNorm1: norm('post_feedforward_layernorm_1'),
    postFfNorm2: norm('post_feedforward_layernorm_2'),
  };
}

/** The per-layer embedding table, projection and norm of an E-series target; a stray table is an error. */
function takePerLayerEmbedding(table: TensorTable, c: ModelConfig): PerLayerEmbedding | undefined {
  const ple = c.perLayerInput;
  if (!ple) {
    if (table.has('embed_tokens_per_layer.weight'))
      throw new FormatError(
        `${table.fileSet}: the checkpoint has per-layer embeddings ("embed_tokens_per_layer") but config.json has no text_config.hidden_size_per_layer_input > 0 to say their width`,
        undefined,
        'embed_tokens_per_layer.weight',
      );
    return undefined;
  }
  const LP = c.numLayers * ple.width;
  return {
    width: ple.width,
    table: takeLinear(table, c, 'embed_tokens_per_layer', ple.vocab, LP),
    modelProjection: takeLinear(table, c, 'per_layer_model_projection', LP, c.hidden),
    projectionNorm: table.take('per_layer_projection_norm.weight', [ple.width], 'per-layer projection norm weight'),
  };
}

/** The centroid head of an assistant with use_ordered_embeddings; its tensors without the flag are an error. */
function takeCentroidHead(table: TensorTable, c: ModelConfig): CentroidHead | undefined {
  const ch = c.centroidHead;
  if (!ch) {
    if (table.has('masked_embedding.centroids.weight'))
      throw new FormatError(
        `${table.fileSet}: the checkpoint has a centroid LM head ("masked_embedding.centroids") but config.json does not set use_ordered_embeddings`,
        undefined,
        'masked_embedding.centroids.weight',
      );
    return undefined;
  }
  return {
    numCentroids: ch.numCentroids,
    topK: ch.topK,
    centroids: takeLinear(table, c, 'masked_embedding.centroids', ch.numCentroids, c.hidden),
    tokenOrdering: table.takeInt('masked_embedding.token_ordering', [c.vocab], "the centroid head's token ordering"),
  };
}

/** Builds the description; every tensor of the table must be used, or it is an error. */
export function describeModel(c: ModelConfig, table: TensorTable): ModelDescription {
  if (!c.tieWordEmbeddings)
    throw new FormatError(
      'config.json: tie_word_embeddings is false (separate LM head); this variant is not supported yet',
    );
  const assistant = c.role === 'assistant';
  const embed = takeLinear(table, c, 'embed_tokens', c.vocab, c.hidden);
  const layers = c.layers.map((_, i) => takeLayer(table, c, i, assistant));
  const finalNorm = table.take('norm.weight', [c.hidden], 'final norm weight');
  const base = {
    modelType: c.modelType,
    config: c,
    hidden: c.hidden,
    intermediate: c.intermediate,
    vocab: c.vocab,
    window: c.window,
    eps: c.eps,
    finalSoftcap: c.finalSoftcap,
    embed,
    layers,
    finalNorm,
    eosIds: c.eosIds,
  };
  let desc: ModelDescription;
  if (assistant) {
    const bb = c.backboneHidden as number;
    const preProjection = takeLinear(table, c, 'pre_projection', c.hidden, 2 * bb);
    const postProjection = takeLinear(table, c, 'post_projection', bb, c.hidden);
    const centroidHead = takeCentroidHead(table, c);
    desc = {
      ...base,
      role: 'assistant',
      backboneHidden: bb,
      preProjection,
      postProjection,
      ...(centroidHead ? { centroidHead } : {}),
    } satisfies AssistantDescription;
  } else {
    const perLayer = takePerLayerEmbedding(table, c);
    desc = {
      ...base,
      role: 'target',
      embedScale: roundToBf16(Math.sqrt(c.hidden)),
      ...(perLayer ? { perLayer } : {}),
    } satisfies TargetDescription;
  }
  const left = table.leftovers();
  if (left.length > 0) {
    const shown = left
      .slice(0, 6)
      .map((n) => `"${table.byName.get(n)!.name}"`)
      .join(', ');
    throw new FormatError(
      `${table.fileSet}: ${left.length} unexpected language-model tensor${left.length > 1 ? 's' : ''} that this ${c.modelType} description does not use: ${shown}${left.length > 6 ? ', ...' : ''}`,
    );
  }
  return desc;
}
