/** The ops that are not matmuls or norms: embedding lookup, GeGLU, softcap and argmax. */
import type { Recorder } from '../gpu/recorder.ts';
import { partBinding } from '../gpu/upload.ts';
import { layoutConstants } from '../gpu/weight-layout.ts';
import type { GpuLinear } from './gpu-linear.ts';
import { DENSE_DTYPE, groups, type Rows } from './op-rows.ts';

/** h[m, :] = table[ids[m], :] * scale (a tied embedding, quantized or dense). */
export function embed(rec: Recorder, table: GpuLinear, ids: GPUBuffer, h: GPUBuffer, scale: number, r: Rows): void {
  const { desc } = table;
  const H = desc.inFeatures;
  table.weight.parts.forEach((part, i) => {
    if (desc.kind === 'affine') {
      const params = rec.params('embed.wgsl', {
        M: r.M,
        H,
        row_start: part.rowStart,
        rows: part.rows,
        group_size: desc.groupSize,
        scale,
        round: r.round,
      });
      rec.run(
        'embed.wgsl',
        'affine',
        { BITS: desc.bits, ...layoutConstants(table.layout) },
        [params, ids, partBinding(part), h, partBinding(table.scales!.parts[i]), partBinding(table.biases!.parts[i])],
        groups(r.M * H),
      );
    } else {
      const params = rec.params('embed.wgsl', {
        M: r.M,
        H,
        row_start: part.rowStart,
        rows: part.rows,
        group_size: 0,
        scale,
        round: r.round,
      });
      rec.run(
        'embed.wgsl',
        'dense',
        { DTYPE: DENSE_DTYPE[desc.weight.dtype] },
        [params, ids, partBinding(part), h],
        groups(r.M * H),
      );
    }
  });
}

/** a = gelu_tanh(a) * b over n elements. */
export function geglu(rec: Recorder, a: GPUBuffer, b: GPUBuffer, n: number, round: boolean): void {
  rec.run('elementwise.wgsl', 'geglu', {}, [rec.params('elementwise.wgsl', { n, round, cap: 0 }), a, b], groups(n));
}

/** a = cap * tanh(a / cap) over n elements. */
export function softcap(rec: Recorder, a: GPUBuffer, n: number, cap: number, round: boolean): void {
  rec.run('elementwise.wgsl', 'softcap', {}, [rec.params('elementwise.wgsl', { n, round, cap }), a], groups(n));
}

/** Indices per workgroup of argmax.wgsl `parts` (at least; more when a row has over ARGMAX_WG of them). */
const ARGMAX_SPAN = 4096;
/** argmax.wgsl's workgroup size, which bounds the ranges `merge` takes per row. */
const ARGMAX_WG = 256;

/**
 * ids[m] = the first index of the maximum of logits row m, or NAN_ROW_ID (nan-row.ts) if the row holds a NaN. Rows longer than
 * ARGMAX_SPAN (vocabularies) are cut into ranges, one workgroup each, whose bests one more dispatch
 * merges; shorter rows take one workgroup. Both are exact (argmax.wgsl).
 */
export function argmax(rec: Recorder, logits: GPUBuffer, ids: GPUBuffer, M: number, V: number): void {
  const span = Math.max(ARGMAX_SPAN, Math.ceil(V / ARGMAX_WG));
  if (V <= span) {
    rec.run('argmax.wgsl', 'main', {}, [rec.params('argmax.wgsl', { M, V, span, parts: 1 }), logits, ids], M);
    return;
  }
  const parts = Math.ceil(V / span);
  const cand = rec.kernels.scratch('argmax.cand', M * parts * 8);
  const params = rec.params('argmax.wgsl', { M, V, span, parts });
  rec.run('argmax.wgsl', 'parts', {}, [params, logits, undefined, cand], parts * M);
  rec.run('argmax.wgsl', 'merge', {}, [params, undefined, ids, cand], M);
}
