import { familyFeatures, type TargetDescription } from '../../../format/model-description.ts';
import type { GpuContext } from '../../../gpu/device.ts';
import type { ForwardPass } from '../forward-pass.ts';
import type { GpuWeights } from '../../gpu-weights.ts';
import type * as op from '../../ops.ts';
import type { TargetOptions } from '../../target.ts';
import { TargetCore, type TargetLayout } from '../target-core.ts';
import { denseStageOrder, type StageStep } from '../../stages.ts';

/**
 * The dense Gemma 4 target (docs/MODEL.md section 2): TargetCore with the dense layer, every layer owning its K/V
 * cache. Gemma 4 family members run in their own engines on the same core (E-series: gemma4/e-series/e-target.ts).
 */
export class TargetModel extends TargetCore {
  constructor(ctx: GpuContext, weights: GpuWeights<TargetDescription>, opts: TargetOptions) {
    super(ctx, weights, opts, denseLayout(weights.desc));
  }

  /** The localization stages in execution order: per layer q, k, v, attention, MLP, layer output; then final norm and logits. */
  stageOrder(): StageStep[] {
    return denseStageOrder(this.desc.layers);
  }

  protected override recordLayer(f: ForwardPass, i: number): op.GroupSums | undefined {
    const w = this.weights.layers[i];
    const { M, ws } = f;
    const xsMlp = f.selfAttention(i);
    // MLP block, then the post-feedforward residual, fused with the next layer's input norm (and its q/k/v group sums).
    f.mlp(i, xsMlp);
    return f.norm(ws.a, w.postFfNorm, ws.h, M, this.desc.hidden, {
      residual: { postScale: w.layerScalar },
      ...f.fuseNext(i),
    });
  }
}

/** The dense engine's layout. Refuses Gemma 4 family members: run as a dense model they would be silently wrong. */
function denseLayout(d: TargetDescription): TargetLayout {
  const family = familyFeatures(d);
  if (family.length > 0)
    throw new Error(
      `this ${d.modelType} target uses ${family.join(', ')}, which the dense Gemma 4 engine does not run (E-series and mixture-of-experts targets run in their own engines: gemma4/e-series/e-target.ts, gemma4/moe/moe-target.ts)`,
    );
  return { cacheLayers: d.layers.length, mlpWidth: d.intermediate };
}
