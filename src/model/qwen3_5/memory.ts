/**
 * GPU memory of a Qwen3.5 target (and its MTP head), planned before anything is allocated, buffer for buffer as
 * the engine allocates it, so that a model or context that cannot fit is refused with numbers (checkMemory in
 * src/model/memory-budget.ts) instead of failing mid-allocation:
 * - weights as uploadQwenWeights (weights.ts): linears and norms split by rows as TensorUploader, the Gated
 *   DeltaNet's small vectors widened to f32;
 * - cache as QwenState (state.ts): per Gated DeltaNet layer the conv window and its spare, S, the block's raw
 *   rows and the state after every token of a verify block (maxBlock copies of S: the largest item at real
 *   shapes, 1.2 GB at K = 8 for a Qwen3.6-27B); per full-attention layer K and V of maxContext rows; the MTP
 *   head's own K and V (mtp.ts);
 * - workspace as QwenEngine (engine.ts): activation rows, attention scratch, RoPE table, logits, and the MTP
 *   head's concat rows.
 */
import type { Qwen35Description } from '../../format/qwen3_5/description.ts';
import { linearTensors, type Linear } from '../../format/model-description.ts';
import type { TensorRef } from '../../format/safetensors.ts';
import { attentionScratchBytes } from '../attention-op.ts';
import { type MemoryOptions, type MemoryPlan, type PlanLimits, Planner } from '../memory-budget.ts';
import type { Qwen35Layer } from '../../format/qwen3_5/description.ts';

function weights(p: Planner, d: Qwen35Description): void {
  const lin: Linear[] = d.tieWordEmbeddings ? [d.embed] : [d.embed, d.lmHead];
  const norms: TensorRef[] = [d.finalNorm];
  const widened: TensorRef[] = [];
  const layer = (l: Qwen35Layer) => {
    lin.push(l.gate, l.up, l.down);
    norms.push(l.inputNorm, l.postAttnNorm);
    if (l.type === 'linear') {
      lin.push(l.inProjQkv, l.inProjZ, l.inProjB, l.inProjA, l.outProj);
      widened.push(l.conv, l.dtBias, l.aLog, l.gatedNorm);
    } else {
      lin.push(l.qProj, l.kProj, l.vProj, l.oProj);
      norms.push(l.qNorm, l.kNorm);
    }
  };
  d.layers.forEach(layer);
  if (d.mtp) {
    lin.push(d.mtp.fc);
    norms.push(d.mtp.preFcNormEmbedding, d.mtp.preFcNormHidden, d.mtp.norm);
    layer(d.mtp.layer);
  }
  for (const l of lin) p.rowSplit(linearTensors(l));
  p.rewriteOf(lin);
  for (const n of norms) p.rowSplit([n]);
  for (const t of widened) p.buffer('weights', `${t.name} (widened to f32)`, t.shape.reduce((a, x) => a * x, 1) * 4);
}

function caches(p: Planner, d: Qwen35Description, o: MemoryOptions): void {
  const { numKvHeads: nkv, headDim: hd } = d.config.attention;
  const kvRow = nkv * hd * 4;
  const g = d.config.linear!;
  const sBytes = g.numValueHeads * g.keyHeadDim * g.valueHeadDim * 4;
  d.layers.forEach((l, i) => {
    if (l.type === 'full') {
      for (const kv of ['K', 'V'])
        p.buffer(
          'cache',
          `${kv} cache of layer ${i} (full, ${o.maxContext} positions x ${nkv} x ${hd})`,
          o.maxContext * kvRow,
        );
      return;
    }
    for (const w of ['conv window', 'spare conv window'])
      p.buffer('cache', `${w} of layer ${i} (${g.convKernel - 1} x ${g.convDim})`, (g.convKernel - 1) * g.convDim * 4);
    p.buffer(
      'cache',
      `recurrent state of layer ${i} (${g.numValueHeads} x ${g.keyHeadDim} x ${g.valueHeadDim})`,
      sBytes,
    );
    p.buffer(
      'cache',
      `verify block's raw rows of layer ${i} (${o.maxBlock} x ${g.convDim})`,
      o.maxBlock * g.convDim * 4,
    );
    p.buffer(
      'cache',
      `recurrent state after each token of a verify block, layer ${i} (${o.maxBlock} x ${g.numValueHeads} x ${g.keyHeadDim} x ${g.valueHeadDim})`,
      o.maxBlock * sBytes,
    );
  });
  if (d.mtp)
    for (const kv of ['K', 'V'])
      p.buffer(
        'cache',
        `${kv} cache of the MTP head (${o.maxContext} positions x ${nkv} x ${hd})`,
        o.maxContext * kvRow,
      );
}

function workspace(p: Planner, d: Qwen35Description, o: MemoryOptions): void {
  const R = Math.max(o.prefillChunk, o.maxBlock);
  const { numHeads: nh, numKvHeads: nkv, headDim: hd, rope } = d.config.attention;
  const g = d.config.linear!;
  const f = (name: string, floats: number) =>
    p.buffer('workspace', `workspace "${name}" of the Qwen3.5 engine`, Math.max(16, floats * 4));
  for (const n of ['h', 'xn', 'a', 'y']) f(n, R * d.hidden);
  for (const n of ['g', 'u']) f(n, R * d.intermediate);
  f('qg', R * 2 * nh * hd);
  for (const n of ['q', 'attn']) f(n, R * nh * hd);
  for (const n of ['k', 'v']) f(n, R * nkv * hd);
  for (const [n, w] of [
    ['qkv', g.convDim],
    ['c', g.convDim],
    ['qk', 2 * g.keyDim],
    ['z', g.valueDim],
    ['ga', g.numValueHeads],
    ['gb_in', g.numValueHeads],
    ['gates', 2 * g.numValueHeads],
    ['lg', g.numValueHeads],
    ['o', g.valueDim],
    ['gn', g.valueDim],
  ] as const)
    f(n, R * w);
  f('headIn', o.maxBlock * d.hidden);
  f('logits', o.maxBlock * d.vocab);
  for (const n of ['ids', 'argmax', 'dummy', 'unusedStage']) f(n, n === 'ids' ? R : n === 'argmax' ? o.maxBlock : 4);
  const s = { heads: nh, qWidth: nh * hd, maxKeys: o.maxContext, prefillRows: R, stepRows: o.maxBlock };
  for (const [name, bytes] of Object.entries(attentionScratchBytes(s)))
    p.buffer('workspace', `attention ${name} (${nh} heads x ${o.maxContext} keys)`, bytes);
  for (const t of ['cos', 'sin'])
    p.buffer(
      'workspace',
      `RoPE ${t} table (${o.maxContext} positions x ${rope.rotaryDim / 2})`,
      o.maxContext * (rope.rotaryDim / 2) * 4,
    );
  if (d.mtp) f('MTP concat rows', R * 2 * d.hidden);
}

/** Plans every buffer of a Qwen3.5 target (weights, state, workspace) on an adapter with `limits`. */
export function planQwenMemory(d: Qwen35Description, options: MemoryOptions, limits: PlanLimits): MemoryPlan {
  for (const k of ['maxContext', 'maxBlock', 'prefillChunk'] as const) {
    if (!Number.isSafeInteger(options[k]) || options[k] < 1)
      throw new Error(`planQwenMemory: ${k} must be a positive integer, found ${options[k]}`);
  }
  const p = new Planner(limits, options);
  p.plan.models.push(d.modelType);
  weights(p, d);
  caches(p, d, options);
  workspace(p, d, options);
  return p.plan;
}
