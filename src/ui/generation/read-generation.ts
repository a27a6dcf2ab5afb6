/**
 * Reads a generation document (what the generation card's "Download JSON" writes, schema ringside-generation/1: a
 * file or a share link) back into a GenerationRun the view can trust: the problems a person can act on when it is not
 * one, else a deep, typed, bounded copy. The comparison of the two arms (identical, first difference, window) is
 * computed again from the two token lists, never taken from the file.
 */
import { MAX_VERIFY_BLOCK } from '../../model/target.ts';
import type { GenerateResult, GenerateTimings, MtpRound } from '../../model/generate.ts';
import { diffGenerations } from '../../parity/generation-diff.ts';
import type { GenerationDrafter, GenerationProvenance } from '../../worker/engine.ts';
import { num, str } from '../common/format.ts';
import { normalizeProvenance } from '../report/report-model.ts';
import type { GenerationOptions, GenerationRun } from './generation-model.ts';

export const GENERATION_SCHEMA = 'ringside-generation/1';

/** Far above a real run (4,096 new tokens at most in the page, K <= 8), low enough that a crafted file cannot freeze the page. */
export const GENERATION_LIMITS = { tokens: 65_536, rounds: 65_536, block: MAX_VERIFY_BLOCK, text: 200_000 } as const;

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const isTokenList = (v: unknown, max: number): v is number[] =>
  Array.isArray(v) && v.length <= max && v.every((t) => Number.isInteger(t) && t >= 0);

export type ReadGenerationResult = { ok: true; run: GenerationRun } | { ok: false; problems: string[] };

/** Whether `x` says it is a generation document (its schema), whatever else is wrong with it. */
export function isGenerationDocument(x: unknown): boolean {
  return isObj(x) && x.schema === GENERATION_SCHEMA;
}

function problemsOf(x: Obj): string[] {
  const errs: string[] = [];
  const o = x.options;
  if (!isObj(o)) errs.push('options must be an object (the run settings)');
  else {
    if (!(typeof o.prompt === 'string' || isTokenList(o.prompt, GENERATION_LIMITS.tokens)))
      errs.push('options.prompt must be the prompt text or a list of token ids');
    if (!(Number.isInteger(o.maxNew) && (o.maxNew as number) >= 1))
      errs.push('options.maxNew must be a whole number >= 1');
    if (!(Number.isInteger(o.block) && (o.block as number) >= 1 && (o.block as number) <= GENERATION_LIMITS.block))
      errs.push(`options.block must be a whole number from 1 to ${GENERATION_LIMITS.block}`);
    if (typeof o.policy !== 'string') errs.push('options.policy must be a string');
    if (o.precision !== 'f32' && o.precision !== 'bf16') errs.push('options.precision must be "f32" or "bf16"');
  }
  for (const arm of ['classic', 'mtp'] as const) {
    const g = x[arm];
    if (!isObj(g)) {
      errs.push(`${arm} must be an object (that arm's result)`);
      continue;
    }
    if (!isTokenList(g.prompt, GENERATION_LIMITS.tokens)) errs.push(`${arm}.prompt must be a list of token ids`);
    if (!isTokenList(g.tokens, GENERATION_LIMITS.tokens)) errs.push(`${arm}.tokens must be a list of token ids`);
    if (typeof g.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(g.sha256))
      errs.push(`${arm}.sha256 must be 64 hex digits`);
    if (!isObj(g.timings)) errs.push(`${arm}.timings must be an object`);
    if (g.rounds !== undefined && !(Array.isArray(g.rounds) && g.rounds.length <= GENERATION_LIMITS.rounds))
      errs.push(`${arm}.rounds must be a list of at most ${GENERATION_LIMITS.rounds} rounds`);
  }
  if (isObj(x.classic) && isObj(x.mtp) && isTokenList(x.classic.prompt, GENERATION_LIMITS.tokens)) {
    const a = x.classic.prompt;
    const b = x.mtp.prompt;
    if (!(Array.isArray(b) && b.length === a.length && b.every((t, i) => t === a[i])))
      errs.push('classic.prompt and mtp.prompt differ: the two arms are not of one run');
  }
  return errs;
}

function timings(t: Obj): GenerateTimings {
  const p = isObj(t.decodePipelines) ? t.decodePipelines : undefined;
  return {
    prefillMs: num(t.prefillMs),
    decodeMs: num(t.decodeMs),
    tokensPerSecond: num(t.tokensPerSecond),
    ...(p
      ? {
          decodePipelines: {
            created: num(p.created),
            ms: num(p.ms),
            tokensPerSecondWithout: num(p.tokensPerSecondWithout),
          },
        }
      : {}),
  };
}

const ints = (v: unknown, max: number): number[] =>
  Array.isArray(v) ? v.slice(0, max).map((n) => (Number.isInteger(n) ? (n as number) : NaN)) : [];

function round(r: unknown, K: number): MtpRound | undefined {
  if (!isObj(r)) return undefined;
  const drafts = ints(r.drafts, K);
  const verify = ints(r.verify, K + 1);
  const accepted = Number(r.accepted);
  // roundRows reads verify[accepted] and drafts[accepted]: a round must hold them
  if (!(Number.isInteger(accepted) && accepted >= 0 && accepted <= drafts.length && accepted < verify.length))
    return undefined;
  return { at: num(r.at), pos: num(r.pos), drafts, accepted, verify };
}

function result(g: Obj, mode: 'classic' | 'mtp', K: number): GenerateResult {
  const c = isObj(g.counters) ? g.counters : undefined;
  return {
    mode,
    block: num(g.block),
    prompt: ints(g.prompt, GENERATION_LIMITS.tokens),
    tokens: ints(g.tokens, GENERATION_LIMITS.tokens),
    sha256: str(g.sha256, 64),
    stoppedOnEos: g.stoppedOnEos === true,
    ...(c
      ? {
          counters: {
            rounds: num(c.rounds),
            drafted: num(c.drafted),
            accepted: num(c.accepted),
            acceptanceRate: num(c.acceptanceRate),
            meanAcceptedLength: num(c.meanAcceptedLength),
            acceptedHistogram: ints(c.acceptedHistogram, K + 1).map((n) => (Number.isNaN(n) ? 0 : n)),
            perPositionAccepted: ints(c.perPositionAccepted, K).map((n) => (Number.isNaN(n) ? 0 : n)),
          },
        }
      : {}),
    ...(Array.isArray(g.rounds)
      ? {
          rounds: g.rounds
            .slice(0, GENERATION_LIMITS.rounds)
            .map((r) => round(r, K))
            .filter((r): r is MtpRound => r !== undefined),
        }
      : {}),
    ...(typeof g.draftSource === 'string' ? { draftSource: str(g.draftSource, 200) } : {}),
    ...(typeof g.draftPosition === 'string' ? { draftPosition: str(g.draftPosition, 20) } : {}),
    timings: timings(isObj(g.timings) ? g.timings : {}),
  };
}

function options(o: Obj): GenerationOptions {
  return {
    prompt:
      typeof o.prompt === 'string' ? str(o.prompt, GENERATION_LIMITS.text) : ints(o.prompt, GENERATION_LIMITS.tokens),
    chat: o.chat === true,
    maxNew: num(o.maxNew),
    block: num(o.block),
    policy: str(o.policy, 100),
    precision: o.precision === 'bf16' ? 'bf16' : 'f32',
    draftPosition: o.draftPosition === 'mlxcel' ? 'mlxcel' : 'hf',
    ...(o.drafts === 'mtp' || o.drafts === 'oracle' ? { drafts: o.drafts } : {}),
  };
}

function provenance(p: Obj): GenerationProvenance {
  const full = normalizeProvenance(p);
  return {
    app: full.app,
    ...(full.commit !== undefined ? { commit: full.commit } : {}),
    ...(full.selfTest !== undefined ? { selfTest: full.selfTest } : {}),
    createdAt: full.createdAt,
    adapter: full.adapter,
    platform: full.platform,
    ...(full.compiler ? { compiler: full.compiler } : {}),
    target: full.target,
    ...(full.assistant ? { assistant: full.assistant } : {}),
  };
}

const DRAFTER_KINDS: readonly GenerationDrafter['kind'][] = ['assistant', 'mtp-head', 'split-drafter', 'oracle'];

export function readGeneration(x: unknown): ReadGenerationResult {
  if (!isObj(x)) return { ok: false, problems: ['not a JSON object'] };
  if (x.schema !== GENERATION_SCHEMA)
    return { ok: false, problems: [`schema must be "${GENERATION_SCHEMA}" (got ${JSON.stringify(x.schema)})`] };
  const problems = problemsOf(x);
  if (problems.length) return { ok: false, problems };
  const opts = options(x.options as Obj);
  const K = opts.block;
  const classic = result(x.classic as Obj, 'classic', K);
  const mtp = result(x.mtp as Obj, 'mtp', K);
  const d = x.drafter;
  const drafter =
    isObj(d) && DRAFTER_KINDS.includes(d.kind as GenerationDrafter['kind'])
      ? { kind: d.kind as GenerationDrafter['kind'], text: str(d.text, 400) }
      : undefined;
  return {
    ok: true,
    run: {
      options: opts,
      result: {
        classic,
        mtp,
        diff: diffGenerations(classic, mtp),
        ...(typeof x.classicText === 'string' ? { classicText: str(x.classicText, GENERATION_LIMITS.text) } : {}),
        ...(typeof x.mtpText === 'string' ? { mtpText: str(x.mtpText, GENERATION_LIMITS.text) } : {}),
        ...(drafter ? { drafter } : {}),
        ...(isObj(x.provenance) ? { provenance: provenance(x.provenance) } : {}),
      },
      createdAt: str(x.createdAt, 100),
      elapsedMs: num(x.elapsedMs),
    },
  };
}
