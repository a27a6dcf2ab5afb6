import type { TargetDescription } from '../format/model-description.ts';
import type { GpuContext } from '../gpu/device.ts';
import type { GpuWeights } from '../model/gpu-weights.ts';
import type { ForwardResult, Precision } from '../model/target.ts';
import { TargetModel } from '../model/gemma4/dense/dense-target.ts';
import type { Policy } from '../model/policy.ts';
import type { CancelToken, ProgressFn } from '../util/cancel.ts';
import { fmtInt } from '../util/number-format.ts';
import { compareRows } from './compare.ts';
import { defaultDrawLengths, drawPhaseLabel, probeDraw, QWEN_DRAW_LENGTHS, type Draw } from './draws.ts';
import { lensLayers, localize, type StageCaptures, type StageStep } from './localize.ts';
import {
  QWEN_STAGE_LABELS,
  REPORT_SCHEMA,
  type Stage,
  type CheckpointInfo,
  type DrawResult,
  type ExactnessSelfTestSummary,
  type ProbeReport,
  type RingView,
  type RowDiff,
} from './report.ts';
import { provenance } from './provenance.ts';
import { explainMlx } from './mlx-blame.ts';
import { qwenStateView } from './state-view.ts';
import { QwenTargetModel } from '../model/qwen3_5/target.ts';
import type { QwenGpuWeights } from '../model/qwen3_5/weights.ts';
import { ETargetModel } from '../model/gemma4/e-series/e-target.ts';
import { MoETargetModel } from '../model/gemma4/moe/moe-target.ts';
import { buildTarget, targetPolicy } from '../model/build-target.ts';

/**
 * The block-versus-chain probe (docs/MODEL.md section 6, mlxcel's startup guard). Per draw: prefill the
 * prompt once and snapshot the caches; chain arm: feed the K block tokens one at a time; block arm:
 * from the same snapshot, one verify forward of K rows through the staging (buffered) caches.
 * Every logits row is compared byte for byte in the precision's storage format. A failing draw is
 * localized by re-running both arms with every stage captured, plus a per-layer logit lens.
 */
export interface ProbeOptions {
  /** K, 1 to MAX_VERIFY_BLOCK (src/model/target.ts): checked where it enters, the CLI's --block or the worker. */
  block: number;
  lengths?: number[];
  policy: string;
  precision: Precision;
  localize: boolean;
  prefillChunk?: number;
  draftPosition?: 'hf' | 'mlxcel';
}

export interface ProbeEnv {
  ctx: GpuContext;
  /** A Gemma 4 target's weights, or a Qwen3.5 target's (no ring view: the family has no sliding ring). */
  weights: GpuWeights<TargetDescription> | QwenGpuWeights;
  target: CheckpointInfo;
  assistant?: CheckpointInfo;
  platform: string;
  onProgress?: ProgressFn;
  cancel?: CancelToken;
  /** The exactness self-test run on this adapter before the probe, for the provenance. */
  exactnessSelfTest?: ExactnessSelfTestSummary;
}

/**
 * What the arms need from a target model: TargetModel's contract (prefill, snapshot / restore, decode = step +
 * commit(1), a verify step), which every family's GPU target implements.
 */
interface ProbeTarget<S extends { destroy(): void } = { destroy(): void }> {
  readonly desc: { vocab: number };
  reset(): void;
  prefill(
    tokens: number[],
    o: { chunk?: number; policy?: Policy; logits: 'none'; cancel?: CancelToken },
  ): Promise<unknown>;
  idle(): Promise<void>;
  snapshot(): S;
  restore(s: S): void;
  decode(token: number, o: { policy?: Policy; captures?: 'all' }): Promise<ForwardResult>;
  step(tokens: number[], o: { policy?: Policy; captures?: 'all' }): Promise<ForwardResult>;
  destroy(): void;
}

/**
 * What localization needs from a target: its stages in execution order (each with the capture holding its rows)
 * and the logit lens over a layer's output. Gemma: LAYER_STAGES per layer; Qwen3.5: src/model/qwen3_5/stages.ts.
 */
interface Localizer {
  stages: StageStep[];
  labels?: Record<Stage, string>;
  layers: number;
  lens(hidden: Float32Array, rows: number): Promise<Float32Array>;
}

function localizerOf(model: ProbeTarget): Localizer | undefined {
  if (model instanceof TargetModel)
    return { stages: model.stageOrder(), layers: model.desc.layers.length, lens: (h, M) => model.lens(h, M) };
  if (model instanceof QwenTargetModel)
    return {
      stages: model.stageOrder(),
      labels: QWEN_STAGE_LABELS,
      layers: model.desc.layers.length,
      lens: (h, M) => model.lens(h, M),
    };
  if (model instanceof ETargetModel || model instanceof MoETargetModel)
    return { stages: model.stageOrder(), layers: model.desc.layers.length, lens: (h, M) => model.lens(h, M) };
  return undefined;
}

interface ArmRows {
  logits: Float32Array[];
  captures?: StageCaptures;
}

async function chainArm(model: ProbeTarget, block: number[], policy: Policy, capture: boolean): Promise<ArmRows> {
  const logits: Float32Array[] = [];
  const parts: ForwardResult[] = [];
  for (const t of block) {
    const r = await model.decode(t, { policy, captures: capture ? 'all' : undefined });
    logits.push(r.logits!);
    parts.push(r);
  }
  if (!capture) return { logits };
  const captures: StageCaptures = new Map();
  for (const name of parts[0].captures.keys()) {
    const rows = parts.map((p) => p.captures.get(name)!);
    const out = new Float32Array(rows.reduce((a, r) => a + r.length, 0));
    rows.reduce((o, r) => (out.set(r, o), o + r.length), 0);
    captures.set(name, out);
  }
  return { logits, captures };
}

async function blockArm(model: ProbeTarget, block: number[], policy: Policy, capture: boolean): Promise<ArmRows> {
  const r = await model.step(block, { policy, captures: capture ? 'all' : undefined });
  const V = model.desc.vocab;
  const logits = block.map((_, j) => r.logits!.slice(j * V, (j + 1) * V));
  return { logits, captures: capture ? r.captures : undefined };
}

function ringView(model: TargetModel | ETargetModel | MoETargetModel, K: number, policy: Policy): RingView {
  const { window, state } = model.cache;
  const slotPositions: (number | null)[] = new Array(window).fill(null);
  for (let q = Math.max(0, state.nextPos - window); q < state.nextPos; q++) slotPositions[model.cache.slotOf(q)] = q;
  const mode = policy.slidingStep(K, window, state.nextPos).mode;
  return {
    window,
    slotPositions,
    blockStart: state.nextPos,
    base: state.base,
    blockSlots: Array.from({ length: K }, (_, t) => model.cache.slotOf(state.nextPos + t)),
    chainOrder: 'physical',
    blockOrder: mode === 'physical' ? 'physical' : mode === 'masked' ? 'masked-chronological' : 'chronological',
  };
}

export async function runProbe(env: ProbeEnv, opts: ProbeOptions): Promise<ProbeReport> {
  const t0 = performance.now();
  const w = env.weights;
  const desc = w.desc;
  const policy = targetPolicy(w, opts.policy);
  const K = opts.block;
  const lengths = opts.lengths ?? ('window' in desc ? defaultDrawLengths(desc.window) : [...QWEN_DRAW_LENGTHS]);
  const maxLen = Math.max(...lengths);
  const prefillChunk = opts.prefillChunk ?? Math.min(maxLen, 512);
  const modelOpts = {
    maxContext: maxLen + K,
    maxBlock: Math.max(K, 1),
    prefillChunk: Math.max(prefillChunk, policy.prefillChunks?.block ?? 0, 1),
    precision: opts.precision,
  };
  const model: ProbeTarget = buildTarget(env.ctx, w, modelOpts);
  const storage = opts.precision;
  const draws: DrawResult[] = [];
  try {
    for (let d = 0; d < lengths.length; d++) {
      const draw = probeDraw(d, lengths[d], K, desc.vocab);
      const progress = (phase: string, done: number) =>
        env.onProgress?.({
          phase,
          done: d * 4 + done,
          total: lengths.length * 4,
          detail: drawPhaseLabel(draw.index, lengths.length, draw.prompt.length, phase),
        });
      // The long draw (the last) records where the arms keep their state: Gemma's ring, Qwen3.5's recurrent state.
      const long = d === lengths.length - 1;
      draws.push(await probeOneDraw(model, draw, policy, opts, storage, prefillChunk, progress, env.cancel, long));
    }
  } finally {
    model.destroy();
  }
  const failing = draws.filter((x) => x.verdict === 'diverges');
  const verdict = failing.length ? 'diverges' : 'equal';
  return {
    schema: REPORT_SCHEMA,
    kind: 'probe',
    verdict,
    summary:
      verdict === 'equal'
        ? `block-versus-chain probe passed: ${draws.length} draw${draws.length === 1 ? '' : 's'}, every verify position equals the single-token chain in all logit bytes`
        : `block-versus-chain probe failed: ${failing.length} of ${draws.length} draw${draws.length === 1 ? '' : 's'} differ; ${failing[0].text}`,
    consequence:
      verdict === 'equal'
        ? 'MTP would be enabled'
        : 'MTP would be declined (fail closed) unless inexact verify is explicitly allowed',
    provenance: provenance(env.ctx.report, env.platform, {
      policy: policy.name,
      precision: opts.precision,
      block: K,
      drawLengths: lengths,
      prefillChunk,
      draftPosition: opts.draftPosition,
      target: env.target,
      assistant: env.assistant,
      ...(env.exactnessSelfTest ? { exactnessSelfTest: env.exactnessSelfTest } : {}),
    }),
    draws,
    timings: { totalMs: performance.now() - t0 },
  };
}

async function probeOneDraw(
  model: ProbeTarget,
  draw: Draw,
  policy: Policy,
  opts: ProbeOptions,
  storage: Precision,
  prefillChunk: number,
  progress: (phase: string, done: number) => void,
  cancel?: CancelToken,
  long = false,
): Promise<DrawResult> {
  const K = draw.block.length;
  const P = draw.prompt.length;
  const timings = { prefillMs: 0, chainMs: 0, blockMs: 0 } as DrawResult['timings'];
  // Prefill once and share a snapshot, or (prefill-chunk-mismatch) prefill per arm with its chunk.
  const separate = policy.prefillChunks;
  const prefill = async (chunk: number) => {
    const t = performance.now();
    model.reset();
    await model.prefill(draw.prompt, { chunk: chunk || P, policy, logits: 'none', cancel });
    // Without logits nothing is read back: wait for the GPU, or its prefill time lands on the chain arm.
    await model.idle();
    timings.prefillMs += performance.now() - t;
  };
  progress('prefill', 0);
  cancel?.throwIfCancelled();
  let snapshot = undefined as { destroy(): void } | undefined;
  // The ring view reads Gemma's sliding cache; localization and the lens take the model's own stage list.
  const gemma =
    model instanceof TargetModel || model instanceof ETargetModel || model instanceof MoETargetModel
      ? model
      : undefined;
  const localizer = localizerOf(model);
  if (!separate) {
    await prefill(prefillChunk);
    snapshot = model.snapshot();
  }
  const startArm = async (arm: 'chain' | 'block') => {
    if (separate) await prefill(arm === 'chain' ? separate.chain : separate.block);
    else model.restore(snapshot!);
  };
  try {
    const runArms = async (capture: boolean) => {
      if (!capture) progress('chain', 1);
      await startArm('chain');
      let t = performance.now();
      const chain = await chainArm(model, draw.block, policy, capture);
      if (!capture) timings.chainMs = performance.now() - t;
      cancel?.throwIfCancelled();
      if (!capture) progress('block', 2);
      await startArm('block');
      const view = gemma && P > gemma.cache.window ? ringView(gemma, K, policy) : undefined;
      t = performance.now();
      const block = await blockArm(model, draw.block, policy, capture);
      if (!capture) timings.blockMs = performance.now() - t;
      return { chain, block, view };
    };
    const { chain, block, view } = await runArms(false);
    const rows: RowDiff[] = draw.block.map((_, j) => compareRows(chain.logits[j], block.logits[j], storage, j));
    const bad = rows.find((r) => r.bytesDiffering > 0);
    const result: DrawResult = {
      index: draw.index,
      salt: draw.salt,
      promptLength: P,
      verdict: bad ? 'diverges' : 'equal',
      position: bad ? bad.position : null,
      bytesDiffering: bad ? bad.bytesDiffering : 0,
      bytesTotal: rows[0].bytesTotal,
      text: bad
        ? `verify block position ${bad.position} differs from the single-token chain in ${fmtInt(bad.bytesDiffering)} of ${fmtInt(bad.bytesTotal)} logit bytes`
        : `all ${K} verify block positions equal the single-token chain in all ${fmtInt(rows[0].bytesTotal)} logit bytes`,
      rows,
      firstDivergence: null,
      ring: view,
      timings,
    };
    if (long && model instanceof QwenTargetModel) {
      cancel?.throwIfCancelled();
      progress('state', 3);
      const t = performance.now();
      result.state = await qwenStateView(
        model,
        draw.block,
        policy,
        () => startArm('chain'),
        () => startArm('block'),
      );
      result.timings.stateMs = performance.now() - t;
    }
    if (bad && opts.localize && localizer) {
      progress('localize', 3);
      cancel?.throwIfCancelled();
      const t = performance.now();
      const cap = await runArms(true);
      const loc = localize(localizer.stages, cap.chain.captures!, cap.block.captures!, K, storage, localizer.labels);
      result.firstDivergence = loc.first;
      const cause =
        loc.first && gemma && policy.mlx && explainMlx(policy.mlx, gemma.desc, loc.first.layer, loc.first.stage, K);
      if (cause) result.firstDivergence!.cause = cause;
      result.stages = loc.stages;
      progress('localize', 3);
      const chainLens: Float32Array[] = [];
      const blockLens: Float32Array[] = [];
      for (let i = 0; i < localizer.layers; i++) {
        cancel?.throwIfCancelled();
        chainLens.push(await localizer.lens(cap.chain.captures!.get(`layer.${i}`)!, K));
        blockLens.push(await localizer.lens(cap.block.captures!.get(`layer.${i}`)!, K));
      }
      result.lens = lensLayers(chainLens, blockLens, K);
      result.timings.localizeMs = performance.now() - t;
    }
    return result;
  } finally {
    snapshot?.destroy();
  }
}
