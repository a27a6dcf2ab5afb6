/**
 * What a Qwen3.5 target has where Gemma 4 has a ring: the recurrent state S of each Gated DeltaNet layer
 * (docs/QWEN35.md section 5). A chain step commits S after its token; a verify block stages S after each of its
 * K tokens (QwenState.sStage) and commit(n) keeps row n - 1. The state view compares, for each block token t
 * and each linear layer, the block arm's staged S after token t with the chain arm's S after t + 1 chain
 * steps, byte for byte: under `exact` they are equal, and a policy that touches the recurrence shows where the
 * carried state parts (gdn-state-bf16: both arms store S in bf16 after token 0, equal; from token 1 the block's
 * S grew from the f32 state it kept between its tokens, the chain's from the rounded one it re-read).
 */
import { readMany, storageBuffer } from '../gpu/buffers.ts';
import type { Policy } from '../model/policy.ts';
import type { QwenTargetModel } from '../model/qwen3_5/target.ts';
import { compareRows } from './compare.ts';
import type { StateView } from './report.ts';

/**
 * Runs both arms of one block once more from the same start (`startChain` / `startBlock` restore the
 * snapshot or prefill again) and compares the states. The chain's S after each token is copied on the GPU
 * into a buffer of K rows per layer, so only one layer's rows are read back at a time.
 */
export async function qwenStateView(
  model: QwenTargetModel,
  block: number[],
  policy: Policy,
  startChain: () => Promise<void>,
  startBlock: () => Promise<void>,
): Promise<StateView> {
  const c = model.desc.config;
  const g = c.linear!;
  const K = block.length;
  const floats = g.numValueHeads * g.keyHeadDim * g.valueHeadDim;
  const bytes = floats * 4;
  const e = model.engine;
  const linear = model.state.layers.flatMap((l, i) => (l.kind === 'linear' ? [{ i, l }] : []));
  const chainRows = linear.map(({ i }) => storageBuffer(e.device, K * bytes, `state-view.chain.${i}`));
  try {
    await startChain();
    const blockStart = model.state.nextPos;
    for (let t = 0; t < K; t++) {
      await model.decode(block[t], { policy, logits: 'none' });
      const rec = e.recorder('state-view');
      linear.forEach(({ l }, j) => rec.copy(l.S, 0, chainRows[j], t * bytes, bytes));
      e.submit(rec);
    }
    await startBlock();
    await model.step(block, { policy, logits: 'none' });
    const layers: StateView['layers'] = [];
    for (let j = 0; j < linear.length; j++) {
      const [chain, staged] = await readMany(e.device, [
        { buffer: chainRows[j], bytes: K * bytes },
        { buffer: linear[j].l.sStage, bytes: K * bytes },
      ]);
      const a = new Float32Array(chain.buffer, chain.byteOffset, K * floats);
      const b = new Float32Array(staged.buffer, staged.byteOffset, K * floats);
      layers.push({
        layer: linear[j].i,
        rows: Array.from({ length: K }, (_, t) =>
          compareRows(a.subarray(t * floats, (t + 1) * floats), b.subarray(t * floats, (t + 1) * floats), 'f32', t),
        ),
      });
    }
    return {
      blockStart,
      valueHeads: g.numValueHeads,
      keyHeadDim: g.keyHeadDim,
      valueHeadDim: g.valueHeadDim,
      convKernel: g.convKernel,
      convChannels: g.convDim,
      fullLayers: c.layerTypes.flatMap((t, i) => (t === 'full' ? [i] : [])),
      layers,
    };
  } finally {
    chainRows.forEach((b) => b.destroy());
  }
}
