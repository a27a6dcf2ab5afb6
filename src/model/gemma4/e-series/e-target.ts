/**
 * The Gemma 4 E-series target (E2B / E4B; docs/GEMMA4-FAMILY.md sections 4 and 5) on the GPU: the dense
 * forward (TargetCore, src/model/gemma4/target-core.ts, with ForwardPass's layer blocks) with
 * - per-layer embeddings: the combined per-layer inputs of each row are computed once after the embedding
 *   (ple-ops.ts perLayerInputs), and each layer adds post_norm(W_up(gelu_tanh(W_gate h) * input_l)) to its
 *   residual after the MLP, before layer_scalar;
 * - KV sharing: the last N layers have no K/V of their own; they attend to their donor's cache (the last owner
 *   of their type) with the donor's staging rows, so only the first L - N layers own caches, commit and roll back;
 * - double-wide MLPs on the shared layers (the workspace is as wide as the widest layer).
 * Every op is a dense-engine op or a shaders/ple.wgsl op, each with a row's arithmetic independent of M, so
 * the exactness contract of the dense engine holds unchanged: block rows == chain rows, byte for byte.
 * CPU twin: src/reference/gemma4/target.ts targetStep with src/reference/gemma4/{e-series/ple,member-layer,kv-sharing}.ts.
 */
import type { TargetDescription } from '../../../format/model-description.ts';
import { cacheOwners } from '../../../format/kv-sharing.ts';
import { storageBuffer } from '../../../gpu/buffers.ts';
import type { GpuContext } from '../../../gpu/device.ts';
import { captureName, finalStages, type StageStep } from '../../stages.ts';
import type { Stage } from '../../stages.ts';
import { familyConstants, type FamilyConstants } from '../../../numerics/family-constants.ts';
import type { ForwardPass } from '../forward-pass.ts';
import type { GpuWeights } from '../../gpu-weights.ts';
import type * as op from '../../ops.ts';
import type { StepOptions, TargetOptions } from '../../target.ts';
import { TargetCore, type TargetLayout } from '../target-core.ts';
import * as ple from './ple-ops.ts';

/** Whether a target description is an E-series model (per-layer embeddings or KV-shared layers) without MoE. */
export function isESeriesTarget(desc: TargetDescription): boolean {
  return !desc.config.moe && (desc.perLayer !== undefined || desc.config.kvSharedLayers > 0);
}

/** The step options this engine takes: the dense engine's (StepOptions), chained greedy steps included. */
export type EStepOptions = StepOptions;

export class ETargetModel extends TargetCore {
  /** Per layer, the layer whose K/V it reads (itself for an owner). The cache holds the owners 0 .. L - N - 1 only. */
  readonly donors: number[];
  private readonly constants: FamilyConstants;
  /**
   * Sliding donors' K/V of the current prefill chunk, by donor in layer order. A shared sliding layer reads the
   * chunk's keys from its donor's staging binding (chrono mode) after layers in between have rewritten ws.k, and
   * the donor's ring may only take the chunk once every reader is done (an early row still needs the entries it
   * overwrites): afterLayers() commits them.
   */
  private readonly donorChunk = new Map<number, { k: GPUBuffer; v: GPUBuffer }>();

  constructor(ctx: GpuContext, weights: GpuWeights<TargetDescription>, opts: TargetOptions) {
    const layout = eSeriesLayout(weights);
    super(ctx, weights, opts, layout);
    this.donors = layout.donors;
    const d = this.desc;
    this.constants = familyConstants(d.hidden, d.perLayer?.width ?? 0);
    const R = this.R;
    if (d.perLayer) {
      const LP = d.layers.length * d.perLayer.width;
      this.work.add('pleInputs', R * LP);
      this.work.add('pleProj', R * LP);
      this.work.add('pleGate', R * d.perLayer.width);
    }
    const lenders = [...new Set(this.donors.filter((dn, i) => dn !== i))].sort((a, b) => a - b);
    for (const dn of lenders) {
      const l = d.layers[dn];
      if (l.type !== 'sliding') continue;
      const floats = R * l.numKvHeads * l.headDim;
      this.donorChunk.set(dn, {
        k: storageBuffer(this.device, floats * 4, `donor-k.${dn}`),
        v: storageBuffer(this.device, floats * 4, `donor-v.${dn}`),
      });
    }
  }

  /**
   * Greedy classic decode (TargetCore.decodeGreedy). An argmax past the per-layer table would be embedded without
   * its per-layer row (embed.wgsl skips it): with such a table the tokens step one at a time, where checkTokens
   * refuses it.
   */
  override async decodeGreedy(first: number, count: number, o: EStepOptions = {}): Promise<number[]> {
    const d = this.desc;
    if (count < 1 || !d.perLayer || d.perLayer.table.outFeatures >= d.vocab) return super.decodeGreedy(first, count, o);
    this.checkContext(this.cache.state.nextPos + count);
    this.checkTokens([first]);
    const out: number[] = [];
    for (let t = first; out.length < count; ) out.push((t = (await this.decode(t, o)).argmax![0]));
    return out;
  }

  override destroy(): void {
    super.destroy();
    for (const b of this.donorChunk.values()) [b.k, b.v].forEach((x) => x.destroy());
  }

  /**
   * The localization stages in execution order: q, k, v (owners only: a shared layer computes no K/V), attention,
   * MLP, the per-layer input (layers with one: its contribution as added to the residual, before layer_scalar) and
   * layer output per layer, then final norm and logits.
   */
  stageOrder(): StageStep[] {
    const out: StageStep[] = [];
    this.desc.layers.forEach((l, i) => {
      const stages: Stage[] = this.donors[i] === i ? ['q', 'k', 'v', 'attn', 'mlp'] : ['q', 'attn', 'mlp'];
      if (l.perLayerInput) stages.push('ple');
      stages.push('layer');
      for (const stage of stages) out.push({ layer: i, layerKind: l.type, stage, capture: captureName(i, stage) });
    });
    return [...out, ...finalStages()];
  }

  protected override checkTokens(tokens: number[]): void {
    const d = this.desc;
    // The embedding kernels skip an id outside every row part, which would leave the row's old values.
    const limit = Math.min(d.vocab, d.perLayer ? d.perLayer.table.outFeatures : d.vocab);
    const bad = tokens.find((t) => !Number.isInteger(t) || t < 0 || t >= limit);
    if (bad !== undefined)
      throw new Error(
        `token ${bad} outside [0, ${limit}) (vocab ${d.vocab}${d.perLayer ? `, per-layer vocabulary ${d.perLayer.table.outFeatures}` : ''})`,
      );
  }

  /** The combined per-layer inputs of every row, computed once from the embedded rows (ple-ops.ts perLayerInputs). */
  protected override afterEmbed(f: ForwardPass): void {
    const pw = this.weights.perLayer;
    if (!pw) return;
    const ws = this.ws;
    const L = this.desc.layers.length;
    const pleWs = { inputs: ws.pleInputs, proj: ws.pleProj, dummy: this.work.dummy };
    ple.perLayerInputs(f.rec, pw, ws.ids, ws.h, pleWs, this.constants, L, this.desc.eps, f.rows);
    f.capture('ple_inputs', ws.pleInputs, f.M * L * pw.width);
  }

  protected override recordLayer(f: ForwardPass, i: number): op.GroupSums | undefined {
    const d = this.desc;
    const l = d.layers[i];
    const w = this.weights.layers[i];
    const donor = this.donors[i];
    const owner = donor === i;
    const kv = this.cache.layers[donor];
    const { M, ws, rows } = f;
    const H = d.hidden;
    const kvw = l.numKvHeads * l.headDim;

    // Attention block: q always; k and v on owner layers only (a shared layer reads its donor's).
    const xsAttn = f.attentionInput(i);
    const chunkRows = this.donorChunk.get(i);
    if (!owner) {
      f.projectQ(i, xsAttn);
    } else {
      if (!w.kProj) throw new Error(`layer ${i} owns a cache but has no k_proj`);
      // Sliding step / block rows go to the staging rows (KvCache); a sliding donor's prefill rows to its own
      // chunk buffers (see donorChunk); everything else to the workspace.
      const staged = l.type === 'sliding' && f.kind !== 'prefill';
      const [kOut, vOut] = staged
        ? [kv.kStage, kv.vStage]
        : l.type === 'sliding' && chunkRows
          ? [chunkRows.k, chunkRows.v]
          : [ws.k, ws.v];
      f.projectQkv(i, xsAttn, kOut, vOut);
      f.capture(`k.${i}`, kOut, M * kvw);
      f.capture(`v.${i}`, vOut, M * kvw);
      if (l.type === 'full') f.writeFullRows(i, kv);
    }
    f.capture(`q.${i}`, ws.q, M * l.numHeads * l.headDim);
    // A sliding prefill chunk's own keys: this layer's (an owner that lends none), or its donor's chunk buffers.
    const chunk = this.donorChunk.get(donor);
    const oSums = f.attend(i, kv, chunk ? chunk.k : ws.k, chunk ? chunk.v : ws.v);
    if (owner && l.type === 'sliding' && f.kind === 'prefill' && !chunkRows)
      this.cache.commitPrefillRows(f.rec, i, ws.k, ws.v, f.p, M);
    const xsMlp = f.attentionOut(i, oSums);

    // MLP block (double width on the shared layers of E2B: the weights say how wide).
    f.mlp(i, xsMlp);
    const fuseNext = f.fuseNext(i);
    const pl = w.perLayerInput;
    if (!pl || !this.weights.perLayer)
      return f.norm(ws.a, w.postFfNorm, ws.h, M, H, { residual: { postScale: w.layerScalar }, ...fuseNext });
    // h2 = h1 + post_ff_norm(mlp); then h = (h2 + post_norm(W_up(gelu_tanh(W_gate h2) * input_i))) * layer_scalar
    const xsGate = f.norm(ws.a, w.postFfNorm, ws.h, M, H, {
      residual: { postScale: 1 },
      sums: { lin: pl.gate, rows, slot: 'ple' },
    });
    ple.contribution(f.rec, pl, ws.h, ws.pleInputs, ws.pleGate, ws.a, i, d.layers.length, rows, xsGate);
    if (f.want(`ple.${i}`)) {
      // The contribution as added (act.ple.i; the `ple` localization stage): a separate norm into the capture, the
      // residual is untouched (ws.y is free until the final norm).
      f.norm(ws.a, pl.postNorm, ws.y, M, H);
      f.capture(`ple.${i}`, ws.y, M * H);
    }
    return f.norm(ws.a, pl.postNorm, ws.h, M, H, { residual: { postScale: w.layerScalar }, ...fuseNext });
  }

  /** The sliding donors' chunk rows go into their rings once every shared layer has read the ring without them. */
  protected override afterLayers(f: ForwardPass): void {
    if (f.kind !== 'prefill') return;
    for (const [i, c] of this.donorChunk) this.cache.commitPrefillRows(f.rec, i, c.k, c.v, f.p, f.M);
  }
}

/** Checks the E-series weights against their description; the owners own caches, the MLP buffers fit the widest. */
function eSeriesLayout(weights: GpuWeights<TargetDescription>): TargetLayout & { donors: number[] } {
  const d = weights.desc;
  if (d.config.moe)
    throw new Error(
      `${d.modelType}: mixture-of-experts targets run in MoETargetModel (src/model/gemma4/moe/moe-target.ts), not the E-series engine`,
    );
  if (!!d.perLayer !== !!weights.perLayer)
    throw new Error(`${d.modelType}: per-layer embedding weights ${d.perLayer ? 'were not uploaded' : 'unexpected'}`);
  d.layers.forEach((l, i) => {
    if (!!l.perLayerInput !== !!weights.layers[i].perLayerInput)
      throw new Error(`layer ${i}: per-layer input weights do not match the description`);
    if (!!d.perLayer !== !!l.perLayerInput)
      throw new Error(
        `layer ${i}: ${d.perLayer ? 'has no per-layer input gate, but the model has per-layer embeddings' : 'has a per-layer input gate, but the model has no per-layer embeddings'}`,
      );
  });
  const donors = d.layers.map((l, i) => l.kvDonor ?? i);
  const owners = cacheOwners(d.layers.length, d.config.kvSharedLayers).length;
  donors.forEach((dn, i) => {
    if (dn >= owners || d.layers[dn].type !== d.layers[i].type)
      throw new Error(`layer ${i} reads the K/V of layer ${dn}, which is not a ${d.layers[i].type} cache owner`);
  });
  return { cacheLayers: owners, mlpWidth: Math.max(...d.layers.map((l) => l.gate.outFeatures)), donors };
}
