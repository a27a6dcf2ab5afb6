/**
 * The centroid LM head of the Gemma 4 E-series assistants (use_ordered_embeddings; docs/GEMMA4-FAMILY.md
 * section 7) on the GPU, one draft step at a time:
 *   c        = W_centroids y                              (ops.matmul: [C] centroid logits)
 *   selected = token_ordering rows of the top-K clusters  (centroid_head.wgsl select_tokens: K * V / C ids)
 *   rows     = E[selected]                                (embed.wgsl: the tied embedding's rows, dequantized as
 *                                                          the embedding gathers them, bf16 in bf16 mode)
 *   logits   = rows . y                                   (matmul_dense.wgsl over the gathered f32 rows)
 *   token    = selected[argmax(logits)]                   (argmax.wgsl: the first maximum in selected order;
 *                                                          centroid_head.wgsl pick)
 * Everything stays on the GPU, so the assistant chains its draft steps in one command buffer as with a dense
 * head. The full-vocabulary row (the fill outside the scored tokens) is only built for captures, on the CPU.
 * CPU twin: src/reference/gemma4/e-series/centroid-head.ts.
 */
import type { CentroidHead } from '../../../format/model-description.ts';
import { FormatError } from '../../../format/errors.ts';
import { toFloat64 } from '../../../format/dtype.ts';
import { readTensorBytes } from '../../../format/safetensors.ts';
import { readMany, storageBuffer } from '../../../gpu/buffers.ts';
import { GpuError } from '../../../gpu/errors.ts';
import type { Recorder } from '../../../gpu/recorder.ts';
import type { GpuTensor } from '../../../gpu/upload.ts';
import type { GpuLinear } from '../../gpu-linear.ts';
import * as op from '../../ops.ts';

/** centroid_head.wgsl's MAX_K: the chosen clusters live in a fixed-size workgroup array. */
export const CENTROID_MAX_TOP_K = 256;

/** The centroid head's weights on the GPU; the scored rows come from the assistant's tied embedding. */
export interface GpuCentroidHead {
  numCentroids: number;
  topK: number;
  centroids: GpuLinear;
  /** token_ordering as stored (I32, or I64 read through its low words). */
  tokenOrdering: GpuTensor;
  /** u32 words per token_ordering entry: 1 (I32) or 2 (I64). */
  orderingStride: number;
}

/**
 * Checks token_ordering before it reaches the GPU: the kernel gathers embedding rows by these ids, and an id
 * outside [0, V) or a repeated one would score a wrong token set silently (embed.wgsl skips unknown ids).
 */
export async function checkTokenOrdering(ch: CentroidHead, vocab: number): Promise<void> {
  const t = ch.tokenOrdering;
  const ids = toFloat64(await readTensorBytes(t), t.dtype);
  if (ids.length !== vocab)
    throw new FormatError(
      `${t.file.name}: ${t.name} has ${ids.length} ids, expected vocab ${vocab}`,
      t.file.name,
      t.name,
    );
  const seen = new Uint8Array(vocab);
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i];
    if (!Number.isInteger(id) || id < 0 || id >= vocab)
      throw new FormatError(
        `${t.file.name}: ${t.name}[${i}] = ${id} is not a token id in [0, ${vocab}) (token_ordering is a permutation of the vocabulary)`,
        t.file.name,
        t.name,
      );
    if (seen[id])
      throw new FormatError(
        `${t.file.name}: ${t.name} lists token ${id} twice (token_ordering is a permutation of the vocabulary)`,
        t.file.name,
        t.name,
      );
    seen[id] = 1;
  }
  if (ch.topK > CENTROID_MAX_TOP_K)
    throw new GpuError(
      'unsupported',
      `centroid_intermediate_top_k ${ch.topK} exceeds what the GPU centroid head keeps (${CENTROID_MAX_TOP_K})`,
    );
}

/** What one drafted step of the centroid head produced, read back for captures. */
export interface CentroidCapture {
  /** [steps, C]. */
  centroidLogits: Float32Array;
  /** [steps, K * V / C] scored token ids, cluster after cluster (transformers' order). */
  selected: Uint32Array;
  /** [steps, K * V / C] their logits. */
  selectedLogits: Float32Array;
}

export class CentroidHeadOp {
  /** Scored tokens per step: K clusters of V / C tokens. */
  readonly scored: number;
  private readonly per: number;
  private readonly bufs: Record<string, GPUBuffer> = {};

  constructor(
    private readonly device: GPUDevice,
    private readonly head: GpuCentroidHead,
    private readonly embed: GpuLinear,
    private readonly maxSteps: number,
  ) {
    const V = embed.desc.outFeatures;
    const C = head.numCentroids;
    if (V % C !== 0) throw new Error(`vocab ${V} is not a multiple of ${C} centroids`);
    if (head.topK > CENTROID_MAX_TOP_K)
      throw new GpuError(
        'unsupported',
        `top-${head.topK} clusters exceed the GPU centroid head's ${CENTROID_MAX_TOP_K}`,
      );
    if (head.tokenOrdering.parts.length !== 1)
      throw new GpuError(
        'limits',
        `token_ordering is split into ${head.tokenOrdering.parts.length} buffers; the centroid head reads one`,
        "This checkpoint's vocabulary needs a larger buffer than this adapter allows.",
      );
    this.per = V / C;
    this.scored = head.topK * this.per;
    const n = this.scored;
    const h = embed.desc.inFeatures;
    const f = (name: string, words: number) => (this.bufs[name] = storageBuffer(device, words * 4, `centroid.${name}`));
    f('centroidLogits', C);
    f('clusters', head.topK);
    f('selected', n);
    f('rows', n * h);
    f('logits', n);
    f('best', 1);
    f('outCentroid', maxSteps * C);
    f('outSelected', maxSteps * n);
    f('outLogits', maxSteps * n);
  }

  /** Records one step: the hidden row y [h] (the assistant's final-norm output) to the drafted token in `token[0]`. */
  record(rec: Recorder, y: GPUBuffer, token: GPUBuffer, round: boolean): void {
    const b = this.bufs;
    const C = this.head.numCentroids;
    const h = this.embed.desc.inFeatures;
    const n = this.scored;
    op.matmul(rec, this.head.centroids, y, b.centroidLogits, { M: 1, round });
    const ordering = this.head.tokenOrdering.parts;
    const params = rec.params('centroid_head.wgsl', {
      C,
      K: this.head.topK,
      per: this.per,
      ord_stride: this.head.orderingStride,
    });
    rec.run(
      'centroid_head.wgsl',
      'select_tokens',
      {},
      [params, b.centroidLogits, ordering[0].buffer, b.selected, b.clusters],
      1,
    );
    // The scored rows as the embedding gathers them (every row part of a split table), then their dot products
    // with y through the dense matmul's compensated sum (f32 rows: DTYPE 2).
    op.embed(rec, this.embed, b.selected, b.rows, 1, { M: n, round });
    const dense = rec.params('matmul_dense.wgsl', {
      M: 1,
      N: n,
      K: h,
      n_offset: 0,
      x_stride: h,
      y_stride: n,
      round,
    });
    rec.run('matmul_dense.wgsl', 'main', { DTYPE: 2 }, [dense, y, b.rows, b.logits], Math.ceil(n / 64));
    op.argmax(rec, b.logits, b.best, 1, n);
    rec.run('centroid_head.wgsl', 'pick', {}, [params, undefined, undefined, b.selected, undefined, b.best, token], 1);
  }

  /** Records copies of this step's centroid logits, scored ids and their logits into the capture slots. */
  capture(rec: Recorder, step: number): void {
    if (step >= this.maxSteps) throw new Error(`capture slot ${step} of ${this.maxSteps}`);
    const b = this.bufs;
    const C = this.head.numCentroids;
    const n = this.scored;
    rec.copy(b.centroidLogits, 0, b.outCentroid, step * C * 4, C * 4);
    rec.copy(b.selected, 0, b.outSelected, step * n * 4, n * 4);
    rec.copy(b.logits, 0, b.outLogits, step * n * 4, n * 4);
  }

  /** Reads back the first `steps` capture slots. */
  async read(steps: number): Promise<CentroidCapture> {
    const b = this.bufs;
    const C = this.head.numCentroids;
    const n = this.scored;
    const [c, s, l] = await readMany(this.device, [
      { buffer: b.outCentroid, bytes: steps * C * 4 },
      { buffer: b.outSelected, bytes: steps * n * 4 },
      { buffer: b.outLogits, bytes: steps * n * 4 },
    ]);
    return {
      centroidLogits: new Float32Array(c.buffer, c.byteOffset, steps * C),
      selected: new Uint32Array(s.buffer, s.byteOffset, steps * n),
      selectedLogits: new Float32Array(l.buffer, l.byteOffset, steps * n),
    };
  }

  destroy(): void {
    Object.values(this.bufs).forEach((x) => x.destroy());
  }
}

/**
 * The full-vocabulary rows [steps, V] of captured steps, as transformers returns them: the scored logits at their
 * tokens and `fill` elsewhere: 'min-minus-one' (each row's smallest scored logit minus 1: transformers, mlx-vlm) or a
 * number (vLLM's dtype minimum). Greedy drafting does not depend on it.
 */
export function fullLogits(
  c: CentroidCapture,
  steps: number,
  vocab: number,
  fill: 'min-minus-one' | number,
): Float32Array {
  const n = c.selected.length / steps;
  const out = new Float32Array(steps * vocab);
  for (let s = 0; s < steps; s++) {
    const sel = c.selected.subarray(s * n, (s + 1) * n);
    const lg = c.selectedLogits.subarray(s * n, (s + 1) * n);
    let min = Infinity;
    for (const v of lg) if (v < min) min = v;
    // min - 1 in f64, then stored as f32 as every logit here is
    out.fill(fill === 'min-minus-one' ? min - 1 : fill, s * vocab, (s + 1) * vocab);
    for (let j = 0; j < n; j++) out[s * vocab + sel[j]] = lg[j];
  }
  return out;
}
