/**
 * A generation run on the loaded checkpoints: classic then MTP from one prompt, their diff, what drafted and the
 * run's provenance.
 */
import type { GpuContext } from '../gpu/device.ts';
import type { CancelToken, Progress, ProgressFn } from '../util/cancel.ts';
import type { AssistantDescription, TargetDescription } from '../format/model-description.ts';
import { checkpointTokenizer, type TextCodec } from '../format/tokenizer.ts';
import { QWEN35_MTP_DRAFTER_TYPE } from '../format/qwen3_5/drafter.ts';
import type { GpuWeights } from '../model/gpu-weights.ts';
import type { QwenGpuWeights } from '../model/qwen3_5/weights.ts';
import type { DraftConvention } from '../model/gemma4/assistant.ts';
import { classicWithOracleStream, generateClassic, generateMtp, type GenerateResult } from '../model/generate.ts';
import { generationModels, pageOracleSource, type GenerationWeights } from '../model/generation-setup.ts';
import type { CheckpointInfo, ExactnessSelfTestSummary, Provenance, SelfTestRecord } from '../parity/report.ts';
import { APP_COMMIT, APP_VERSION } from '../parity/version.ts';
import { compilerHere } from '../parity/compiler-provenance.ts';
import { diffGenerations, type GenerationDiff } from '../parity/generation-diff.ts';
import { loadedInfo, type LoadedCheckpoint, type LoadedTarget } from './loaded-checkpoint.ts';
import { attachedTo, type LoadedDrafter } from './qwen-drafter.ts';

/** What the page asks of a generation run. */
export interface GenerationOptions {
  prompt: number[] | string;
  chat?: boolean;
  maxNew: number;
  block: number;
  policy: string;
  precision: 'f32' | 'bf16';
  draftPosition: DraftConvention;
  drafts?: 'mtp' | 'oracle';
}

/** A generation run's result, as the page shows and saves it. */
export interface GenerationRun {
  classic: GenerateResult;
  mtp: GenerateResult;
  diff: GenerationDiff;
  classicText?: string;
  mtpText?: string;
  /** What drafted (absent in results saved before it was recorded). */
  drafter?: GenerationDrafter;
  /** Who ran it, where, on which checkpoints (as a report's; absent in results saved before it was recorded). */
  provenance?: GenerationProvenance;
}

/** What a generation run reads of the engine, which has checked that the target has what drafts for it. */
export interface GenerationInputs {
  ctx: GpuContext;
  token: CancelToken;
  target: LoadedTarget;
  /** A Gemma 4 target's assistant. */
  assistant: Extract<LoadedCheckpoint, { family: 'gemma4' }> | undefined;
  /** A Qwen3.5 target's weights with the head that drafts for it. */
  qwenWeights: QwenGpuWeights | undefined;
  /** Oracle drafts (no drafter). */
  oracle: boolean;
  exactnessSelfTest: ExactnessSelfTestSummary;
  /** The split drafter on the assistant zone, as it is when asked. */
  drafter: () => LoadedDrafter | undefined;
  /** The provenance entry of what drafts for the target, as it is when asked. */
  drafterInfo: () => CheckpointInfo | undefined;
  /** The page's last self-test, as it is when asked. */
  lastSelfTest: () => SelfTestRecord | undefined;
}

/** Generates classic then MTP from the prompt, and diffs them. */
export async function runGenerationJob(
  opts: GenerationOptions,
  e: GenerationInputs,
  onProgress?: ProgressFn,
): Promise<GenerationRun> {
  const { ctx, token, target, assistant, oracle, exactnessSelfTest } = e;
  const tokenizer = await checkpointTokenizer(target.ck);
  const prompt = promptTokens(target, tokenizer, opts);
  const vocab = target.weights.desc.vocab;
  const weights = generationWeights(target, e.qwenWeights, assistant);
  const g = generationModels(ctx, weights, {
    promptLength: prompt.length,
    maxNew: opts.maxNew,
    block: opts.block,
    policy: opts.policy,
    precision: opts.precision,
    draftPosition: opts.draftPosition,
  });
  try {
    const base = { maxNew: opts.maxNew, eosIds: g.eosIds, policy: g.policy, cancel: token };
    const classicOpts = { ...base, onProgress: (p: Progress) => onProgress?.({ ...p, phase: 'classic decode' }) };
    // each arm's prefill opens its own progress line, as the result's timings split it (prefill, decode)
    onProgress?.({ phase: 'classic prefill', done: 0, total: opts.maxNew });
    // oracle drafts replay classic's continuation K - 1 tokens past max-new (the last round drafts that far)
    const { classic, stream } = oracle
      ? await classicWithOracleStream(g.target, prompt, classicOpts, opts.block - 1)
      : { classic: await generateClassic(g.target, prompt, classicOpts), stream: [] };
    const drafter = oracle ? undefined : g.mtpDrafter();
    try {
      onProgress?.({ phase: 'MTP prefill', done: 0, total: opts.maxNew });
      const mtp = await generateMtp(
        g.target,
        drafter ? drafter.source : pageOracleSource(stream, vocab),
        prompt,
        opts.block,
        {
          ...base,
          draftPosition: drafter?.position,
          onProgress: (p) => onProgress?.({ ...p, phase: 'MTP decode' }),
        },
      );
      return {
        classic,
        mtp,
        diff: diffGenerations(classic, mtp),
        classicText: tokenizer?.decode(classic.tokens),
        mtpText: tokenizer?.decode(mtp.tokens),
        drafter: describeDrafter(target, assistant, e.drafter(), oracle),
        provenance: {
          app: { name: 'ringside' as const, version: APP_VERSION },
          ...(APP_COMMIT ? { commit: APP_COMMIT } : {}),
          ...(e.lastSelfTest() ? { selfTest: e.lastSelfTest() } : {}),
          createdAt: new Date().toISOString(),
          adapter: ctx.report,
          platform: typeof navigator !== 'undefined' ? navigator.userAgent : 'unknown',
          compiler: compilerHere(ctx.report.backend),
          target: loadedInfo(target),
          ...(oracle ? {} : { assistant: e.drafterInfo() }),
          exactnessSelfTest,
        },
      };
    } finally {
      drafter?.done();
    }
  } finally {
    g.destroy();
  }
}

/** The prompt as token ids (text encoded with the target folder's tokenizer), checked against the vocabulary. */
function promptTokens(target: LoadedTarget, tokenizer: TextCodec | undefined, opts: GenerationOptions): number[] {
  let prompt: number[];
  if (typeof opts.prompt === 'string') {
    if (!tokenizer)
      throw new Error(`${target.ck.label} has no tokenizer.json: give the prompt as token ids (e.g. 2,105,2364).`);
    prompt = tokenizer.encode(opts.prompt, opts.chat === true);
  } else prompt = opts.prompt;
  const vocab = target.weights.desc.vocab;
  const bad = prompt.find((t) => !Number.isInteger(t) || t < 0 || t >= vocab);
  if (bad !== undefined || !prompt.length)
    throw new Error(
      `The prompt must be token ids between 0 and ${vocab - 1}${bad !== undefined ? ` (found ${bad})` : ''}.`,
    );
  return prompt;
}

/** The weights generationModels takes: a Qwen3.5 target's with its head, or a Gemma 4 target's and assistant's. */
function generationWeights(
  target: LoadedTarget,
  qwenWeights: QwenGpuWeights | undefined,
  assistant: Extract<LoadedCheckpoint, { family: 'gemma4' }> | undefined,
): GenerationWeights {
  return target.family === 'qwen3_5'
    ? { family: 'qwen3_5', target: qwenWeights! }
    : {
        family: 'gemma4',
        target: target.weights as GpuWeights<TargetDescription>,
        assistant: assistant?.weights as GpuWeights<AssistantDescription> | undefined,
      };
}

/** A generation run's provenance: a report's (src/parity/report.ts Provenance) without the probe's settings. */
export type GenerationProvenance = Pick<
  Provenance,
  | 'app'
  | 'commit'
  | 'selfTest'
  | 'createdAt'
  | 'adapter'
  | 'platform'
  | 'compiler'
  | 'target'
  | 'assistant'
  | 'exactnessSelfTest'
>;

/** What drafted in a generation run, as the page shows it. */
export interface GenerationDrafter {
  /** 'split-drafter': a split Qwen3.5 MTP drafter folder's head (it replaces the target's own when it has one). */
  kind: 'assistant' | 'mtp-head' | 'split-drafter' | 'oracle';
  /** e.g. "MTP assistant assistant (gemma4_assistant)", "own MTP head of qwen-tiny (mtp.*)". */
  text: string;
}

function describeDrafter(
  target: LoadedTarget,
  assistant: LoadedCheckpoint | undefined,
  drafter: LoadedDrafter | undefined,
  oracle: boolean,
): GenerationDrafter {
  const attached = target.family === 'qwen3_5' ? attachedTo(target.ck, drafter) : undefined;
  if (oracle) {
    // Why the target cannot draft itself, unless a split drafter could have drafted for it.
    const why = target.family === 'qwen3_5' && !attached ? target.ck.description.mtpUnavailable : null;
    return {
      kind: 'oracle',
      text: `oracle drafts: the classic output with a fixed third of the drafts wrong${why ? ` (${why})` : ''}`,
    };
  }
  if (attached && drafter)
    return {
      kind: 'split-drafter',
      text: `the split MTP drafter ${drafter.ck.label} (${QWEN35_MTP_DRAFTER_TYPE}), ${attached.replacedOwnHead ? `in place of ${target.ck.label}'s own mtp.* head` : `for ${target.ck.label}, which has no mtp.* head of its own`}`,
    };
  if (target.family === 'qwen3_5')
    return { kind: 'mtp-head', text: `the target's own MTP head (mtp.* of ${target.ck.label})` };
  // An E-series assistant scores only the tokens of its top centroids (use_ordered_embeddings): say so.
  const d = assistant?.family === 'gemma4' ? assistant.ck.description : undefined;
  const head =
    d?.role === 'assistant' && d.centroidHead
      ? ` (centroid head: ${d.centroidHead.numCentroids} centroids, top ${d.centroidHead.topK})`
      : '';
  return { kind: 'assistant', text: `the MTP assistant ${assistant?.ck.label ?? ''}`.trim() + head };
}
