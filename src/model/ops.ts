import type { Recorder } from '../gpu/recorder.ts';
import { f32 } from '../gpu/recorder.ts';
import type { GpuLinear } from './gpu-weights.ts';

/**
 * Typed wrappers around the WGSL kernels: one function per op, taking buffers and sizes. The same
 * function (hence the same compiled pipeline) serves every M, which is what makes rows exact.
 */
const WG = 64;
const groups = (n: number) => Math.ceil(n / WG);
const DENSE_DTYPE: Record<string, number> = { BF16: 0, F16: 1, F32: 2 };

export interface Rows {
  /** Number of rows. */
  M: number;
  /** Round every output to bf16 (bf16 activation mode). */
  round: boolean;
  /** 0: the exact kernel. n > 0: the inexact split-K variant with n ranges (parity-lab policies). */
  split?: number;
  /** A prefill forward: matmuls may use the prefill kernel (both arms of a comparison prefill alike). */
  prefill?: boolean;
}

/** The exact affine kernels ops.matmul can run (benchmarks compare them; the engine picks per phase). */
export type AffineKernel = 'lanes' | 'tile' | 'affine';

/** Whether matmul_lanes.wgsl can run this linear: 4/8-bit, whole 32-weight chunks, vec4 rows of x. */
function lanesFit(lin: GpuLinear, xStride: number): boolean {
  const d = lin.desc;
  return d.kind === 'affine' && (d.bits === 4 || d.bits === 8) && d.groupSize % 32 === 0 && d.inFeatures % 32 === 0 && xStride % 4 === 0;
}

/**
 * y[m, :] = W x[m, :] for a whole linear (every row part).
 *
 * Exact path (split 0) of an affine linear. Every kernel gives a row the same arithmetic whatever M
 * is and wherever the row sits; `kernel` is chosen by phase and by properties of the linear, never
 * by M:
 * - 'lanes' (matmul_lanes_*.wgsl; decode steps and verify blocks): four features per invocation,
 *   weights as vec4<u32>, x shared through subgroups where the device has them. On lavapipe about 3x
 *   faster than `affine` at M = 1 (bench --compare); a block of K rows costs about K chain steps of
 *   compute there, which on GPUs (bandwidth-bound) hides behind the weight reads.
 * - 'tile' (matmul_lanes_*.wgsl `tile`; prefill): four features for a block of 8 rows, each chunk of
 *   weights loaded and unpacked once for the 8 rows. Prefill need not equal decode bit for bit:
 *   both arms of every comparison prefill alike.
 * - 'affine': one invocation per output; the fallback for linears the others cannot run.
 * The parity lab's split > 0 runs the inexact `affine_split` (dense: `main_split`).
 * `npm run bench` measures them on the current adapter (--compare).
 */
export function matmul(rec: Recorder, lin: GpuLinear, x: GPUBuffer, y: GPUBuffer, r: Rows, xStride = lin.desc.inFeatures, yStride = lin.desc.outFeatures, kernel?: AffineKernel): void {
  const { desc } = lin;
  const split = r.split ?? 0;
  const k: AffineKernel = kernel ?? (r.prefill ? 'tile' : 'lanes');
  if (desc.kind === 'affine' && split === 0 && k !== 'affine' && lanesFit(lin, xStride)) {
    const groupCount = desc.inFeatures / desc.groupSize;
    // Group sums of x, [M, groups], once per call (not per output feature); freed after the submit.
    const xs = rec.device.createBuffer({ label: 'matmul-xsums', size: Math.max(16, r.M * groupCount * 4), usage: GPUBufferUsage.STORAGE });
    rec.temporaries.push(xs);
    const xsParams = rec.params([r.M, 0, desc.inFeatures, desc.groupSize, 0, xStride, 0, 0]);
    rec.run('matmul.wgsl', 'affine_xsum', { BITS: desc.bits }, [xsParams, x, undefined, xs], groups(r.M * groupCount));
    lin.weight.parts.forEach((part, i) => {
      const params = rec.params([r.M, part.rows, desc.inFeatures, desc.groupSize, part.rowStart, xStride, yStride, r.round ? 1 : 0]);
      const sb = [lin.scales!.parts[i].buffer, lin.biases!.parts[i].buffer];
      const shader = rec.kernels.subgroupsOf8 ? 'matmul_lanes_subgroupx.wgsl' : 'matmul_lanes_loadx.wgsl';
      if (k === 'lanes') {
        rec.run(shader, 'main', { BITS: desc.bits }, [params, undefined, undefined, y, ...sb, xs, x, part.buffer], Math.ceil(part.rows / (4 * WG)));
      } else {
        rec.run(shader, 'tile', { BITS: desc.bits }, [params, undefined, undefined, y, ...sb, xs, x, part.buffer], Math.ceil(r.M / 8) * Math.ceil(part.rows / (4 * WG)));
      }
    });
    return;
  }
  lin.weight.parts.forEach((part, i) => {
    if (desc.kind === 'affine') {
      const params = rec.params([r.M, part.rows, desc.inFeatures, desc.groupSize, part.rowStart, xStride, yStride, r.round ? 1 : 0]);
      const [entry, constants] = split > 0 ? ['affine_split', { BITS: desc.bits, SPLIT: split }] : ['affine', { BITS: desc.bits }];
      rec.run('matmul.wgsl', entry, constants, [params, x, part.buffer, y, lin.scales!.parts[i].buffer, lin.biases!.parts[i].buffer], groups(r.M * part.rows));
    } else {
      const params = rec.params([r.M, part.rows, desc.inFeatures, 0, part.rowStart, xStride, yStride, r.round ? 1 : 0]);
      const dtype = DENSE_DTYPE[desc.weight.dtype];
      const [entry, constants] = split > 0 ? ['main_split', { DTYPE: dtype, SPLIT: split }] : ['main', { DTYPE: dtype }];
      rec.run('matmul_dense.wgsl', entry, constants, [params, x, part.buffer, y], groups(r.M * part.rows));
    }
  });
}

/** h[m, :] = table[ids[m], :] * scale (a tied embedding, quantized or dense). */
export function embed(rec: Recorder, table: GpuLinear, ids: GPUBuffer, h: GPUBuffer, scale: number, r: Rows): void {
  const { desc } = table;
  const H = desc.inFeatures;
  table.weight.parts.forEach((part, i) => {
    if (desc.kind === 'affine') {
      const params = rec.params([r.M, H, part.rowStart, part.rows, desc.groupSize, f32(scale), r.round ? 1 : 0, 0]);
      rec.run('embed.wgsl', 'affine', { BITS: desc.bits }, [params, ids, part.buffer, h, table.scales!.parts[i].buffer, table.biases!.parts[i].buffer], groups(r.M * H));
    } else {
      const params = rec.params([r.M, H, part.rowStart, part.rows, 0, f32(scale), r.round ? 1 : 0, 0]);
      rec.run('embed.wgsl', 'dense', { DTYPE: DENSE_DTYPE[desc.weight.dtype] }, [params, ids, part.buffer, h], groups(r.M * H));
    }
  });
}

export interface NormArgs {
  rows: number;
  D: number;
  eps: number;
  round: boolean;
  inStride?: number;
  outStride?: number;
  /** Residual mode: out = (out + norm(x)) * postScale. */
  residual?: { postScale: number };
}

/** RMSNorm of `rows` rows of length D; `weight` null = weightless (v_norm). */
export function rmsnorm(rec: Recorder, x: GPUBuffer, weight: GPUBuffer | null, out: GPUBuffer, dummy: GPUBuffer, a: NormArgs): void {
  const params = rec.params([
    a.rows, a.D, a.inStride ?? a.D, a.outStride ?? a.D,
    f32(a.eps), weight ? 1 : 0, a.residual ? 1 : 0, a.round ? 1 : 0,
    f32(a.residual?.postScale ?? 1), 0, 0, 0,
  ]);
  rec.run('rmsnorm.wgsl', 'main', {}, [params, x, weight ?? dummy, out], groups(a.rows));
}

export interface RopeTable {
  cos: GPUBuffer;
  sin: GPUBuffer;
  /** Pairs per position in the table (d / 2). */
  half: number;
  /** Pairs that rotate (the rest have frequency 0). */
  rotPairs: number;
}

/** In-place rotate-half RoPE on [M, heads, d] at positions pos0 .. pos0+M-1. */
export function rope(rec: Recorder, x: GPUBuffer, t: RopeTable, heads: number, d: number, pos0: number, r: Rows): void {
  if (t.rotPairs === 0) return;
  const params = rec.params([r.M, heads, d, pos0, t.rotPairs, t.half, r.round ? 1 : 0, 0]);
  rec.run('rope.wgsl', 'main', {}, [params, x, t.cos, t.sin], groups(r.M * heads * t.rotPairs));
}

/** a = gelu_tanh(a) * b over n elements. */
export function geglu(rec: Recorder, a: GPUBuffer, b: GPUBuffer, n: number, round: boolean): void {
  rec.run('elementwise.wgsl', 'geglu', {}, [rec.params([n, round ? 1 : 0, f32(0), 0]), a, b], groups(n));
}

/** a = cap * tanh(a / cap) over n elements. */
export function softcap(rec: Recorder, a: GPUBuffer, n: number, cap: number, round: boolean): void {
  rec.run('elementwise.wgsl', 'softcap', {}, [rec.params([n, round ? 1 : 0, f32(cap), 0]), a], groups(n));
}

export function argmax(rec: Recorder, logits: GPUBuffer, ids: GPUBuffer, M: number, V: number): void {
  rec.run('argmax.wgsl', 'main', {}, [rec.params([M, V, 0, 0]), logits, ids], M);
}

export const ATTENTION_MODE = { physical: 0, chrono: 1, linear: 2, masked: 3, draft: 4 } as const;
export type AttentionMode = keyof typeof ATTENTION_MODE;

export interface AttentionArgs {
  M: number;
  heads: number;
  kvHeads: number;
  d: number;
  mode: AttentionMode;
  window: number;
  base: number;
  /** Position of row 0. */
  p: number;
  round: boolean;
  /** 0: exact reductions. n > 0: the inexact variant reducing keys in n blocks. */
  split: number;
  /** MODE_DRAFT: how many of the most recent ring entries the query reads (W or W + 1). */
  span?: number;
  q: GPUBuffer;
  kCache: GPUBuffer;
  vCache: GPUBuffer;
  kStage: GPUBuffer;
  vStage: GPUBuffer;
  out: GPUBuffer;
  scratch: { scores: GPUBuffer; sums: GPUBuffer; maxKeys: number };
}

/** Keys each row reduces over in MODE_MASKED: the union of the M rows' windows. */
export function maskedKeyCount(p: number, M: number, window: number): number {
  return p + M - Math.max(0, p + 1 - window);
}

export function attention(rec: Recorder, a: AttentionArgs): void {
  const { maxKeys } = a.scratch;
  const params = rec.params([a.M, a.heads, a.kvHeads, a.d, ATTENTION_MODE[a.mode], a.window, a.base, a.p, maxKeys, a.round ? 1 : 0, a.span ?? 0, 0]);
  const rows = a.M * a.heads;
  const { scores, sums } = a.scratch;
  rec.run('attention.wgsl', 'scores', {}, [params, a.q, a.kCache, undefined, a.kStage, undefined, scores], groups(rows * maxKeys));
  const [sm, pv, constants] = a.split > 0 ? ['softmax_split', 'pv_split', { SPLIT: a.split }] : ['softmax', 'pv', {}];
  rec.run('attention.wgsl', sm, constants, [params, undefined, undefined, undefined, undefined, undefined, scores, undefined, sums], groups(rows));
  rec.run('attention.wgsl', pv, constants, [params, undefined, undefined, a.vCache, undefined, a.vStage, scores, a.out, sums], groups((rows * a.d) / 4));
}
