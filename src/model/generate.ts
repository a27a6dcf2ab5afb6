import { sha256Hex } from '../util/sha256.ts';
import { pipelineCreation } from '../gpu/pipeline-creation.ts';
import type { AssistantModel } from './gemma4/assistant.ts';
import type { ForwardResult } from './target.ts';
import type { Policy } from './policy.ts';
import type { CancelToken, ProgressFn } from '../util/cancel.ts';

/**
 * Greedy generation, classic (one chain step per token) and MTP (docs/MODEL.md section 5):
 *   round: bonus b + seed hidden h -> K-1 drafts -> one verify forward of K rows [b, d1..d(K-1)]
 *   through the staging (buffered) caches -> accept the longest prefix where d(i+1) == argmax(row i)
 *   -> emit the accepted drafts plus the target's token at the first mismatch -> commit the accepted
 *   rows (rollback of the rest) -> next bonus and seed from the last accepted row.
 * Under the exact policy both produce the same tokens: that is what the tests check.
 */
export interface GenerateCounters {
  rounds: number;
  drafted: number;
  accepted: number;
  acceptanceRate: number;
  /** Mean accepted drafts per round. */
  meanAcceptedLength: number;
  /** histogram[n] = rounds that accepted exactly n drafts (n = 0 .. K-1). */
  acceptedHistogram: number[];
  /** perPosition[i] = rounds whose draft i was accepted (i = 0 .. K-2). */
  perPositionAccepted: number[];
}

/**
 * One MTP round as `generate --json` and the page's generation JSON write it (numbers only):
 *   at       index in `tokens` of the round's first drafted token (the bonus token is tokens[at - 1]);
 *   pos      its absolute sequence position, prompt length + at;
 *   drafts   the K-1 drafted tokens, in order;
 *   accepted how many leading drafts the verify accepted (0 .. K-1);
 *   verify   the target's own argmax at each of the K verified rows: verify[i] is the target's token for
 *            tokens[at + i] given the bonus and drafts[0 .. i-1].
 * The round emits drafts[0 .. accepted-1] and then verify[accepted] (the verify's token where
 * drafts[accepted] was rejected, or its next token when every draft was accepted), so verify[i] equals
 * drafts[i] for i < accepted. tokens = [first argmax after the prompt, ...every round's emitted tokens],
 * cut to max-new (or after an end-of-turn token): the last round may emit past the end of `tokens`.
 */
export interface MtpRound {
  at: number;
  pos: number;
  drafts: number[];
  accepted: number;
  verify: number[];
}

/** The tokens a round emits: its accepted drafts, then the verify's token at the first mismatch. */
export function roundEmitted(r: MtpRound): number[] {
  return [...r.drafts.slice(0, r.accepted), r.verify[r.accepted]];
}

export interface GenerateResult {
  mode: 'classic' | 'mtp';
  block: number;
  prompt: number[];
  /** Emitted tokens (the first is the argmax after the prompt). */
  tokens: number[];
  sha256: string;
  stoppedOnEos: boolean;
  counters?: GenerateCounters;
  /** MTP only: every round, in order (see MtpRound). */
  rounds?: MtpRound[];
  draftSource?: string;
  draftPosition?: string;
  timings: GenerateTimings;
}

/** Wall times of a generation (tokens per second over the tokens after the first, which the prefill gives). */
export interface GenerateTimings {
  prefillMs: number;
  decodeMs: number;
  tokensPerSecond: number;
  /**
   * GPU pipelines the decode created (first used there: the chain step's or the verify block's kernels), and the
   * wall time their creation took (pipelineCreation, src/gpu/pipeline-creation.ts: the compiles in Node, a lower bound in a
   * browser), with the tokens per second without that time. Absent when the decode created none.
   */
  decodePipelines?: { created: number; ms: number; tokensPerSecondWithout: number };
}

/** A generation's timings, with the pipelines its decode created since `before` (a copy of pipelineCreation). */
function timings(
  prefillMs: number,
  decodeMs: number,
  emitted: number,
  before: typeof pipelineCreation,
): GenerateTimings {
  const perSecond = (ms: number) => (emitted - 1) / Math.max(ms / 1000, 1e-9);
  const created = pipelineCreation.created - before.created;
  const ms = pipelineCreation.ms - before.ms;
  return {
    prefillMs,
    decodeMs,
    tokensPerSecond: perSecond(decodeMs),
    ...(created > 0 ? { decodePipelines: { created, ms, tokensPerSecondWithout: perSecond(decodeMs - ms) } } : {}),
  };
}

/**
 * What generation needs from a target model (TargetModel, QwenTargetModel): prefill, a verify step with the
 * rows' argmax and post-final-norm hidden, commit of the accepted rows, and classic greedy steps.
 */
export interface GenerateTarget {
  readonly desc: { hidden: number };
  reset(): void;
  prefill(tokens: number[], o: { logits: 'last'; finalHidden?: boolean; policy?: Policy }): Promise<ForwardResult>;
  step(tokens: number[], o: { logits: 'argmax'; finalHidden: true; policy?: Policy }): Promise<ForwardResult>;
  commit(accepted: number): void;
  decodeGreedy(first: number, count: number, o: { policy?: Policy }): Promise<number[]>;
}

/** Where drafts come from. */
export interface DraftSource {
  name: string;
  /** K-1 drafts for a round whose bonus token is `bonus` and whose emitted tokens so far are `emitted`. */
  draft(bonus: number, seedHidden: Float32Array, emitted: readonly number[], count: number): Promise<number[]>;
  /**
   * Drafters that keep state over every accepted position (the Qwen MTP head's KV cache) learn them here:
   * the target consumed rows at positions pos0 .. pos0 + n - 1 and produced the post-norm `hidden` rows
   * [n, H], whose next tokens are `next` (after the prefill: the prompt's tokens 1.. and the first bonus;
   * after a verify: the accepted drafts and the new bonus).
   */
  accept?(next: readonly number[], hidden: Float32Array, pos0: number): Promise<void>;
}

export function assistantSource(asst: AssistantModel): DraftSource {
  return {
    name: 'assistant',
    draft: async (bonus, seed, _emitted, count) => (await asst.draft(bonus, seed, count)).tokens,
  };
}

/**
 * Replays a reference token stream (e.g. classic greedy output) as drafts, replacing the draft for
 * stream index i by a wrong token whenever `mismatch(i)` says so: any acceptance length and any
 * rollback depth on demand. The stream should reach K - 1 tokens past max-new (classicWithOracleStream); past
 * its end (a stream cut by an end-of-turn token) the draft is token 0.
 */
export function oracleSource(
  stream: readonly number[],
  vocab: number,
  mismatch: (streamIndex: number) => boolean,
): DraftSource {
  return {
    name: 'oracle',
    draft: async (_bonus, _seed, emitted, count) =>
      Array.from({ length: count }, (_, i) => {
        const at = emitted.length + i;
        const t = stream[at] ?? 0;
        return mismatch(at) ? (t + 1) % vocab : t;
      }),
  };
}

export interface GenerateOptions {
  maxNew: number;
  eosIds?: readonly number[];
  policy?: Policy;
  onProgress?: ProgressFn;
  cancel?: CancelToken;
}

function finish(tokens: number[], maxNew: number, eos: readonly number[]): { tokens: number[]; stoppedOnEos: boolean } {
  const cut = tokens.findIndex((t) => eos.includes(t));
  if (cut >= 0 && cut < maxNew) return { tokens: tokens.slice(0, cut + 1), stoppedOnEos: true };
  return { tokens: tokens.slice(0, maxNew), stoppedOnEos: false };
}

/** Generation continues a prompt: with none there is no position to predict from. */
const EMPTY_PROMPT = 'the prompt is empty: generation needs at least one token to continue';

/** Chained greedy steps between two readbacks in classic generation (see generateClassic). */
const GREEDY_WINDOW = 16;

export async function generateClassic(
  target: GenerateTarget,
  prompt: number[],
  o: GenerateOptions,
): Promise<GenerateResult> {
  const eos = o.eosIds ?? [];
  if (!prompt.length) throw new Error(EMPTY_PROMPT);
  target.reset();
  let t = performance.now();
  const pre = await target.prefill(prompt, { logits: 'last', policy: o.policy });
  const prefillMs = performance.now() - t;
  const pipelinesBefore = { ...pipelineCreation };
  t = performance.now();
  const tokens = [pre.argmax![0]];
  // Windows of chained steps (TargetModel.decodeGreedy: the argmax stays on the GPU, no wait per
  // token); between windows, the tokens are read back for EOS, progress and cancellation. Steps a
  // window runs past an EOS are cut by finish().
  while (tokens.length < o.maxNew && !eos.includes(tokens[tokens.length - 1])) {
    o.cancel?.throwIfCancelled();
    const n = Math.min(GREEDY_WINDOW, o.maxNew - tokens.length);
    tokens.push(...(await target.decodeGreedy(tokens[tokens.length - 1], n, { policy: o.policy })));
    o.onProgress?.({ phase: 'classic', done: Math.min(tokens.length, o.maxNew), total: o.maxNew });
  }
  const decodeMs = performance.now() - t;
  const out = finish(tokens, o.maxNew, eos);
  return {
    mode: 'classic',
    block: 1,
    prompt,
    ...out,
    sha256: await sha256Hex(Uint32Array.from(out.tokens)),
    timings: timings(prefillMs, decodeMs, out.tokens.length, pipelinesBefore),
  };
}

/**
 * Classic greedy output of `o.maxNew` tokens, and the reference stream an oracle drafter replays (oracleSource):
 * the same continuation `extra` tokens longer, so that the last MTP round, which drafts K - 1 tokens whatever is
 * left of max-new, drafts real tokens (with extra = K - 1) instead of padding that would count as rejections. The
 * classic result is the long run cut to max-new (its own tokens, EOS stop and SHA-256; its timings are the long
 * run's).
 */
export async function classicWithOracleStream(
  target: GenerateTarget,
  prompt: number[],
  o: GenerateOptions,
  extra: number,
): Promise<{ classic: GenerateResult; stream: number[] }> {
  const long = await generateClassic(target, prompt, { ...o, maxNew: o.maxNew + extra });
  const out = finish(long.tokens, o.maxNew, o.eosIds ?? []);
  const classic = { ...long, ...out, sha256: await sha256Hex(Uint32Array.from(out.tokens)) };
  return { classic, stream: long.tokens };
}

export async function generateMtp(
  target: GenerateTarget,
  source: DraftSource,
  prompt: number[],
  K: number,
  o: GenerateOptions & { draftPosition?: string },
): Promise<GenerateResult> {
  if (K < 2) throw new Error('MTP needs a block of at least 2 (one bonus token and one draft)');
  if (!prompt.length) throw new Error(EMPTY_PROMPT);
  const eos = o.eosIds ?? [];
  const H = target.desc.hidden;
  target.reset();
  let t = performance.now();
  const pre = await target.prefill(prompt, { logits: 'last', finalHidden: true, policy: o.policy });
  const prefillMs = performance.now() - t;
  const pipelinesBefore = { ...pipelineCreation };
  t = performance.now();
  const tokens = [pre.argmax![0]];
  let seed = pre.finalHidden!.slice((prompt.length - 1) * H, prompt.length * H);
  await source.accept?.([...prompt.slice(1), tokens[0]], pre.finalHidden!, 0);
  const c: GenerateCounters = {
    rounds: 0,
    drafted: 0,
    accepted: 0,
    acceptanceRate: 0,
    meanAcceptedLength: 0,
    acceptedHistogram: new Array(K).fill(0),
    perPositionAccepted: new Array(K - 1).fill(0),
  };
  const rounds: MtpRound[] = [];
  while (tokens.length < o.maxNew && !eos.includes(tokens[tokens.length - 1])) {
    o.cancel?.throwIfCancelled();
    const bonus = tokens[tokens.length - 1];
    const drafts = await source.draft(bonus, seed, tokens, K - 1);
    const verify = await target.step([bonus, ...drafts], { logits: 'argmax', finalHidden: true, policy: o.policy });
    const am = verify.argmax!;
    let n = 0;
    while (n < K - 1 && drafts[n] === am[n]) n++;
    target.commit(n + 1);
    await source.accept?.(
      [...drafts.slice(0, n), am[n]],
      verify.finalHidden!.slice(0, (n + 1) * H),
      prompt.length + tokens.length - 1,
    );
    rounds.push({
      at: tokens.length,
      pos: prompt.length + tokens.length,
      drafts,
      accepted: n,
      verify: Array.from(am.subarray(0, K)),
    });
    tokens.push(...drafts.slice(0, n), am[n]);
    seed = verify.finalHidden!.slice(n * H, (n + 1) * H);
    c.rounds++;
    c.drafted += K - 1;
    c.accepted += n;
    c.acceptedHistogram[n]++;
    for (let i = 0; i < n; i++) c.perPositionAccepted[i]++;
    o.onProgress?.({ phase: 'mtp', done: Math.min(tokens.length, o.maxNew), total: o.maxNew });
  }
  c.acceptanceRate = c.drafted ? c.accepted / c.drafted : 0;
  c.meanAcceptedLength = c.rounds ? c.accepted / c.rounds : 0;
  const decodeMs = performance.now() - t;
  const out = finish(tokens, o.maxNew, eos);
  return {
    mode: 'mtp',
    block: K,
    prompt,
    ...out,
    sha256: await sha256Hex(Uint32Array.from(out.tokens)),
    counters: c,
    rounds,
    draftSource: source.name,
    draftPosition: o.draftPosition,
    timings: timings(prefillMs, decodeMs, out.tokens.length, pipelinesBefore),
  };
}
