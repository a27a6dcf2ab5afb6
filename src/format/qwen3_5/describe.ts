/**
 * Tensor plan of the Qwen3.5 family (docs/QWEN35.md section 2): builds a Qwen35Description from a normalised
 * tensor table, checking every shape against config.json. The MLX layout is expected (conv1d [C, K, 1], norms
 * stored as their effective weight); a transformers-layout checkpoint is refused with the reason.
 */
import { type TensorTable, takeLinear } from '../describe.ts';
import { FormatError, fmtShape } from '../errors.ts';
import type { TensorRef } from '../safetensors.ts';
import type { Qwen35Config } from './config.ts';
import type {
  Qwen35AttentionLayer,
  Qwen35Description,
  Qwen35Layer,
  Qwen35LinearLayer,
  Qwen35MtpHead,
} from './description.ts';

/** Builds the target's description; every tensor of the table must be used, or it is an error. */
export function describeQwen35(c: Qwen35Config, table: TensorTable, label: string): Qwen35Description {
  if (c.role !== 'target' || !c.linear) throw new Error('describeQwen35: a target config is needed');
  const H = c.hidden;
  const embed = takeLinear(table, c, 'embed_tokens', c.vocab, H);
  const layers: Qwen35Layer[] = c.layerTypes.map((t, i) =>
    t === 'linear' ? takeLinearLayer(table, c, i) : takeAttentionLayer(table, c, `layers.${i}`, i),
  );
  const finalNorm = table.take('norm.weight', [H], 'final norm weight');
  let lmHead = embed;
  if (c.tieWordEmbeddings)
    table.takeRaw('lm_head.weight'); // a stray copy of the tied head is harmless
  else lmHead = takeLinear(table, c, 'lm_head', c.vocab, H);

  let mtp: Qwen35MtpHead | null = null;
  let mtpUnavailable: string | null = null;
  const mtpNames = [...table.byName.keys()].filter((n) => n.startsWith('mtp.'));
  if (mtpNames.length === 0) {
    mtpUnavailable = `${label}: no mtp.* tensors in ${table.fileSet}, so MTP drafting with the target's own head is unavailable (mlx_lm conversions drop mtp.*: use a conversion that keeps them, or give the split drafter folder); generation can still use oracle drafts, and the probe and the trace do not need drafts`;
  } else if (c.mtp.dedicatedEmbeddings || c.mtp.numLayers > 1) {
    for (const n of mtpNames) table.takeRaw(n);
    mtpUnavailable = c.mtp.dedicatedEmbeddings
      ? `${label}: config.json sets mtp_use_dedicated_embeddings (an MTP head with its own embedding), which is not supported yet; MTP drafting is unavailable`
      : `${label}: config.json sets mtp_num_hidden_layers = ${c.mtp.numLayers}; only one MTP layer is supported yet, so MTP drafting is unavailable`;
  } else {
    mtp = takeMtpHead(table, c, 'mtp.', 'target', label);
  }
  refuseLeftovers(table, c.modelType);
  return {
    family: 'qwen3_5',
    role: 'target',
    modelType: c.modelType,
    config: c,
    hidden: H,
    intermediate: c.intermediate,
    vocab: c.vocab,
    eps: c.eps,
    embed,
    lmHead,
    tieWordEmbeddings: c.tieWordEmbeddings,
    layers,
    finalNorm,
    eosIds: c.eosIds,
    mtp,
    mtpUnavailable,
  };
}

/**
 * The MTP head of a split drafter folder (drafter.ts opens it and passes the target's geometry with the
 * drafter's quantization): names without the mtp. prefix (fc, pre_fc_norm_embedding, pre_fc_norm_hidden, norm,
 * layers.0.*); a copy of embed_tokens / lm_head is ignored (the head shares the target's).
 */
export function describeQwen35Drafter(c: Qwen35Config, table: TensorTable, label: string): Qwen35MtpHead {
  if (c.mtp.dedicatedEmbeddings)
    throw new FormatError(
      `${label}: config.json sets mtp_use_dedicated_embeddings (an MTP head with its own embedding); not supported yet`,
      undefined,
      'mtp_use_dedicated_embeddings',
    );
  if (c.mtp.numLayers > 1)
    throw new FormatError(
      `${label}: config.json sets mtp_num_hidden_layers = ${c.mtp.numLayers}; only one MTP layer is supported yet`,
      undefined,
      'mtp_num_hidden_layers',
    );
  for (const n of [
    'embed_tokens.weight',
    'embed_tokens.scales',
    'embed_tokens.biases',
    'lm_head.weight',
    'lm_head.scales',
    'lm_head.biases',
  ])
    table.takeRaw(n);
  if (!table.has('fc.weight'))
    throw new FormatError(
      `${label}: ${table.fileSet} has no MTP head tensors (expected mtp.fc.weight or fc.weight, mtp.pre_fc_norm_embedding.weight, ...); is this a Qwen3.5 MTP drafter folder?`,
      undefined,
      'fc.weight',
    );
  const head = takeMtpHead(table, c, '', 'drafter', label);
  refuseLeftovers(table, 'qwen3_5 MTP drafter');
  return head;
}

function takeMtpHead(
  table: TensorTable,
  c: Qwen35Config,
  prefix: string,
  source: 'target' | 'drafter',
  label: string,
): Qwen35MtpHead {
  const H = c.hidden;
  return {
    source,
    label,
    preFcNormEmbedding: table.take(`${prefix}pre_fc_norm_embedding.weight`, [H], 'MTP embedding norm weight'),
    preFcNormHidden: table.take(`${prefix}pre_fc_norm_hidden.weight`, [H], 'MTP hidden norm weight'),
    fc: takeLinear(table, c, `${prefix}fc`, H, 2 * H),
    layer: takeAttentionLayer(table, c, `${prefix}layers.0`, 0),
    norm: table.take(`${prefix}norm.weight`, [H], 'MTP final norm weight'),
  };
}

function takeMlp(table: TensorTable, c: Qwen35Config, p: string) {
  return {
    inputNorm: table.take(`${p}.input_layernorm.weight`, [c.hidden], 'norm weight'),
    postAttnNorm: table.take(`${p}.post_attention_layernorm.weight`, [c.hidden], 'norm weight'),
    gate: takeLinear(table, c, `${p}.mlp.gate_proj`, c.intermediate, c.hidden),
    up: takeLinear(table, c, `${p}.mlp.up_proj`, c.intermediate, c.hidden),
    down: takeLinear(table, c, `${p}.mlp.down_proj`, c.hidden, c.intermediate),
  };
}

function takeAttentionLayer(table: TensorTable, c: Qwen35Config, p: string, index: number): Qwen35AttentionLayer {
  const { numHeads, numKvHeads, headDim } = c.attention;
  const a = `${p}.self_attn`;
  if (!table.has(`${a}.q_proj.weight`) && table.has(`${p}.linear_attn.in_proj_qkv.weight`))
    throw new FormatError(
      `layer ${index} is "full_attention" in config.json but ${table.fileSet} has a Gated DeltaNet layer there (${p}.linear_attn.*); check layer_types / full_attention_interval`,
      undefined,
      `${a}.q_proj.weight`,
    );
  const qProj = takeLinear(table, c, `${a}.q_proj`, 2 * numHeads * headDim, c.hidden);
  return {
    index,
    type: 'full',
    ...takeMlp(table, c, p),
    qProj,
    kProj: takeLinear(table, c, `${a}.k_proj`, numKvHeads * headDim, c.hidden),
    vProj: takeLinear(table, c, `${a}.v_proj`, numKvHeads * headDim, c.hidden),
    oProj: takeLinear(table, c, `${a}.o_proj`, c.hidden, numHeads * headDim),
    qNorm: table.take(`${a}.q_norm.weight`, [headDim], 'q norm weight'),
    kNorm: table.take(`${a}.k_norm.weight`, [headDim], 'k norm weight'),
  };
}

function takeLinearLayer(table: TensorTable, c: Qwen35Config, index: number): Qwen35LinearLayer {
  const g = c.linear!;
  const p = `layers.${index}`;
  const a = `${p}.linear_attn`;
  if (!table.has(`${a}.in_proj_qkv.weight`)) {
    if (table.has(`${a}.in_proj_qkvz.weight`))
      throw new FormatError(
        `${table.byName.get(`${a}.in_proj_qkvz.weight`)!.file.name}: "${a}.in_proj_qkvz" is Qwen3-Next's fused projection layout (qwen3_next), which is not supported yet; Qwen3.5 stores in_proj_qkv, in_proj_z, in_proj_b, in_proj_a`,
        undefined,
        `${a}.in_proj_qkvz.weight`,
      );
    if (table.has(`${p}.self_attn.q_proj.weight`))
      throw new FormatError(
        `layer ${index} is "linear_attention" in config.json but ${table.fileSet} has a full-attention layer there (${p}.self_attn.*); check layer_types / full_attention_interval`,
        undefined,
        `${a}.in_proj_qkv.weight`,
      );
  }
  const H = c.hidden;
  return {
    index,
    type: 'linear',
    ...takeMlp(table, c, p),
    inProjQkv: takeLinear(table, c, `${a}.in_proj_qkv`, g.convDim, H),
    inProjZ: takeLinear(table, c, `${a}.in_proj_z`, g.valueDim, H),
    inProjB: takeLinear(table, c, `${a}.in_proj_b`, g.numValueHeads, H),
    inProjA: takeLinear(table, c, `${a}.in_proj_a`, g.numValueHeads, H),
    conv: takeConv(table, `${a}.conv1d.weight`, g.convDim, g.convKernel),
    dtBias: table.take(`${a}.dt_bias`, [g.numValueHeads], 'dt_bias'),
    aLog: table.take(`${a}.A_log`, [g.numValueHeads], 'A_log'),
    gatedNorm: table.take(`${a}.norm.weight`, [g.valueHeadDim], 'gated RMSNorm weight'),
    outProj: takeLinear(table, c, `${a}.out_proj`, H, g.valueDim),
  };
}

/** The depthwise conv weight [C, K, 1], with the specific messages for a wrong kernel size or HF layout. */
function takeConv(table: TensorTable, name: string, C: number, K: number): TensorRef {
  const t = table.byName.get(name);
  if (t && t.shape.length === 3 && t.shape[0] === C) {
    const [, k1, k2] = t.shape;
    if (k1 === 1 && k2 === K && K !== 1)
      throw new FormatError(
        `${t.file.name}: tensor "${t.name}" has shape ${fmtShape(t.shape)}, transformers' layout [C, 1, K]; this lab reads MLX conversions ([C, K, 1], and norms stored as 1 + w): convert the checkpoint with mlx_lm.convert`,
        t.file.name,
        t.name,
      );
    if (k2 === 1 && k1 !== K)
      throw new FormatError(
        `${t.file.name}: tensor "${t.name}" has a conv kernel of ${k1} taps (shape ${fmtShape(t.shape)}) but config.json says linear_conv_kernel_dim = ${K} (expected ${fmtShape([C, K, 1])}); the checkpoint and its config disagree`,
        t.file.name,
        t.name,
      );
  }
  return table.take(name, [C, K, 1], `depthwise conv1d weight, ${K} taps`);
}

function refuseLeftovers(table: TensorTable, what: string): void {
  const left = table.leftovers();
  if (left.length === 0) return;
  const shown = left
    .slice(0, 6)
    .map((n) => `"${table.byName.get(n)!.name}"`)
    .join(', ');
  throw new FormatError(
    `${table.fileSet}: ${left.length} unexpected language-model tensor${left.length > 1 ? 's' : ''} that this ${what} description does not use: ${shown}${left.length > 6 ? ', ...' : ''}`,
  );
}
