/**
 * End-to-end figures on a small synthetic model (a preset's real geometry with few layers, generated in
 * memory and uploaded like a checkpoint, src/bench/e2e-model.ts; any family: dense, E-series, MoE, Qwen3.5):
 * prefill tokens/s, ms per chain token (step of 1 + commit), ms per verify block (step of K + commit), and
 * dispatches and submits per token (the engine's TargetStats where it keeps them, else every Recorder's, counted
 * through the RecorderTally). Timed with the wall clock around each awaited call, readback included: what MTP
 * generation waits for, which reads each row's argmax id and final hidden row (GENERATION_READ), not the
 * logits (the probe, timed in its own row, reads those). Browser-safe.
 */
import type { GpuContext } from '../gpu/device.ts';
import { pseudoRandomTokens } from '../util/prng.ts';
import { openCheckpoint } from '../format/checkpoint.ts';
import { linearTensors, type Linear, type TargetDescription } from '../format/model-description.ts';
import { synthGeometry, syntheticCheckpoint, type SynthPreset } from '../format/synthetic.ts';
import { runProbe } from '../parity/probe.ts';
import type { ProbeReport } from '../parity/report.ts';
import { KernelProfiler, type KernelTime } from '../gpu/profiler.ts';
import type { CoopTuning } from '../gpu/coop-tuning.ts';
import type { KernelCache } from '../gpu/kernels.ts';
import { type RecorderTally, setRecorderTally } from '../gpu/recorder.ts';
import { generationModels } from '../model/generation-setup.ts';
import type { TargetStats } from '../model/gemma4/forward-pass.ts';
import { policiesFor } from '../model/policy-registry.ts';
import { buildE2EModel, type E2EModel, type E2EPreset } from './e2e-model.ts';
import { warmGpu, type Warmup } from './probes.ts';
import { isSoftwareAdapter } from '../gpu/kernel-class.ts';

/**
 * Default warm-up before each timed phase on GPUs (E2EOptions.warmupMs). On the H200 a few hundred ms of full
 * load took the SM clock from 345 to 1980 MHz, and the driver kept it up for ~1.5 s after the load stopped
 * (nvidia-smi; docs/PERFORMANCE.md, end to end): each timed phase lasts far less than that.
 */
export const WARMUP_MS = 500;

export interface E2EOptions {
  /** Any synthetic preset (src/bench/e2e-model.ts): the 12B by default, a family's (e4b, 26b-a4b, qwen36-27b ...). */
  preset: E2EPreset;
  /** Layers of the cut model (e2e-model.ts says which counts keep each family's structure). */
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
  /**
   * Wall ms of GPU work (probes.ts warmGpu) right before the timed chain tokens and verify blocks, so that they
   * run at the GPU's working clocks; default WARMUP_MS on GPUs, 0 (none) on software adapters, which have no GPU
   * clock to raise.
   */
  warmupMs?: number;
  /** The engine's matmul_coop.wgsl shape overrides (bench --coop-threads / --coop-features); unset: the rules. */
  coop?: CoopTuning;
  log?: (line: string) => void;
}

export interface E2EResult {
  model: string;
  preset: E2EPreset;
  family: E2EModel['family'];
  /** The engine that ran (TargetModel, ETargetModel, MoETargetModel, QwenTargetModel). */
  engine: string;
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
    /** The context the first timed token starts from (the prompt); the steps in turns add 1 + block each. */
    context: number;
    /**
     * decodeBytesPerToken at this context, and that over the fastest token's time (GB/s); only for dense Gemma
     * targets, whose traffic decodeBytesPerToken models (not per-layer tables, routed experts or recurrent state).
     */
    bytesPerToken?: number;
    effectiveGBps?: number;
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
    /**
     * Where a verify block's wall time goes, as the chain token's: recording, submit and waiting (ms per block;
     * absent for engines that keep no TargetStats). A GPU-bound block waits; a CPU-bound one records.
     */
    wall?: Pick<StepBreakdown, 'encodeMs' | 'submitMs' | 'waitMs'>;
    /** Bind groups created per timed block (0 once the untimed first block has made them). */
    bindGroupsPerBlock: number;
    /** GPU time per kernel of one profiled verify block (ms per block), as the chain token's breakdown. */
    gpu?: Pick<StepBreakdown, 'gpuMs' | 'kernels' | 'gpuNote'>;
  };
  /** ms per verify block / ms per chain token (1 = a block of K costs one chain step; K = no gain). */
  blockVsChain: number;
  /** The GPU work run before the timed chain tokens and blocks (null: none, a software adapter). */
  warmup: Warmup | null;
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
  /** Recording and waiting: from the engine's TargetStats; absent for engines that keep none (see phasesNote). */
  encodeMs?: number;
  submitMs: number;
  waitMs?: number;
  phasesNote?: string;
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

/** Chain decode bytes per token of a whole preset model (all its layers) at `context`, and its layer count. */
export async function presetDecodeBytes(
  preset: SynthPreset,
  context: number,
): Promise<{ bytesPerToken: number; layers: number }> {
  const g = synthGeometry(preset, { assistant: null });
  const ck = await openCheckpoint(syntheticCheckpoint(g).target, `synthetic ${preset}`);
  const desc = ck.description as TargetDescription;
  return { bytesPerToken: decodeBytesPerToken(desc, context), layers: desc.layers.length };
}

/**
 * What a chain step and a verify block read back here: what MTP generation reads (src/model/generate.ts,
 * GenerateTarget.step: the rows' argmax ids, and their final hidden rows for the drafter), not every row's
 * logits (1 MB a row at a 262144-word vocabulary), a readback no generation path makes.
 */
const GENERATION_READ = { logits: 'argmax', finalHidden: true } as const;

/** What the bench drives on a target engine of any family (the members every family's engine has). */
interface BenchTarget {
  prefill(tokens: number[], o: { logits: 'none' }): Promise<unknown>;
  step(tokens: number[], o: typeof GENERATION_READ): Promise<unknown>;
  commit(accepted: number): void;
  snapshot(): { destroy(): void };
  restore(s: { destroy(): void }): void;
  /** TargetCore engines (every Gemma 4 target): their own counters, and a profiler property their recorders take. */
  stats?: TargetStats;
  profiler?: KernelProfiler;
  kernels?: KernelCache;
  /** QwenTargetModel keeps its KernelCache on its engine. */
  engine?: { kernels: KernelCache };
}

function benchTarget(t: object): BenchTarget {
  const missing = ['prefill', 'step', 'commit', 'snapshot', 'restore'].filter(
    (m) => typeof (t as Record<string, unknown>)[m] !== 'function',
  );
  if (missing.length) throw new Error(`bench: the ${t.constructor.name} engine lacks ${missing.join(', ')}`);
  return t as BenchTarget;
}

/** A chain token as generation runs it: a step of one row (GENERATION_READ), then its commit. */
async function chainToken(model: BenchTarget, token: number): Promise<void> {
  await model.step([token], GENERATION_READ);
  model.commit(1);
}

/** Counters of work submitted so far: the engine's TargetStats, else the open RecorderTally's. */
interface Counts {
  dispatches: number;
  submits: number;
  submitMs: number;
  encodeMs?: number;
  waitMs?: number;
}

/** Recording, submit and waiting time between two counts, per unit (token or block). */
function wallPer(c0: Counts, c1: Counts, units: number): Pick<StepBreakdown, 'encodeMs' | 'submitMs' | 'waitMs'> {
  const per = (k: 'encodeMs' | 'submitMs' | 'waitMs') => {
    const a = c0[k];
    const b = c1[k];
    return a === undefined || b === undefined ? undefined : (b - a) / units;
  };
  return { encodeMs: per('encodeMs'), submitMs: per('submitMs')!, waitMs: per('waitMs') };
}

/** Counts of nothing yet (with the recording and waiting timers where the engine keeps TargetStats). */
function zeroCounts(timers: boolean): Counts {
  return { dispatches: 0, submits: 0, submitMs: 0, ...(timers ? { encodeMs: 0, waitMs: 0 } : {}) };
}

/** Adds what was counted between a and b to acc. */
function accumulate(acc: Counts, a: Counts, b: Counts): void {
  acc.dispatches += b.dispatches - a.dispatches;
  acc.submits += b.submits - a.submits;
  acc.submitMs += b.submitMs - a.submitMs;
  if (acc.encodeMs !== undefined) acc.encodeMs += (b.encodeMs ?? 0) - (a.encodeMs ?? 0);
  if (acc.waitMs !== undefined) acc.waitMs += (b.waitMs ?? 0) - (a.waitMs ?? 0);
}

/** The probe's inexact policy for a family: mlx-metal where it applies, else Qwen3.5's own gdn-chunked. */
function inexactPolicy(family: E2EModel['family']): string {
  return policiesFor(family).some((p) => p.name === 'mlx-metal') ? 'mlx-metal' : 'gdn-chunked';
}

export async function benchEndToEnd(ctx: GpuContext, o: E2EOptions): Promise<E2EResult> {
  const log = o.log ?? (() => {});
  const t0 = performance.now();
  const m = await buildE2EModel(ctx, o.preset, o.layers, { vocab: o.vocab, seed: o.seed });
  await ctx.device.queue.onSubmittedWorkDone();
  const uploadSeconds = (performance.now() - t0) / 1000;
  log(
    `e2e: synthetic ${o.preset} with ${o.layers} layers (${m.layerTypes.join(', ')}), ${(m.weightBytes / 1e9).toFixed(2)} GB uploaded in ${uploadSeconds.toFixed(1)} s`,
  );
  const tally: RecorderTally = { dispatches: 0, submits: 0, submitMs: 0 };
  let g: ReturnType<typeof generationModels> | undefined;
  try {
    // The engine the family's `generate` runs (src/model/generation-setup.ts), sized for the prompt, the timed
    // tokens (the untimed first token and the profiled ones included) and the verify blocks.
    g = generationModels(ctx, m.weights, {
      promptLength: o.promptTokens,
      maxNew: o.chainTokens + o.blocks * o.block + 8, // the timed steps in turns, from the prompt on
      block: Math.max(8, o.block),
      policy: 'exact',
      precision: 'f32',
      ...(o.coop ? { kernels: { coop: o.coop } } : {}),
    });
    const d = driven(ctx, g.target, tally, m.vocab, o, log);
    const { model, engine, stats, V } = d;
    const prefill = await timedPrefill(d);
    const snap = model.snapshot();
    const warmup = await warmUp(d, snap);
    const turns = await timedTurns(d);
    const chain = chainFigures(d, m, turns);
    model.restore(snap);
    Object.assign(chain.breakdown, await profile(ctx, model, tally, 2, () => chainTokens(model, tokens(2, 44, V))));
    const blockWall = stats ? wallPer(zeroCounts(true), turns.blockCounts, o.blocks) : undefined;
    const bindGroupsPerBlock = turns.blockBindGroups / o.blocks;
    // One more block, profiled: where a verify block's GPU time goes (its kernels run at M = K).
    model.restore(snap);
    const blockGpu = await profile(ctx, model, tally, 1, async () => {
      await model.step(tokens(o.block, 55, V), GENERATION_READ);
      model.commit(o.block);
    });
    snap.destroy();
    g.destroy();
    g = undefined;
    const probe = await probePhases(ctx, m, o, log);
    const msPerBlock = mean(turns.blockMs);
    const verify = {
      block: o.block,
      blocks: o.blocks,
      msPerBlock,
      minMs: Math.min(...turns.blockMs),
      msPerToken: msPerBlock / o.block,
      dispatchesPerBlock: turns.blockCounts.dispatches / o.blocks,
      submitsPerBlock: turns.blockCounts.submits / o.blocks,
      wall: blockWall,
      bindGroupsPerBlock,
      gpu: blockGpu,
    };
    return {
      model: m.label,
      preset: o.preset,
      family: m.family,
      engine,
      layers: o.layers,
      layerTypes: m.layerTypes,
      vocab: V,
      weightBytes: m.weightBytes,
      uploadSeconds,
      timing: 'wall-clock',
      prefill,
      chain,
      verify,
      blockVsChain: msPerBlock / chain.msPerToken,
      warmup,
      probe,
    };
  } finally {
    setRecorderTally(undefined);
    g?.destroy();
    m.destroy();
  }
}

/** The engine under measurement, how its work is counted, and the run's options. */
interface Driven {
  ctx: GpuContext;
  model: BenchTarget;
  /** The engine's class name. */
  engine: string;
  kernels: KernelCache;
  stats: TargetStats | undefined;
  counts: () => Counts;
  /** The model's vocabulary. */
  V: number;
  o: E2EOptions;
  log: (line: string) => void;
}

/** The generation target as the bench drives it; engines without TargetStats are counted through `tally`. */
function driven(
  ctx: GpuContext,
  target: object,
  tally: RecorderTally,
  V: number,
  o: E2EOptions,
  log: (line: string) => void,
): Driven {
  const model = benchTarget(target);
  const engine = target.constructor.name;
  const kernels = model.kernels ?? model.engine?.kernels;
  if (!kernels) throw new Error(`bench: the ${engine} engine exposes no KernelCache`);
  const stats = model.stats;
  if (!stats) setRecorderTally(tally);
  const counts = (): Counts =>
    stats ? { ...stats } : { dispatches: tally.dispatches, submits: tally.submits, submitMs: tally.submitMs };
  return { ctx, model, engine, kernels, stats, counts, V, o, log };
}

/** The prompt's prefill, timed. */
async function timedPrefill(d: Driven): Promise<E2EResult['prefill']> {
  const { ctx, model, counts, o } = d;
  const prompt = tokens(o.promptTokens, 11, d.V);
  const c0 = counts();
  const t = performance.now();
  await model.prefill(prompt, { logits: 'none' });
  await ctx.device.queue.onSubmittedWorkDone();
  const prefillSeconds = (performance.now() - t) / 1000;
  const c1 = counts();
  d.log(`e2e: prefill ${o.promptTokens} tokens in ${prefillSeconds.toFixed(2)} s (${d.engine})`);
  return {
    tokens: o.promptTokens,
    seconds: prefillSeconds,
    tokensPerSecond: o.promptTokens / prefillSeconds,
    dispatches: c1.dispatches - c0.dispatches,
    submits: c1.submits - c0.submits,
  };
}

/** The untimed first steps (back to `snap` after them), then the GPU's clocks up; the warm-up made, if any. */
async function warmUp(d: Driven, snap: { destroy(): void }): Promise<Warmup | null> {
  const { ctx, model, o, V } = d;
  // Untimed first, one chain token and one verify block: they compile the steps' pipelines, grow the scratch
  // buffers sized by M and create the bind groups that bind them (on the H200 a first block took 43 ms, the
  // next 18: timed, the first would more than double a mean of two).
  await chainToken(model, tokens(1, 21, V)[0]);
  await model.step(tokens(o.block, 32, V), GENERATION_READ);
  model.commit(o.block);
  await ctx.device.queue.onSubmittedWorkDone();
  model.restore(snap);
  // Then the GPU's clocks up (warmGpu), and the chain tokens and verify blocks timed in turns (token, block,
  // token, ...), so that both meet the same clocks: a GPU's driver moves them with the load (on the H200, timed
  // one phase after the other, the 2-layer chain tokens ran at 3.3 ms of GPU time each and the blocks that
  // followed at 1.5, a ratio of 0.51; the 48-layer ones 1.83 in one run and 0.41 in another).
  const warmupMs = o.warmupMs ?? (isSoftwareAdapter(ctx.report) ? 0 : WARMUP_MS);
  let warmup: Warmup | null = null;
  if (warmupMs > 0) {
    warmup = await warmGpu(ctx.device, warmupMs);
    d.log(
      `e2e: ${warmup.ms.toFixed(0)} ms of GPU work (${warmup.dispatches} dispatches, the last at ${warmup.lastGflops.toFixed(0)} GFLOP/s) before the timed steps`,
    );
  }
  return warmup;
}

/** What the timed turns measured: each chain token's and verify block's wall time, and their counts. */
interface Turns {
  chainMs: number[];
  blockMs: number[];
  chainCounts: Counts;
  blockCounts: Counts;
  chainBindGroups: number;
  blockBindGroups: number;
}

/** The chain tokens and verify blocks, timed in turns (token, block, token, ...). */
async function timedTurns(d: Driven): Promise<Turns> {
  const { ctx, model, counts, kernels, o, V, log } = d;
  const chainMs: number[] = [];
  const blockMs: number[] = [];
  const chainCounts = zeroCounts(d.stats !== undefined);
  const blockCounts = zeroCounts(d.stats !== undefined);
  let chainBindGroups = 0;
  let blockBindGroups = 0;
  const chainToks = tokens(o.chainTokens, 22, V);
  let t: number;
  for (let i = 0; i < Math.max(o.chainTokens, o.blocks); i++) {
    if (i < o.chainTokens) {
      const [c, bg] = [counts(), kernels.bindGroups.created];
      t = performance.now();
      await chainToken(model, chainToks[i]);
      await ctx.device.queue.onSubmittedWorkDone(); // the commit's copies
      chainMs.push(performance.now() - t);
      accumulate(chainCounts, c, counts());
      chainBindGroups += kernels.bindGroups.created - bg;
      log(`e2e: chain token ${i + 1}/${o.chainTokens}: ${chainMs[i].toFixed(1)} ms`);
    }
    if (i < o.blocks) {
      const [c, bg] = [counts(), kernels.bindGroups.created];
      t = performance.now();
      await model.step(tokens(o.block, 33 + i, V), GENERATION_READ);
      model.commit(o.block);
      await ctx.device.queue.onSubmittedWorkDone();
      blockMs.push(performance.now() - t);
      accumulate(blockCounts, c, counts());
      blockBindGroups += kernels.bindGroups.created - bg;
      log(`e2e: verify block ${i + 1}/${o.blocks} (K = ${o.block}): ${blockMs[i].toFixed(1)} ms`);
    }
  }
  return { chainMs, blockMs, chainCounts, blockCounts, chainBindGroups, blockBindGroups };
}

/** The chain figures of the timed turns: time per token, counts, decode bandwidth and the wall breakdown. */
function chainFigures(d: Driven, m: E2EModel, turns: Turns): E2EResult['chain'] {
  const { o, stats } = d;
  const { chainMs, chainCounts } = turns;
  const dense = m.gemma && !m.gemma.perLayer && !m.gemma.config.moe ? m.gemma : null;
  const bytesPerToken = dense ? decodeBytesPerToken(dense, o.promptTokens) : undefined;
  const minMs = Math.min(...chainMs);
  const breakdown: StepBreakdown = {
    ...wallPer(zeroCounts(stats !== undefined), chainCounts, o.chainTokens),
    bindGroupsPerToken: turns.chainBindGroups / o.chainTokens,
    ...(stats ? {} : { phasesNote: `${d.engine} keeps no recording / waiting timers; submits timed by the bench` }),
  };
  return {
    tokens: o.chainTokens,
    msPerToken: mean(chainMs),
    minMs,
    dispatchesPerToken: chainCounts.dispatches / o.chainTokens,
    submitsPerToken: chainCounts.submits / o.chainTokens,
    context: o.promptTokens,
    bytesPerToken,
    effectiveGBps: bytesPerToken === undefined ? undefined : bytesPerToken / (minMs / 1000) / 1e9,
    breakdown,
  };
}

/** The probe, exact and with the family's inexact policy (none where o.probe is false), as timed phases. */
async function probePhases(
  ctx: GpuContext,
  m: E2EModel,
  o: E2EOptions,
  log: (line: string) => void,
): Promise<ProbePhases[]> {
  const probe: ProbePhases[] = [];
  for (const policy of o.probe === false ? [] : ['exact', inexactPolicy(m.family)]) {
    const r = await runProbe(
      { ctx, weights: m.weights.target, target: m.info, platform: 'bench' },
      { block: o.block, lengths: [o.promptTokens, o.promptTokens], policy, precision: 'f32', localize: true },
    );
    probe.push(phases(r));
    log(`e2e: probe (${policy}): ${r.verdict} in ${(r.timings.totalMs / 1000).toFixed(1)} s`);
  }
  return probe;
}

async function chainTokens(model: BenchTarget, toks: number[]): Promise<void> {
  for (const t of toks) await chainToken(model, t);
}

/**
 * GPU time per kernel over `runs` runs of `work` (chain tokens or verify blocks), each dispatch timestamped
 * (see StepBreakdown), per run: TargetCore engines take the profiler as a property, the others through the
 * RecorderTally their recorders read it from.
 */
async function profile(
  ctx: GpuContext,
  model: BenchTarget,
  tally: RecorderTally,
  runs: number,
  work: () => Promise<void>,
): Promise<Pick<StepBreakdown, 'gpuMs' | 'kernels' | 'gpuNote'>> {
  if (!ctx.device.features.has('timestamp-query')) return { gpuNote: 'no timestamp-query on this adapter' };
  const profiler = new KernelProfiler(ctx.device);
  if (model.stats) model.profiler = profiler;
  else tally.profiler = profiler;
  try {
    await work();
    await ctx.device.queue.onSubmittedWorkDone();
    await profiler.collect();
    if (profiler.problem) return { gpuNote: `timestamps unusable: ${profiler.problem}` };
    const kernels = profiler.times(runs);
    return { kernels, gpuMs: kernels.reduce((a, k) => a + k.ms, 0) };
  } finally {
    if (model.stats) model.profiler = undefined;
    tally.profiler = undefined;
    profiler.destroy();
  }
}
