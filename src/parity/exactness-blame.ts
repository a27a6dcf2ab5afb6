/**
 * Which kernel first made a verify block differ from the chain: the exactness self-test's attribution
 * (src/parity/exactness-selftest.ts). Both arms are run again with the output of every kernel of every layer
 * captured (the stages localization reads, and between them ForwardPass's op-level captures, OP_CAPTURE), in the
 * order the forward runs them; the first output in that order whose block row differs from the chain's row, while
 * every output before it is equal, is the kernel that broke the contract: it was handed equal rows and gave back
 * different ones.
 */
import type { TargetDescription } from '../format/model-description.ts';
import type { KernelClass } from '../gpu/kernel-class.ts';
import { OP_CAPTURE } from '../model/gemma4/forward-pass.ts';
import { compareRows, type Storage } from './compare.ts';

/** The kernel families of the exact path that the attribution can name. */
export type KernelName = 'rmsnorm' | 'matmul' | 'attention';

/** One kernel's output in a forward: the capture holding it and what produced it. */
interface OpPoint {
  /** Capture name without the layer suffix (`op:xn`, `q`, `attn`, ...). */
  capture: string;
  kernel: KernelName;
  /** What the kernel computes there, in words. */
  what: string;
}

/** A layer's kernels in the order ForwardPass.selfAttention, attentionOut, mlp and the layer's end run them. */
const LAYER_OPS: readonly OpPoint[] = [
  { capture: `${OP_CAPTURE}xn`, kernel: 'rmsnorm', what: 'input norm' },
  { capture: `${OP_CAPTURE}qproj`, kernel: 'matmul', what: 'q projection' },
  { capture: `${OP_CAPTURE}kproj`, kernel: 'matmul', what: 'k projection' },
  { capture: `${OP_CAPTURE}vproj`, kernel: 'matmul', what: 'v projection' },
  { capture: 'q', kernel: 'rmsnorm', what: 'q norm and RoPE' },
  { capture: 'k', kernel: 'rmsnorm', what: 'k norm and RoPE' },
  { capture: 'v', kernel: 'rmsnorm', what: 'v norm' },
  { capture: `${OP_CAPTURE}attention`, kernel: 'attention', what: 'attention' },
  { capture: 'attn', kernel: 'matmul', what: 'o projection' },
  { capture: `${OP_CAPTURE}ffn_in`, kernel: 'rmsnorm', what: 'post-attention residual and pre-feedforward norm' },
  { capture: `${OP_CAPTURE}gate_up`, kernel: 'matmul', what: 'gate and up projections with GeGLU' },
  { capture: 'mlp', kernel: 'matmul', what: 'down projection' },
  { capture: 'layer', kernel: 'rmsnorm', what: 'post-feedforward norm and residual' },
];
const FINAL_OPS: readonly OpPoint[] = [
  { capture: 'final_norm', kernel: 'rmsnorm', what: 'final norm' },
  { capture: 'logits', kernel: 'matmul', what: 'LM head' },
];

/** Every capture name the attribution reads for a model of `layers` layers (StepOptions.captures). */
export function blameCaptures(layers: number): Set<string> {
  const names = new Set<string>();
  for (let i = 0; i < layers; i++) for (const o of LAYER_OPS) names.add(`${o.capture}.${i}`);
  for (const o of FINAL_OPS) names.add(o.capture);
  return names;
}

/** The WGSL that runs a kernel family in a kernel class (src/gpu/kernel-class.ts, README "Kernels by adapter class"). */
export function kernelSource(kernel: KernelName, cls: KernelClass): string {
  if (kernel === 'matmul') return cls === 'gpu' ? 'matmul_coop.wgsl' : 'matmul_lanes_*.wgsl';
  if (kernel === 'attention')
    return cls === 'gpu' ? 'attention.wgsl seg_fused + combine_fused' : 'attention.wgsl four passes';
  return cls === 'gpu' ? 'rmsnorm.wgsl rows_wg / qkv_rows' : 'rmsnorm.wgsl main';
}

export interface Blame {
  kernel: KernelName;
  /** The kernel's WGSL in this class. */
  source: string;
  layer: number | null;
  what: string;
  /** The first block row whose output differs. */
  row: number;
  /** "matmul (matmul_lanes_*.wgsl): layer 0 (sliding) q projection, block row 1" */
  text: string;
}

/**
 * The first kernel output where the block's rows differ from the chain's (each capture: K rows of the block arm,
 * and the chain arm's K single-row captures laid end to end), compared in `storage`'s bytes; undefined when every
 * captured output is equal (the logits then cannot differ either).
 */
export function blameKernel(
  desc: Pick<TargetDescription, 'layers'>,
  chain: Map<string, Float32Array>,
  block: Map<string, Float32Array>,
  K: number,
  storage: Storage,
  cls: KernelClass,
): Blame | undefined {
  const points: { name: string; op: OpPoint; layer: number | null }[] = [];
  desc.layers.forEach((_, i) => {
    for (const op of LAYER_OPS) points.push({ name: `${op.capture}.${i}`, op, layer: i });
  });
  for (const op of FINAL_OPS) points.push({ name: op.capture, op, layer: null });
  for (const p of points) {
    const a = chain.get(p.name);
    const b = block.get(p.name);
    if (!a || !b) continue;
    if (a.length !== b.length || a.length % K !== 0)
      throw new Error(`capture ${p.name}: ${a.length} chain values against ${b.length} block values for ${K} rows`);
    const width = a.length / K;
    for (let row = 0; row < K; row++) {
      const diff = compareRows(
        a.subarray(row * width, (row + 1) * width),
        b.subarray(row * width, (row + 1) * width),
        storage,
        row,
      );
      if (diff.bytesDiffering === 0) continue;
      const source = kernelSource(p.op.kernel, cls);
      const where = p.layer === null ? p.op.what : `layer ${p.layer} (${desc.layers[p.layer].type}) ${p.op.what}`;
      return {
        kernel: p.op.kernel,
        source,
        layer: p.layer,
        what: p.op.what,
        row,
        text: `${p.op.kernel} (${source}): ${where}, block row ${row}`,
      };
    }
  }
  return undefined;
}
