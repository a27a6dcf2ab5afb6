/**
 * End-to-end figures on a small synthetic model (a real geometry with few layers, generated in memory
 * by src/format/synthetic.ts and uploaded like a checkpoint): prefill tokens/s, ms per chain token
 * (decode = step + commit), ms per verify block (step of K + commit), and dispatches and submits per
 * token from TargetModel.stats. Timed with the wall clock around each awaited call, readback of the
 * logits included: what a caller of the engine waits for. Browser-safe.
 */
import type { GpuContext } from '../gpu/device.ts';
import { pseudoRandomTokens } from '../util/prng.ts';
import { openCheckpoint } from '../format/checkpoint.ts';
import { linearTensors, type Linear, type TargetDescription } from '../format/model-description.ts';
import { synthGeometry, syntheticCheckpoint, type SynthPreset } from '../format/synthetic.ts';
import { uploadWeights } from '../model/gpu-weights.ts';
import { TargetModel } from '../model/target.ts';
import { runProbe } from '../parity/probe.ts';
import { checkpointInfo } from '../parity/summary.ts';
import type { ProbeReport } from '../parity/report.ts';
import { KernelProfiler, type KernelTime } from '../gpu/profiler.ts';

export interface E2EOptions {
  preset: SynthPreset;
  layers: number;
  /** Override the vocabulary (LM head rows); default: the preset's. */
  vocab?: number;
  promptTokens: number;
  chainTokens: number;
  blocks: number;
  block: number;
  seed?: number;
  /** Also run the block-versus-chain probe (exact and mlx-metal) on the model; default true. */
  probe?: boolean;
  log?: (line: string) => void;
}

export interface E2EResult {
  model: string;
  layers: number;
  layerTypes: string[];
  vocab: number;
  weightBytes: number;
  uploadSeconds: number;
  timing: 'wall-clock';
  prefill: { tokens: number; seconds: number; tokensPerSecond: number; dispatches: number; submits: number };
  chain: {
    tokens: number;
    msPerToken: number;
    minMs: number;
    dispatchesPerToken: number;
    submitsPerToken: number;
    context: number;
    /** decodeBytesPerToken at this context, and that over the fastest token's time (GB/s). */
    bytesPerToken: number;
    effectiveGBps: number;
    breakdown: StepBreakdown;
  };
  verify: {
    block: number;
    blocks: number;
    msPerBlock: number;
    minMs: number;
    msPerToken: number;
    dispatchesPerBlock: number;
    submitsPerBlock: number;
  };
  /** ms per verify block / ms per chain token (1 = a block of K costs one chain step; K = no gain). */
  blockVsChain: number;
  /**
   * The block-versus-chain probe on this model, wall time by phase summed over its draws: once with the
   * exact policy (passes: no localization) and once with `mlx-metal` (fails: localization runs).
   */
  probe: ProbePhases[];
}

/**
 * Where a chain token's wall time goes: CPU time recording commands, in queue.submit (with the
 * parameter writes), and waiting for the results (readback and error scopes); bind groups created per
 * token (0 once the step's bind groups are cached); and, where the adapter has timestamp queries,
 * GPU time per kernel from separately profiled tokens (each dispatch in its own timestamped pass).
 */
export interface StepBreakdown {
  encodeMs: number;
  submitMs: number;
  waitMs: number;
  bindGroupsPerToken: number;
  /** Sum of the kernels' GPU times per profiled token. */
  gpuMs?: number;
  kernels?: KernelTime[];
  /** Why there is no GPU profile (no timestamp-query, or timestamps that read as zero). */
  gpuNote?: string;
}

export interface ProbePhases {
  policy: string;
  verdict: string;
  drawLengths: number[];
  block: number;
  prefillMs: number;
  chainMs: number;
  blockMs: number;
  localizeMs: number;
  totalMs: number;
}

function phases(r: ProbeReport): ProbePhases {
  const sum = (k: 'prefillMs' | 'chainMs' | 'blockMs' | 'localizeMs') =>
    r.draws.reduce((a, d) => a + (d.timings[k] ?? 0), 0);
  return {
    policy: r.provenance.policy,
    verdict: r.verdict,
    drawLengths: r.provenance.drawLengths,
    block: r.provenance.block,
    prefillMs: sum('prefillMs'),
    chainMs: sum('chainMs'),
    blockMs: sum('blockMs'),
    localizeMs: sum('localizeMs'),
    totalMs: r.timings.totalMs,
  };
}

const tokens = pseudoRandomTokens;

const linearBytes = (l: Linear) => linearTensors(l).reduce((a, t) => a + t.byteLength, 0);

/**
 * Bytes one chain decode step must read from memory at `context` tokens of context: every linear of
 * every layer once (weights, scales, biases), the tied embedding once as the LM head plus one row as the
 * embedding, the norm weights, and the K and V rows the token attends to (sliding: the ring's min(context,
 * window) rows; full: context rows), f32 cache entries. The traffic a bandwidth-bound GPU pays per token.
 */
export function decodeBytesPerToken(desc: TargetDescription, context: number): number {
  let bytes = linearBytes(desc.embed) * (1 + 1 / desc.vocab) + desc.finalNorm.byteLength;
  for (const l of desc.layers) {
    for (const x of [l.qProj, l.kProj, l.vProj, l.oProj, l.gate, l.up, l.down]) if (x) bytes += linearBytes(x);
    for (const x of [l.inputNorm, l.qNorm, l.kNorm, l.postAttnNorm, l.preFfNorm, l.postFfNorm, l.layerScalar])
      if (x) bytes += x.byteLength;
    const keys = l.type === 'sliding' ? Math.min(context + 1, desc.window) : context + 1;
    bytes += 2 * keys * l.numKvHeads * l.headDim * 4;
  }
  return bytes;
}

const mean = (a: number[]) => a.reduce((x, y) => x + y, 0) / a.length;

/** Chain decode bytes per token of a whole preset model (all its layers) at `context`. */
export async function presetDecodeBytes(preset: SynthPreset, context: number): Promise<number> {
  const g = synthGeometry(preset, { assistant: null });
  const ck = await openCheckpoint(syntheticCheckpoint(g).target, `synthetic ${preset}`);
  return decodeBytesPerToken(ck.description as TargetDescription, context);
}

export async function benchEndToEnd(ctx: GpuContext, o: E2EOptions): Promise<E2EResult> {
  const log = o.log ?? (() => {});
  const g = synthGeometry(o.preset, { layers: o.layers, assistant: null, ...(o.vocab ? { vocab: o.vocab } : {}) });
  const ck = await openCheckpoint(
    syntheticCheckpoint(g, { seed: o.seed ?? 0 }).target,
    `synthetic ${o.preset} x${o.layers}`,
  );
  const desc = ck.description as TargetDescription;
  const t0 = performance.now();
  const weights = await uploadWeights(ctx.device, desc);
  await ctx.device.queue.onSubmittedWorkDone();
  const uploadSeconds = (performance.now() - t0) / 1000;
  log(
    `e2e: synthetic ${o.preset} with ${o.layers} layers (${desc.layers.map((l) => l.type).join(', ')}), ${(weights.bytes / 1e9).toFixed(2)} GB uploaded in ${uploadSeconds.toFixed(1)} s`,
  );
  const context = o.promptTokens + Math.max(o.chainTokens, o.blocks * o.block);
  const model = new TargetModel(ctx, weights, {
    maxContext: context + 8,
    maxBlock: Math.max(8, o.block),
    prefillChunk: Math.min(64, Math.max(o.promptTokens, 8)),
    precision: 'f32',
  });
  try {
    const V = desc.vocab;
    const s = model.stats;
    const prompt = tokens(o.promptTokens, 11, V);
    let d0 = s.dispatches,
      u0 = s.submits;
    let t = performance.now();
    await model.prefill(prompt, { logits: 'none' });
    await ctx.device.queue.onSubmittedWorkDone();
    const prefillSeconds = (performance.now() - t) / 1000;
    const prefill = {
      tokens: o.promptTokens,
      seconds: prefillSeconds,
      tokensPerSecond: o.promptTokens / prefillSeconds,
      dispatches: s.dispatches - d0,
      submits: s.submits - u0,
    };
    log(`e2e: prefill ${o.promptTokens} tokens in ${prefillSeconds.toFixed(2)} s`);
    const snap = model.snapshot();
    // One untimed chain token first: it compiles the step's pipelines and creates its bind groups.
    await model.decode(tokens(1, 21, V)[0]);
    model.restore(snap);

    const chainMs: number[] = [];
    d0 = s.dispatches;
    u0 = s.submits;
    const s0 = { ...s };
    const bg0 = model.kernels.bindGroups.created;
    for (const tok of tokens(o.chainTokens, 22, V)) {
      t = performance.now();
      await model.decode(tok);
      await ctx.device.queue.onSubmittedWorkDone(); // the commit's copies
      chainMs.push(performance.now() - t);
      log(`e2e: chain token ${chainMs.length}/${o.chainTokens}: ${chainMs[chainMs.length - 1].toFixed(0)} ms`);
    }
    const bytesPerToken = decodeBytesPerToken(desc, o.promptTokens);
    const minMs = Math.min(...chainMs);
    const per = (k: 'encodeMs' | 'submitMs' | 'waitMs') => (s[k] - s0[k]) / o.chainTokens;
    const breakdown: StepBreakdown = {
      encodeMs: per('encodeMs'),
      submitMs: per('submitMs'),
      waitMs: per('waitMs'),
      bindGroupsPerToken: (model.kernels.bindGroups.created - bg0) / o.chainTokens,
    };
    const chain = {
      tokens: o.chainTokens,
      msPerToken: mean(chainMs),
      minMs,
      dispatchesPerToken: (s.dispatches - d0) / o.chainTokens,
      submitsPerToken: (s.submits - u0) / o.chainTokens,
      context: o.promptTokens,
      bytesPerToken,
      effectiveGBps: bytesPerToken / (minMs / 1000) / 1e9,
      breakdown,
    };
    Object.assign(breakdown, await profileChain(ctx, model, tokens(2, 44, V)));

    model.restore(snap);
    const blockMs: number[] = [];
    d0 = s.dispatches;
    u0 = s.submits;
    for (let b = 0; b < o.blocks; b++) {
      const block = tokens(o.block, 33 + b, V);
      t = performance.now();
      await model.step(block);
      model.commit(o.block);
      await ctx.device.queue.onSubmittedWorkDone();
      blockMs.push(performance.now() - t);
      log(`e2e: verify block ${b + 1}/${o.blocks} (K = ${o.block}): ${blockMs[b].toFixed(0)} ms`);
    }
    snap.destroy();
    const probe: ProbePhases[] = [];
    for (const policy of o.probe === false ? [] : ['exact', 'mlx-metal']) {
      const r = await runProbe(
        { ctx, weights, target: checkpointInfo(ck), platform: 'bench' },
        { block: o.block, lengths: [o.promptTokens, o.promptTokens], policy, precision: 'f32', localize: true },
      );
      probe.push(phases(r));
      log(`e2e: probe (${policy}): ${r.verdict} in ${(r.timings.totalMs / 1000).toFixed(1)} s`);
    }
    const msPerBlock = mean(blockMs);
    const verify = {
      block: o.block,
      blocks: o.blocks,
      msPerBlock,
      minMs: Math.min(...blockMs),
      msPerToken: msPerBlock / o.block,
      dispatchesPerBlock: (s.dispatches - d0) / o.blocks,
      submitsPerBlock: (s.submits - u0) / o.blocks,
    };
    return {
      model: `synthetic ${g.modelType} ${o.preset} geometry, ${o.layers} layer${o.layers === 1 ? '' : 's'}`,
      layers: o.layers,
      layerTypes: desc.layers.map((l) => l.type),
      vocab: V,
      weightBytes: weights.bytes,
      uploadSeconds,
      timing: 'wall-clock',
      prefill,
      chain,
      verify,
      blockVsChain: msPerBlock / chain.msPerToken,
      probe,
    };
  } finally {
    model.destroy();
    weights.destroy();
  }
}

/** GPU time per kernel over a few chain tokens, each dispatch timestamped (see StepBreakdown). */
async function profileChain(
  ctx: GpuContext,
  model: TargetModel,
  toks: number[],
): Promise<Pick<StepBreakdown, 'gpuMs' | 'kernels' | 'gpuNote'>> {
  if (!ctx.device.features.has('timestamp-query')) return { gpuNote: 'no timestamp-query on this adapter' };
  const profiler = new KernelProfiler(ctx.device);
  model.profiler = profiler;
  try {
    for (const t of toks) await model.decode(t);
    await ctx.device.queue.onSubmittedWorkDone();
    await profiler.collect();
    if (profiler.problem) return { gpuNote: `timestamps unusable: ${profiler.problem}` };
    const kernels = profiler.times(toks.length);
    return { kernels, gpuMs: kernels.reduce((a, k) => a + k.ms, 0) };
  } finally {
    model.profiler = undefined;
    profiler.destroy();
  }
}
