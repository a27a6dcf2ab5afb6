/**
 * The exactness self-test: before a verdict on an adapter, does this adapter's shader compiler keep a verify
 * block's rows equal to the single-token chain, byte for byte, as Ringside's kernels are built to? A compiler
 * that contracts, reassociates or simplifies one copy of a loop and not another (Metal's relaxed math, which
 * Chrome and Safari use on a Mac) could break that where no test of Ringside's own ran; this runs on the user's
 * machine, through the very pipelines a run there uses.
 *
 * The model is built in memory (SELFTEST_GEOMETRY, src/format/synthetic.ts: deterministic pseudo-random weights,
 * no file). For each kernel class the adapter uses and each precision (f32, bf16), one prefill, then classic
 * decode steps up to where a block of K rows crosses the sliding ring's wrap (slot W - 1 to slot 0, the ring
 * full), and for K = 8, 4 and 2 the probe's two arms from one snapshot: K decode steps (the chain) and one verify
 * block of K rows, whose logits are compared in the precision's storage bytes. A check that differs is run again
 * with every kernel's output captured, and the first kernel whose block rows differ from the chain's is named
 * (exactness-blame.ts).
 */
import type { TargetDescription } from '../format/model-description.ts';
import { openCheckpoint } from '../format/checkpoint.ts';
import { synthGeometry, syntheticCheckpoint, type SynthGeometry } from '../format/synthetic.ts';
import type { GpuContext } from '../gpu/device.ts';
import { KernelCache, type PipelinePool } from '../gpu/kernels.ts';
import {
  detectKernelClass,
  GPU_CLASS_STORAGE_BUFFERS,
  isSoftwareAdapter,
  type KernelClass,
} from '../gpu/kernel-class.ts';
import type { KernelFault } from '../gpu/kernel-fault.ts';
import { uploadWeights, type GpuWeights } from '../model/gpu-weights.ts';
import type { CacheSnapshot } from '../model/gemma4/kv-cache.ts';
import { buildTarget, type GemmaTargetModel } from '../model/build-target.ts';
import type { ForwardResult, Precision } from '../model/target.ts';
import type { CancelToken, ProgressFn } from '../util/cancel.ts';
import { compareRows } from './compare.ts';
import { blameCaptures, blameKernel, type KernelName } from './exactness-blame.ts';

/**
 * The built-in models: dense Gemma 4 targets of two layers (one sliding, one full), 4-bit affine in groups of 64,
 * with a sliding window of 16 (a short walk to the ring's wrap). `wide` has the 12B's kernel shapes at a hidden
 * width of 256, so that the GPU class runs the very pipelines a 12B or 31B run creates (the same override
 * constants: a stacked q, k, v of 8192 rows, two features per invocation; an LM head of 12288 rows, four; gate and
 * up of 12288 rows, eight invocations per feature in workgroups of 512; down from 12288, in workgroups of 512;
 * attention in head pairs of 256 and full-layer heads of 512): 10 MB of weights. `narrow` keeps the tiny-a
 * fixture's widths (the tiny preset): the software class's pipelines do not depend on the widths, and a software
 * adapter takes it for the GPU class too, where llvmpipe compiled the wide model's GPU-class pipelines for 17
 * minutes (lavapipe on this project's 2-core CI machine type under load; 19 pipelines). The prompt of 72 tokens
 * gives the full layer more than 64 keys, so its rows are reduced in two segments and combined (attention.wgsl
 * SEG_KEYS).
 */
const COMMON: Partial<SynthGeometry> = {
  modelType: 'gemma4',
  layers: 2,
  window: 16,
  bits: 4,
  groupSize: 64,
  mlpBits: null,
  assistant: null,
};
export type SelfTestModel = 'wide' | 'narrow';
export const SELFTEST_GEOMETRY: Readonly<Record<SelfTestModel, SynthGeometry>> = {
  wide: synthGeometry('tiny', {
    ...COMMON,
    vocab: 12288,
    hidden: 256,
    intermediate: 12288,
    heads: 16,
    kvHeads: 8,
    headDim: 256,
    globalKvHeads: 1,
    globalHeadDim: 512,
  }),
  narrow: synthGeometry('tiny', COMMON),
};

/** The model a kernel class checks on this adapter: the wide one for the GPU class on a GPU. */
export function selfTestModel(cls: KernelClass, ctx: GpuContext): SelfTestModel {
  return cls === 'gpu' && !isSoftwareAdapter(ctx.report) ? 'wide' : 'narrow';
}
const SELFTEST_SEED = 50;
const PROMPT_LENGTH = 72;
/** Block widths, largest first: each block starts further on (the walk to the wrap only moves forward). */
export const SELFTEST_BLOCKS: readonly number[] = [8, 4, 2];
export const SELFTEST_PRECISIONS: readonly Precision[] = ['f32', 'bf16'];

export interface ExactnessCheck {
  kernelClass: KernelClass;
  precision: Precision;
  block: number;
  /** Position of the block's first row, and the ring slots its rows overwrite (they cross from W - 1 to 0). */
  blockStart: number;
  slots: number[];
  ok: boolean;
  /** Block rows whose logits differ from the chain's, the first of them, and its differing bytes of bytesTotal. */
  rowsDiffering: number;
  position: number | null;
  bytesDiffering: number;
  bytesTotal: number;
  /** Where the first differing kernel is: its family, and the kernel, layer and row in words. */
  kernel?: KernelName;
  blame?: string;
  ms: number;
}

export interface ExactnessSelfTestResult {
  ok: boolean;
  checks: ExactnessCheck[];
  ms: number;
  kernelClasses: KernelClass[];
  /** The model, in words. */
  model: string;
  /** A fault injected into the kernels (src/gpu/kernel-fault.ts): the run shows the test catches it. */
  fault?: KernelFault;
  /** The first failing check's kernel family, and its blame in words. */
  kernel?: KernelName;
  failure?: string;
}

export interface ExactnessSelfTestOptions {
  /** Kernel classes to check (default: selfTestKernelClasses). */
  classes?: KernelClass[];
  fault?: KernelFault;
  onProgress?: ProgressFn;
  /** Called as each check ends (the CLI lists them as they come). */
  onCheck?: (c: ExactnessCheck) => void;
  cancel?: CancelToken;
}

/**
 * The kernel classes an adapter's runs use: the one its devices run (detectKernelClass, honouring
 * RINGSIDE_KERNELS), and on a GPU the software class too, which a GPU whose stages take too few storage buffers
 * falls back to (and the GPU class wherever it can be created there).
 */
export function selfTestKernelClasses(ctx: GpuContext): KernelClass[] {
  const used = detectKernelClass(ctx.report, ctx.device.limits as { maxStorageBuffersPerShaderStage: number });
  if (isSoftwareAdapter(ctx.report)) return [used];
  const gpuFits = ctx.device.limits.maxStorageBuffersPerShaderStage >= GPU_CLASS_STORAGE_BUFFERS;
  return gpuFits ? ['gpu', 'software'] : ['software'];
}

/** A built-in model's description (built once: its bytes are computed from the seed when uploaded). */
const builtIn = new Map<SelfTestModel, Promise<TargetDescription>>();
function builtInModel(which: SelfTestModel): Promise<TargetDescription> {
  let m = builtIn.get(which);
  if (!m) {
    const files = syntheticCheckpoint(SELFTEST_GEOMETRY[which], { seed: SELFTEST_SEED }).target;
    m = openCheckpoint(files, `self-test model (${which})`)
      .then((ck) => ck.description as TargetDescription)
      .catch((e) => {
        builtIn.delete(which);
        throw e;
      });
    builtIn.set(which, m);
  }
  return m;
}

/** The built-in model each class checks on this adapter, in words. */
export function selfTestModelText(classes: readonly KernelClass[], ctx: GpuContext): string {
  return classes
    .map((cls) => {
      const g = SELFTEST_GEOMETRY[selfTestModel(cls, ctx)];
      return `${cls} kernels: built-in dense Gemma 4 of ${g.layers} layers (sliding, full), hidden ${g.hidden}, MLP ${g.intermediate}, vocabulary ${g.vocab}, ${g.heads} heads of ${g.headDim}, window ${g.window}, 4-bit; prompt ${PROMPT_LENGTH} tokens`;
    })
    .join('; ');
}

/**
 * The pipelines of every self-test run on a device (fresh runs, faulted runs): a run compiles only what no earlier
 * run on the device compiled, and a fault only the kernels it rewrites.
 */
const pools = new WeakMap<GPUDevice, PipelinePool>();
function poolOf(device: GPUDevice): PipelinePool {
  let p = pools.get(device);
  if (!p) pools.set(device, (p = { modules: new Map(), pipelines: new Map() }));
  return p;
}

/** Tokens of the prompt and of each block: the probe's formula (draws.ts), fixed salts. */
function tokens(n: number, salt: number, step: number, vocab: number): number[] {
  return Array.from({ length: n }, (_, i) => (step * i + 1 + salt) % vocab);
}

export async function runExactnessSelfTest(
  ctx: GpuContext,
  o: ExactnessSelfTestOptions = {},
): Promise<ExactnessSelfTestResult> {
  const t0 = performance.now();
  const classes = o.classes ?? selfTestKernelClasses(ctx);
  const total = classes.length * SELFTEST_PRECISIONS.length * SELFTEST_BLOCKS.length;
  const checks: ExactnessCheck[] = [];
  const progress = (detail: string) =>
    o.onProgress?.({ phase: 'exactness self-test', done: checks.length, total, detail });
  for (const cls of classes) {
    progress(`exactness self-test: uploading the built-in model for the ${cls} kernels`);
    const desc = await builtInModel(selfTestModel(cls, ctx));
    // Each class reads the affine weights in its own layout (src/gpu/weight-layout.ts).
    const weights = await uploadWeights(ctx.device, desc, undefined, o.cancel, {
      layout: cls === 'gpu' ? 'k-major' : 'mlx',
    });
    // One cache for both precisions: the precision is a parameter of the kernels, not a pipeline constant, so
    // the second model creates no pipeline (a software adapter compiles each for hundreds of milliseconds).
    const kernels = new KernelCache(ctx.device, {
      kernelClass: cls,
      pool: poolOf(ctx.device),
      ...(o.fault ? { fault: o.fault } : {}),
    });
    try {
      for (const precision of SELFTEST_PRECISIONS) {
        o.cancel?.throwIfCancelled();
        for (const c of await checkClass(ctx, weights, kernels, precision, o, progress)) {
          checks.push(c);
          o.onCheck?.(c);
        }
      }
    } finally {
      weights.destroy();
    }
  }
  o.onProgress?.({ phase: 'exactness self-test', done: checks.length, total, detail: 'exactness self-test: done' });
  const bad = checks.find((c) => !c.ok);
  return {
    ok: bad === undefined,
    checks,
    ms: performance.now() - t0,
    kernelClasses: classes,
    model: selfTestModelText(classes, ctx),
    ...(o.fault ? { fault: o.fault } : {}),
    ...(bad ? { kernel: bad.kernel, failure: failureText(bad) } : {}),
  };
}

function failureText(c: ExactnessCheck): string {
  const where = `${c.kernelClass} kernels, ${c.precision}, K = ${c.block}`;
  return c.blame
    ? `${c.blame} (${where})`
    : `block row ${c.position} differs from the chain (${where}); no single kernel's output differed when captured`;
}

/** The checks of one kernel class and precision on one model instance: K = 8, 4, 2 along one decode. */
async function checkClass(
  ctx: GpuContext,
  weights: GpuWeights<TargetDescription>,
  kernels: KernelCache,
  precision: Precision,
  o: ExactnessSelfTestOptions,
  progress: (detail: string) => void,
): Promise<ExactnessCheck[]> {
  const desc = weights.desc;
  const cls = kernels.kernelClass;
  const W = desc.window;
  const maxK = Math.max(...SELFTEST_BLOCKS);
  // the built-in model is a dense Gemma 4: buildTarget gives its TargetModel
  const model = buildTarget(ctx, weights, {
    maxContext: PROMPT_LENGTH + W + maxK,
    maxBlock: maxK,
    prefillChunk: PROMPT_LENGTH,
    precision,
    kernels,
  });
  const out: ExactnessCheck[] = [];
  try {
    model.reset();
    progress(`exactness self-test: ${cls} kernels, ${precision}: prefill of ${PROMPT_LENGTH} tokens`);
    await model.prefill(tokens(PROMPT_LENGTH, 1, 7, desc.vocab), { logits: 'none' });
    let last = 3;
    for (const K of SELFTEST_BLOCKS) {
      o.cancel?.throwIfCancelled();
      const t = performance.now();
      // Decode up to where the block's rows take the ring's last slots and then its first: W - K/2 .. K/2 - 1.
      const target = W - K / 2;
      const steps = (target - model.cache.slotOf(model.cache.state.nextPos) + W) % W;
      if (steps > 0) last = (await model.decodeGreedy(last, steps)).at(-1)!;
      const blockStart = model.cache.state.nextPos;
      const slots = Array.from({ length: K }, (_, j) => model.cache.slotOf(blockStart + j));
      const block = tokens(K, 977 * K, 13, desc.vocab);
      progress(`exactness self-test: ${cls} kernels, ${precision}, K = ${K} across slots ${slots.join(', ')}`);
      const snap = model.snapshot();
      try {
        out.push(await checkBlock(model, snap, block, cls, precision, blockStart, slots, t));
      } finally {
        model.restore(snap);
        snap.destroy();
      }
    }
  } finally {
    model.destroy();
  }
  return out;
}

/** The two arms of one block from `snap`, compared; on a difference, again with captures, to name the kernel. */
async function checkBlock(
  model: GemmaTargetModel,
  snap: CacheSnapshot,
  block: number[],
  cls: KernelClass,
  precision: Precision,
  blockStart: number,
  slots: number[],
  t0: number,
): Promise<ExactnessCheck> {
  const K = block.length;
  const V = model.desc.vocab;
  const arms = async (captures?: Set<string>) => {
    model.restore(snap);
    const chain: ForwardResult[] = [];
    for (const t of block) chain.push(await model.decode(t, { captures }));
    model.restore(snap);
    const verify = await model.step(block, { captures });
    return { chain, verify };
  };
  const { chain, verify } = await arms();
  const rows = block.map((_, j) =>
    compareRows(chain[j].logits!, verify.logits!.subarray(j * V, (j + 1) * V), precision, j),
  );
  const differing = rows.filter((r) => r.bytesDiffering > 0);
  const first = differing[0];
  const check: ExactnessCheck = {
    kernelClass: cls,
    precision,
    block: K,
    blockStart,
    slots,
    ok: differing.length === 0,
    rowsDiffering: differing.length,
    position: first ? first.position : null,
    bytesDiffering: first ? first.bytesDiffering : 0,
    bytesTotal: rows[0].bytesTotal,
    ms: 0,
  };
  if (first) {
    const names = blameCaptures(model.desc.layers.length);
    const cap = await arms(names);
    const chainCaps = new Map<string, Float32Array>();
    for (const name of names) {
      const parts = cap.chain.map((r) => r.captures.get(name));
      if (parts.some((p) => !p)) continue;
      const all = new Float32Array(parts.reduce((a, p) => a + p!.length, 0));
      parts.reduce((at, p) => (all.set(p!, at), at + p!.length), 0);
      chainCaps.set(name, all);
    }
    const blame = blameKernel(model.desc, chainCaps, cap.verify.captures, K, precision, cls);
    if (blame) {
      check.kernel = blame.kernel;
      check.blame = blame.text;
    }
  }
  check.ms = performance.now() - t0;
  return check;
}
