/**
 * The Gemma 4 MoE target (26B-A4B; docs/GEMMA4-FAMILY.md section 6) on the GPU: the dense forward (TargetCore,
 * src/model/gemma4/target-core.ts, with ForwardPass's layer blocks) with each layer's feed-forward half replaced by the
 * MoE block,
 *   dense   = post_ff_norm_1( mlp( pre_ff_norm(h1) ) )
 *   experts = post_ff_norm_2( sum_k w_k down_e(gelu_tanh(gate_e x) * up_e x) ),  x = pre_ff_norm_2(h1)
 *   h       = (h1 + post_ff_norm(dense + experts)) * layer_scalar
 * with the router on h1 (moe-ops.ts). Every op gives a row the same arithmetic whatever M is (the experts run per
 * (row, slot), never grouped across rows), so a verify block row equals a chain step byte for byte under `exact`.
 * Policy moe-grouped (moe-policies.ts) groups a verify block's rows by expert in the expert matvecs' reduction.
 * CPU twin: src/reference/gemma4/target.ts targetStep with src/reference/gemma4/{member-layer,moe/moe}.ts; router options as
 * MoeTargetOptions (default { order: 'mlx', scaleProduct: 'mlx-bf16' }: the router's norm weight is MLX's bf16 product).
 */
import type { TargetDescription } from '../../../format/model-description.ts';
import type { GpuContext } from '../../../gpu/device.ts';
import { captureName, finalStages, type StageStep } from '../../stages.ts';
import type { Stage } from '../../stages.ts';
import type { ForwardPass } from '../forward-pass.ts';
import type { GpuWeights } from '../../gpu-weights.ts';
import type * as op from '../../ops.ts';
import type { StepOptions, TargetOptions } from '../../target.ts';
import { TargetCore, type TargetLayout } from '../target-core.ts';
import {
  MAX_EXPERTS,
  MAX_TOP_K,
  moeExperts,
  type GpuRouterOrder,
  type GpuRouterScale,
  type MoeWorkspace,
} from './moe-ops.ts';

/** A MoE layer's localization stages: the attention layer's, with the router and experts before the layer output. */
export const MOE_LAYER_STAGES: readonly Stage[] = ['q', 'k', 'v', 'attn', 'mlp', 'router', 'experts', 'layer'];

/** Whether a target description is a Gemma 4 MoE model (enable_moe_block). */
export function isMoeTarget(desc: TargetDescription): boolean {
  return desc.config.moe !== null && desc.config.moe !== undefined;
}

/** The step options this engine takes: the dense engine's (StepOptions), chained greedy steps included. */
export type MoeStepOptions = StepOptions;

export interface MoeTargetOptions extends TargetOptions {
  /** The router convention (reference moe.ts RouterOrder); default 'mlx'. */
  router?: GpuRouterOrder;
  /** How router.scale and the root size meet; default the router convention's ('mlx' -> 'mlx-bf16'). */
  routerScale?: GpuRouterScale;
}

/**
 * TargetCore (caches, workspace, forward, LM head, greedy decoding, lens) with the MoE layer in recordLayer: the
 * dense engine's attention block and dense MLP, then the router and the experts on h1 and the MoE block's norms.
 * Every layer owns its K/V cache; the dense MLP is d.intermediate wide.
 */
export class MoETargetModel extends TargetCore<MoeTargetOptions> {
  private readonly moeWs: MoeWorkspace;

  constructor(ctx: GpuContext, weights: GpuWeights<TargetDescription>, opts: MoeTargetOptions) {
    super(ctx, weights, opts, moeLayout(weights));
    const d = this.desc;
    const moe = d.config.moe!;
    const R = this.R;
    const H = d.hidden;
    const E = moe.numExperts;
    const k = moe.topK;
    const I = moe.intermediate;
    const add = (name: string, floats: number) => this.work.add(name, floats);
    // dense + experts: post_ff_norm_1(mlp) + post_ff_norm_2(experts), before the post-feedforward norm
    add('d', R * H);
    this.moeWs = {
      rx: add('moe.rx', R * H),
      ex: add('moe.ex', R * H),
      scores: add('moe.scores', R * E),
      ids: add('moe.ids', R * k),
      weights: add('moe.weights', R * k),
      counts: add('moe.counts', R * k),
      g: add('moe.g', R * k * I),
      u: add('moe.u', R * k * I),
      ys: add('moe.ys', R * k * H),
      out: add('moe.out', R * H),
    };
  }

  /**
   * The localization stages in execution order: per layer q, k, v, attention, the dense MLP, the router (router.proj
   * scores), the experts (their weighted sum before post_feedforward_layernorm_2) and the layer output; then final
   * norm and logits.
   */
  stageOrder(): StageStep[] {
    const out: StageStep[] = [];
    this.desc.layers.forEach((l, i) => {
      for (const stage of MOE_LAYER_STAGES)
        out.push({ layer: i, layerKind: l.type, stage, capture: captureName(i, stage) });
    });
    return [...out, ...finalStages()];
  }

  protected override checkTokens(tokens: number[]): void {
    // embed.wgsl skips an id outside the table, which would leave the row's old values.
    const bad = tokens.find((t) => !Number.isInteger(t) || t < 0 || t >= this.desc.vocab);
    if (bad !== undefined) throw new Error(`token ${bad} outside [0, ${this.desc.vocab})`);
  }

  protected override recordLayer(f: ForwardPass, i: number): op.GroupSums | undefined {
    const d = this.desc;
    const w = this.weights.layers[i];
    const moe = w.moe!;
    const { M, ws } = f;
    const H = d.hidden;
    const moeWs = this.moeWs;
    // Attention block as the dense engine's; it leaves h1 in ws.h, pre_ff_norm(h1) in ws.xn and the MLP's group sums.
    const xs = f.selfAttention(i);
    // Dense MLP ("shared expert"), then the routed experts, both on h1 (ws.h).
    f.mlp(i, xs);
    const order = this.opts.router ?? 'mlx';
    moeExperts(f.rec, moe, ws.h, moeWs, {
      rows: f.rows,
      eps: d.eps,
      order,
      scale: this.opts.routerScale ?? (order === 'mlx' ? 'mlx-bf16' : 'transformers'),
      // moe-grouped groups the rows of verify blocks (chain steps have one row: nothing to group; prefill both arms alike)
      grouped: f.kind === 'step' && M > 1 && f.policy.moeGrouped === true,
      dummy: this.work.dummy,
    });
    f.capture(`router.${i}`, moeWs.scores, M * moe.numExperts);
    f.capture(`router_weights.${i}`, moeWs.weights, M * moe.topK);
    f.capture(`router_ids.${i}`, moeWs.ids, M * moe.topK); // u32 ids: read the capture's bytes as Uint32Array
    f.capture(`experts.${i}`, moeWs.out, M * H);
    // dense + experts = post_ff_norm_1(mlp) + post_ff_norm_2(experts), then the residual and layer_scalar
    f.norm(ws.a, moe.postFfNorm1, ws.d, M, H);
    f.norm(moeWs.out, moe.postFfNorm2, ws.d, M, H, { residual: { postScale: 1 } });
    return f.norm(ws.d, w.postFfNorm, ws.h, M, H, { residual: { postScale: w.layerScalar }, ...f.fuseNext(i) });
  }
}

/** Checks the MoE weights against their description before anything is allocated; every layer owns its cache. */
function moeLayout(weights: GpuWeights<TargetDescription>): TargetLayout {
  const d = weights.desc;
  const moe = d.config.moe;
  if (!moe) throw new Error(`${d.modelType}: not a mixture-of-experts target (enable_moe_block is not set)`);
  if (d.perLayer || d.config.kvSharedLayers > 0)
    throw new Error(
      `${d.modelType}: MoE with per-layer embeddings or KV sharing is not a Gemma 4 variant this engine runs`,
    );
  if (moe.numExperts > MAX_EXPERTS || moe.topK > MAX_TOP_K)
    throw new Error(
      `${d.modelType}: ${moe.numExperts} experts, top ${moe.topK}: the router kernel holds at most ${MAX_EXPERTS} experts and top ${MAX_TOP_K}`,
    );
  weights.layers.forEach((l, i) => {
    if (!l.moe)
      throw new Error(`layer ${i}: MoE weights were not uploaded (every layer of a MoE target has the block)`);
  });
  return { cacheLayers: d.layers.length, mlpWidth: d.intermediate };
}
