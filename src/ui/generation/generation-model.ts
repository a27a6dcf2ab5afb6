/**
 * Pure facts about a classic-versus-MTP generation run, for the generation view and its JSON download.
 * Generation results are not a report kind (no schema of their own in src/parity): the page shows them
 * live and can save them as JSON.
 */
import type { Engine, GenerationProvenance } from '../../worker/engine.ts';
import type { GenerateCounters, GenerateTimings, MtpRound } from '../../model/generate.ts';
import { isSoftwareAdapter } from '../../gpu/kernel-class.ts';
import { fmtInt } from '../../util/number-format.ts';

export type GenerationResult = Awaited<ReturnType<Engine['runGeneration']>>;

export interface GenerationOptions {
  prompt: number[] | string;
  chat: boolean;
  maxNew: number;
  block: number;
  policy: string;
  precision: 'f32' | 'bf16';
  draftPosition: 'hf' | 'mlxcel';
  /** Qwen3.5 targets: drafts from the target's own MTP head or oracle drafts (absent: the family's drafter). */
  drafts?: 'mtp' | 'oracle';
}

export interface GenerationRun {
  options: GenerationOptions;
  result: GenerationResult;
  createdAt: string;
  elapsedMs: number;
}

/** Tokens shown per side; past this the view says how many more there are. */
export const MAX_SHOWN_TOKENS = 4096;

/**
 * How each emitted token reads against the other arm's token at the same index: `same` before the first
 * difference, `first` at it, then `differs` where the two still differ and `after` where they happen to
 * match again (the continuations have parted, so those matches are dimmed, not trusted).
 */
export type TokenMark = 'same' | 'first' | 'differs' | 'after';

export function tokenMarks(
  tokens: readonly number[],
  other: readonly number[],
  firstDifference: number | null,
): TokenMark[] {
  return tokens
    .slice(0, MAX_SHOWN_TOKENS)
    .map((t, i) =>
      firstDifference === null || i < firstDifference
        ? 'same'
        : i === firstDifference
          ? 'first'
          : t === other[i]
            ? 'after'
            : 'differs',
    );
}

export function generationVerdict(r: GenerationResult): { verdict: 'identical' | 'differs'; text: string } {
  const d = r.diff;
  const a = r.classic.tokens;
  const b = r.mtp.tokens;
  if (d.identical)
    return {
      verdict: 'identical',
      text: `MTP output is identical to classic greedy decode: ${fmtInt(a.length)} token${a.length === 1 ? '' : 's'}, same SHA-256`,
    };
  const i = d.firstDifference ?? 0;
  const tok = (xs: number[]) => (i < xs.length ? `token id ${xs[i]}` : `the end (${fmtInt(xs.length)} tokens)`);
  return {
    verdict: 'differs',
    text: `first difference at token ${fmtInt(i)}: classic has ${tok(a)}, MTP has ${tok(b)}`,
  };
}

export interface Bar {
  label: string;
  value: number;
  of: number;
}

/** Rounds that accepted exactly n drafts, n = 0 .. K-1. */
export function histogramBars(c: GenerateCounters): Bar[] {
  return c.acceptedHistogram.map((v, n) => ({ label: `${n} accepted`, value: v, of: c.rounds }));
}

/** Rounds whose draft i was accepted, i = 1 .. K-1. */
export function perPositionBars(c: GenerateCounters): Bar[] {
  return c.perPositionAccepted.map((v, i) => ({ label: `draft ${i + 1}`, value: v, of: c.rounds }));
}

/** Rounds listed in the rounds table; past this the view says how many more there are. */
export const MAX_SHOWN_ROUNDS = 2000;

/** A drafted token against the verify: accepted, the first rejected one, or after it (never verified). */
export type DraftMark = 'accepted' | 'rejected' | 'unverified';

export interface RoundRow {
  /** Round number, from 0. */
  index: number;
  /** Index in the MTP output of the round's first drafted token, and its absolute sequence position. */
  at: number;
  pos: number;
  drafts: { token: number; mark: DraftMark }[];
  accepted: number;
  /** The verify's token emitted at the end of the round (at the first rejection, or after the last draft). */
  verifyToken: number;
  /** The draft the verify rejected (null when every draft was accepted). */
  rejectedDraft: number | null;
}

export function roundRows(rounds: readonly MtpRound[]): RoundRow[] {
  return rounds.slice(0, MAX_SHOWN_ROUNDS).map((r, index) => ({
    index,
    at: r.at,
    pos: r.pos,
    drafts: r.drafts.map((token, i) => ({
      token,
      mark: i < r.accepted ? 'accepted' : i === r.accepted ? 'rejected' : 'unverified',
    })),
    accepted: r.accepted,
    verifyToken: r.verify[r.accepted],
    rejectedDraft: r.accepted < r.drafts.length ? r.drafts[r.accepted] : null,
  }));
}

/** One line over all rounds: how many rejected a draft, and where the first rejection was. */
export function roundsSummary(rounds: readonly MtpRound[]): string {
  if (!rounds.length) return 'No MTP rounds.';
  const rejected = rounds.filter((r) => r.accepted < r.drafts.length);
  const n = rounds.length;
  const head = `${fmtInt(n)} round${n === 1 ? '' : 's'}, ${fmtInt(rejected.length)} with a rejected draft`;
  const f = rejected[0];
  if (!f) return `${head}: every draft was accepted.`;
  return `${head}; the first at round ${fmtInt(rounds.indexOf(f))}, token ${fmtInt(f.at + f.accepted)}: drafted ${f.drafts[f.accepted]}, the verify emitted ${f.verify[f.accepted]}.`;
}

/** The run as a JSON document (what "Download JSON" saves). */
export function generationJson(run: GenerationRun): Record<string, unknown> {
  const r = run.result;
  return {
    schema: 'ringside-generation/1',
    createdAt: run.createdAt,
    // the run panel's "Done in" (both arms, end to end)
    elapsedMs: run.elapsedMs,
    options: run.options,
    verdict: generationVerdict(r).verdict,
    diff: r.diff,
    classic: r.classic,
    mtp: r.mtp,
    ...(r.classicText !== undefined ? { classicText: r.classicText } : {}),
    ...(r.mtpText !== undefined ? { mtpText: r.mtpText } : {}),
    ...(r.drafter ? { drafter: r.drafter } : {}),
    ...(r.provenance ? { provenance: r.provenance } : {}),
  };
}

export function generationFileStem(run: GenerationRun): string {
  const safe = (s: string) =>
    s
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-|-$/g, '')
      .slice(0, 40) || 'x';
  // the target's digest, as the probe's and the trace's files name it (the tokens' SHA-256 before provenance was kept)
  const sha =
    (run.result.provenance?.target.digest ?? run.result.classic.sha256)
      .toLowerCase()
      .replace(/[^0-9a-f]/g, '')
      .slice(0, 12) || 'nosha';
  return `ringside-generation-${generationVerdict(run.result).verdict}-${safe(run.options.policy)}-${run.options.precision}-K${run.options.block}-${run.options.draftPosition}-${sha}`;
}

/** Whether a run's GPU work was compiled by Dawn in Node (the command line), where pipeline creation is the compile. */
const ranInNode = (p: GenerationProvenance | undefined) => p?.compiler?.browser.startsWith('Node') === true;

/**
 * What an arm's decode time includes when the decode created GPU pipelines, or '' when it created none. Every run
 * creates its own pipelines (its models are built for it), so the count repeats run after run. In Node, Dawn compiles
 * a pipeline as it is created: the time is the compiles', and the speed without them follows. A browser compiles in
 * its GPU process, where its shader cache may make a repeat cheaper, and the page cannot see how long that took.
 */
export function pipelinesNote(t: GenerateTimings, provenance: GenerationProvenance | undefined): string {
  const p = t.decodePipelines;
  if (!p) return '';
  const made = `its decode created ${fmtInt(p.created)} GPU pipeline${p.created === 1 ? '' : 's'}`;
  if (ranInNode(provenance))
    return `${made} in ${Math.round(p.ms)} ms of compiles, which a machine's first run pays (${p.tokensPerSecondWithout.toFixed(2)} tokens/s without them)`;
  return `${made}, as every run does; the browser compiles them in its GPU process, whose shader cache can make a later run's compiles cheaper, and how long they took is not visible to the page`;
}

/**
 * Why MTP's speed on a software adapter (a CPU behind WebGPU) says nothing of a GPU's, or '' on a GPU (or a result
 * without provenance): there a verify block of K rows costs nearly K single-token steps, so MTP gains little or loses.
 * Figures: docs/PERFORMANCE.md, reference figures (end to end, a block of 4 against a chain token).
 */
export function softwareAdapterNote(provenance: GenerationProvenance | undefined, block: number): string {
  if (!provenance || !isSoftwareAdapter(provenance.adapter)) return '';
  return `This adapter is a software one (a CPU behind WebGPU): there a verify block of ${block} rows costs almost as much as ${block} single-token steps (a block of 4 costs 3.14× a step on lavapipe, 1.39× on an NVIDIA H200), so MTP gains little or runs slower than classic here; its speed says nothing about a GPU's.`;
}
