/**
 * Kernel classes as the engine dispatches them (src/model/ops.ts through a Recorder), on synthetic GPU
 * buffers at real Gemma 4 shapes: affine matmul (matvec M = 1 and verify blocks M = K), prefill
 * matmul, attention decode (sliding ring and full cache) and the LM head. Browser-safe.
 */
import * as op from '../model/ops.ts';
import { Recorder } from '../gpu/recorder.ts';
import { createAttentionScratch } from '../model/attention-op.ts';
import { SYNTH_PRESETS, type SynthGeometry } from '../format/synthetic.ts';
import type { AffineBits } from '../format/quantization.ts';
import { storageBuffer } from '../gpu/buffers.ts';
import type { GpuTimer, Timing } from './timer.ts';
import { copyLinear, kMajorLinear, randomF32, syntheticAffine, type SyntheticLinear } from './synthetic-gpu.ts';
import { defaultLayout } from '../model/gpu-weights.ts';
import { kMajorFits } from '../gpu/weight-layout.ts';
import type { AffineLinear } from '../format/model-description.ts';

import type { AffineKernel } from '../model/ops.ts';
export type { AffineKernel };

/** Shapes of one target geometry that the kernel benchmarks use (docs/MODEL.md section 1). */
export type BenchShapes = Pick<
  SynthGeometry,
  | 'hidden'
  | 'intermediate'
  | 'vocab'
  | 'heads'
  | 'kvHeads'
  | 'headDim'
  | 'globalKvHeads'
  | 'globalHeadDim'
  | 'window'
  | 'groupSize'
> & {
  name: string;
  /** Keys of the full-attention decode benchmark (default 4096). */
  fullKeys?: number;
};

/** The real geometries come from one place: the synthetic checkpoint presets (docs/MODEL.md section 1). */
function shapesOf(name: string, g: SynthGeometry): BenchShapes {
  const { hidden, intermediate, vocab, heads, kvHeads, headDim, globalKvHeads, globalHeadDim, window, groupSize } = g;
  return {
    name,
    hidden,
    intermediate,
    vocab,
    heads,
    kvHeads,
    headDim,
    globalKvHeads,
    globalHeadDim,
    window,
    groupSize,
  };
}

export const BENCH_SHAPES: Record<'12b' | '31b', BenchShapes> = {
  '12b': shapesOf('12B', SYNTH_PRESETS['12b']),
  '31b': shapesOf('31B', SYNTH_PRESETS['31b']),
};

export type KernelClass = 'matmul' | 'prefill' | 'attention' | 'lm-head';

export interface KernelResult {
  class: KernelClass;
  /** e.g. "12B mlp.gate 4-bit [15360 x 3840]" */
  name: string;
  model: string;
  M: number;
  /** Kernel variant (matmul: the ops.matmul kernel; attention: the mode). */
  kernel: string;
  /** True when this is the variant the engine uses. */
  engine: boolean;
  bytes: number;
  flops: number;
  seconds: number;
  gbPerS: number;
  gflopPerS: number;
  /** gbPerS / the adapter's copy bandwidth. */
  bwRatio: number;
  /** gflopPerS / the adapter's f32 FMA throughput. */
  flopRatio: number;
  timing: Timing;
  note?: string;
}

export interface Yardsticks {
  copyGBps: number;
  fmaGflops: number;
}

function result(
  base: Omit<KernelResult, 'gbPerS' | 'gflopPerS' | 'bwRatio' | 'flopRatio' | 'seconds'>,
  y: Yardsticks,
): KernelResult {
  const seconds = base.timing.seconds;
  const gbPerS = base.bytes / seconds / 1e9;
  const gflopPerS = base.flops / seconds / 1e9;
  return { ...base, seconds, gbPerS, gflopPerS, bwRatio: gbPerS / y.copyGBps, flopRatio: gflopPerS / y.fmaGflops };
}

export interface MatmulCase {
  cls: KernelClass;
  label: string;
  lin: SyntheticLinear;
  Ms: number[];
  kernels: AffineKernel[];
  engineKernel: AffineKernel;
  note?: string;
  /** Run (and discard) one measurement first; default true (false when the linear is already warm). */
  warm?: boolean;
  /**
   * Cycle through copies of the linear totalling at least this many bytes (0: one copy), so that
   * replays read weights from memory rather than from a cache that holds the whole linear (H200: 50 MB
   * of L2 against a 30 MB 12B MLP linear).
   */
  coldBytes?: number;
}

/**
 * One linear at several M and kernels: weights + x + y bytes, 2 M N K flops. The timed dispatches are
 * the matmul kernel alone (its x group sums precomputed, as the engine's fused norms provide them).
 */
export async function benchMatmul(
  timer: GpuTimer,
  model: string,
  c: MatmulCase,
  y: Yardsticks,
  onResult: (r: KernelResult) => void,
): Promise<KernelResult[]> {
  const { N, K } = { N: c.lin.desc.outFeatures, K: c.lin.desc.inFeatures };
  const maxM = Math.max(...c.Ms);
  const device = timer.device;
  const x = randomF32(device, maxM * K, 'bench-x');
  const out = storageBuffer(device, maxM * N * 4, 'bench-y');
  const results: KernelResult[] = [];
  const copies = [c.lin];
  const wanted = Math.min(MAX_COPIES, Math.ceil((c.coldBytes ?? 0) / c.lin.weightBytes));
  while (copies.length < wanted) copies.push(copyLinear(device, c.lin));
  const each = (f: (lin: SyntheticLinear) => void) => copies.forEach(f);
  try {
    // A discarded measurement first: fresh buffers (and clocks after the CPU filled them) run slowly
    // for a while on real GPUs, which would otherwise land on whichever case comes first.
    if (c.warm !== false)
      await timer.measure((rec) =>
        each((lin) => op.matmul(rec, lin, x, out, { M: maxM, round: false }, K, N, c.kernels[0])),
      );
    for (const kernel of c.kernels) {
      for (const M of c.Ms) {
        // The group sums of x are computed once, outside the timed dispatches: the engine computes them
        // in the norm before most of its matmuls (q/k/v, gate/up), and they are the same for every copy.
        const pre = new Recorder(device, timer.kernels, 'bench-sums');
        const sums = op.groupSums(pre, c.lin, x, { M, round: false }, K, 'bench');
        pre.submit();
        const all = await timer.measure((rec) =>
          each((lin) => op.matmul(rec, lin, x, out, { M, round: false }, K, N, kernel, sums)),
        );
        const timing = perCopy(all, copies.length);
        const r = result(
          {
            class: c.cls,
            name: c.label,
            model,
            M,
            kernel,
            engine: kernel === c.engineKernel,
            bytes: c.lin.weightBytes + M * (K + N) * 4,
            flops: 2 * M * N * K,
            timing,
            note: [c.note, coldNote(copies.length)].filter(Boolean).join('; ') || undefined,
          },
          y,
        );
        results.push(r);
        onResult(r);
      }
    }
  } finally {
    x.destroy();
    out.destroy();
    copies.slice(1).forEach((l) => l.destroy());
  }
  return results;
}

const MAX_COPIES = 16;

/** A timing of `copies` replays of the same work (one per copy of the weights), as the time of one. */
function perCopy(all: Timing, copies: number): Timing {
  return {
    ...all,
    seconds: all.seconds / copies,
    wallSeconds: all.wallSeconds / copies,
    dispatches: all.dispatches / copies,
  };
}
const coldNote = (copies: number) =>
  copies > 1 ? `cycles through ${copies} copies of the weights (cold cache)` : undefined;

export interface GateUpCase {
  label: string;
  gate: SyntheticLinear;
  up: SyntheticLinear;
  /** The down projection that reads g: where the engine fuses its x group sums in (ops.downSumsFused), so does the bench. */
  down?: SyntheticLinear;
  Ms: number[];
  /** The engine's step kernel ('coop': one fused gate_up dispatch; else two matmuls and the GeGLU). */
  engineKernel: AffineKernel;
  coldBytes?: number;
}

/**
 * The MLP's first half as the engine runs it (op.gateUp: on GPUs one matmul_coop.wgsl `gate_up`
 * dispatch, both projections and the GeGLU, and down's x group sums where they fuse; on software
 * adapters two matmuls and elementwise.wgsl geglu): both weights + x + output bytes, 4 M N K flops. The x group sums are precomputed, as in
 * benchMatmul.
 */
export async function benchGateUp(
  timer: GpuTimer,
  model: string,
  c: GateUpCase,
  y: Yardsticks,
  onResult: (r: KernelResult) => void,
): Promise<KernelResult[]> {
  const { N, K } = { N: c.gate.desc.outFeatures, K: c.gate.desc.inFeatures };
  const maxM = Math.max(...c.Ms);
  const device = timer.device;
  const x = randomF32(device, maxM * K, 'bench-x');
  const g = storageBuffer(device, maxM * N * 4, 'bench-g');
  const u = storageBuffer(device, maxM * N * 4, 'bench-u');
  const pairBytes = c.gate.weightBytes + c.up.weightBytes;
  const copies: [SyntheticLinear, SyntheticLinear][] = [[c.gate, c.up]];
  const wanted = Math.min(MAX_COPIES, Math.ceil((c.coldBytes ?? 0) / pairBytes));
  while (copies.length < wanted) copies.push([copyLinear(device, c.gate), copyLinear(device, c.up)]);
  // The row's kernel: what op.gateUp ran (it returns down's sums where gate_up_sums wrote them).
  const kernelOf = (withSums: boolean) =>
    c.engineKernel !== 'coop' ? `${c.engineKernel} x 2 + geglu` : withSums ? 'coop gate_up_sums' : 'coop gate_up';
  const results: KernelResult[] = [];
  try {
    for (const M of c.Ms) {
      const pre = new Recorder(device, timer.kernels, 'bench-sums');
      const sums = op.groupSums(pre, c.gate, x, { M, round: false }, K, 'bench');
      pre.submit();
      let withSums = false;
      const all = await timer.measure((rec) =>
        copies.forEach(([gate, up]) => {
          withSums = op.gateUp(rec, gate, up, x, g, u, { M, round: false }, sums, c.down) !== undefined;
        }),
      );
      const timing = perCopy(all, copies.length);
      const r = result(
        {
          class: 'matmul',
          name: c.label,
          model,
          M,
          kernel: kernelOf(withSums),
          engine: true,
          bytes: pairBytes + M * (K + N) * 4,
          flops: 4 * M * N * K,
          timing,
          note: coldNote(copies.length),
        },
        y,
      );
      results.push(r);
      onResult(r);
    }
  } finally {
    [x, g, u].forEach((b) => b.destroy());
    copies.slice(1).forEach(([a, b]) => {
      a.destroy();
      b.destroy();
    });
  }
  return results;
}

export function makeLinear(
  device: GPUDevice,
  name: string,
  N: number,
  K: number,
  bits: AffineBits,
  gs: number,
): SyntheticLinear {
  const lin = syntheticAffine(device, name, N, K, bits, gs, N ^ (K << 3) ^ bits);
  // the layout the engine uploads on this device (src/gpu/weight-layout.ts)
  if (defaultLayout(device) !== 'k-major' || !kMajorFits(lin.desc as AffineLinear)) return lin;
  const moved = kMajorLinear(device, lin);
  lin.destroy();
  return moved;
}

export interface AttentionCase {
  label: string;
  mode: 'physical' | 'linear';
  heads: number;
  kvHeads: number;
  d: number;
  /** Keys each row reads: ring slots (physical) or cache rows (linear). */
  keys: number;
  window: number;
  Ms: number[];
}

/**
 * op.attention as a chain step (M = 1) or verify block reads the cache: a full ring (physical slot
 * order, p past the window) or a full-attention cache of `keys` rows (linear, p = keys - M).
 * Bytes: K and V rows read once + q + out; flops: 2 (q.k) + 2 (p.v) per key and channel per head.
 */
export async function benchAttention(
  timer: GpuTimer,
  model: string,
  c: AttentionCase,
  y: Yardsticks,
  onResult: (r: KernelResult) => void,
): Promise<KernelResult[]> {
  const device = timer.device;
  const maxM = Math.max(...c.Ms);
  const row = c.kvHeads * c.d;
  const slots = c.mode === 'physical' ? c.window : c.keys;
  const scratch = createAttentionScratch(
    device,
    {
      heads: c.heads,
      qWidth: c.heads * c.d,
      maxKeys: c.mode === 'physical' ? c.window : c.keys,
      prefillRows: 0,
      stepRows: maxM,
    },
    'bench-attn',
  );
  const bufs = {
    q: randomF32(device, maxM * c.heads * c.d, 'bench-q', 3),
    k: randomF32(device, slots * row, 'bench-k', 4),
    v: randomF32(device, slots * row, 'bench-v', 5),
    kStage: randomF32(device, maxM * row, 'bench-k-stage', 6),
    vStage: randomF32(device, maxM * row, 'bench-v-stage', 7),
    out: storageBuffer(device, maxM * c.heads * c.d * 4, 'bench-attn-out'),
  };
  const results: KernelResult[] = [];
  try {
    for (const M of c.Ms) {
      const p = c.mode === 'physical' ? 2 * c.window + 5 : c.keys - M;
      const timing = await timer.measure((rec) =>
        op.attention(rec, {
          M,
          heads: c.heads,
          kvHeads: c.kvHeads,
          d: c.d,
          mode: c.mode,
          window: c.window,
          base: 0,
          p,
          round: false,
          split: 0,
          q: bufs.q,
          kCache: bufs.k,
          vCache: bufs.v,
          kStage: c.mode === 'linear' ? bufs.k : bufs.kStage,
          vStage: c.mode === 'linear' ? bufs.v : bufs.vStage,
          out: bufs.out,
          scratch: scratch.step,
        }),
      );
      const keysRead = c.mode === 'physical' ? c.window : c.keys;
      const bytes = 2 * keysRead * row * 4 + 2 * M * c.heads * c.d * 4;
      const flops = 4 * M * c.heads * keysRead * c.d;
      const r = result(
        { class: 'attention', name: c.label, model, M, kernel: c.mode, engine: true, bytes, flops, timing },
        y,
      );
      results.push(r);
      onResult(r);
    }
  } finally {
    [...Object.values(bufs), ...scratch.buffers].forEach((b) => b.destroy());
  }
  return results;
}
