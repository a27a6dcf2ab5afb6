import { writeFile } from 'node:fs/promises';
import { loadModels } from '../load-models.ts';
import type { DraftConvention } from '../../model/gemma4/assistant.ts';
import {
  classicWithOracleStream,
  generateClassic,
  generateMtp,
  oracleSource,
  roundEmitted,
  type GenerateResult,
  type GenerateTimings,
} from '../../model/generate.ts';
import { generationModels, type GenerationModels } from '../../model/generation-setup.ts';
import { checkPolicyName } from '../../model/policy-registry.ts';
import { refuseRouterWithoutExperts, ROUTER_OPTION, routerOption, routerRefused } from '../router-option.ts';
import type { TextCodec } from '../../format/tokenizer.ts';
import { isQwenDir, loadQwenTarget } from '../qwen-target.ts';
import { choice, intList, intOption, requireOutputFile, requireString } from '../args.ts';
import { checkPositions, MAX_NEW, MAX_POSITIONS, MAX_VOCAB } from '../bounds.ts';
import type { Command, CommandIO } from '../command.ts';
import type { ExactnessSelfTestSummary } from '../../parity/report.ts';
import { MAX_VERIFY_BLOCK } from '../../model/target.ts';
import { EXACTNESS_FAILED_EXIT, exactnessBeforeVerdict, exitAfterSelfTest } from '../exactness.ts';

/**
 * The `generate --json` document: the GenerateResult (src/model/generate.ts documents its fields; MTP
 * runs carry `rounds`, see MtpRound) plus policy, precision and the decoded text. One line per round,
 * so hundreds of rounds stay small and readable.
 */
export function generateJsonText(json: Record<string, unknown>): string {
  const { rounds, ...rest } = json;
  const head = JSON.stringify(rest, null, 1);
  if (!Array.isArray(rounds)) return head;
  const lines = rounds.map((r) => `  ${JSON.stringify(r)}`).join(',\n');
  return `${head.slice(0, -2)},\n "rounds": [${rounds.length ? `\n${lines}\n ` : ''}]\n}`;
}

export const generate: Command = {
  name: 'generate',
  summary: `Greedy generation, classic (chain decode) or MTP (draft, verify, accept, roll back), with counters. Exit ${EXACTNESS_FAILED_EXIT} when the exactness self-test run first failed on this adapter.`,
  usage:
    'generate --target DIR|ORG/NAME [--draft DIR|ORG/NAME] (--tokens CSV | --prompt TEXT [--chat]) --max-new N --mode classic|mtp [--block K] [--policy NAME] [--draft-source assistant|oracle] [--draft-position hf|mlxcel] [--oracle-mismatch CSV] [--precision f32|bf16] [--router mlx|transformers] --json FILE',
  options: {
    target: {
      type: 'string',
      help: 'target checkpoint folder, or a Hub id in the local Hugging Face cache',
      checkpoint: 'target',
    },
    draft: {
      type: 'string',
      help: 'assistant checkpoint folder (Gemma 4), or a split Qwen3.5 MTP drafter folder (mlx-vlm qwen3_5_mtp; else a Qwen3.5 target drafts with its own mtp.* head)',
      checkpoint: 'draft',
    },
    tokens: { type: 'string', help: 'prompt token ids, comma-separated' },
    prompt: { type: 'string', help: 'prompt text (needs tokenizer.json in the target folder)' },
    chat: { type: 'boolean', help: 'wrap --prompt in the Gemma chat template' },
    'max-new': { type: 'string', help: 'tokens to emit', default: '64' },
    mode: { type: 'string', help: 'classic | mtp', default: 'classic' },
    block: { type: 'string', help: 'MTP block width K (bonus + K-1 drafts)', default: '4' },
    policy: { type: 'string', help: 'numerics policy', default: 'exact' },
    precision: { type: 'string', help: 'f32 | bf16', default: 'f32' },
    'draft-source': {
      type: 'string',
      help: 'assistant | oracle (replays classic output with wrong drafts at --oracle-mismatch indices)',
      default: 'assistant',
    },
    'draft-position': { type: 'string', help: 'hf | mlxcel frozen draft position', default: 'hf' },
    'oracle-mismatch': {
      type: 'string',
      help: 'with --draft-source oracle: emitted-token indices whose draft the oracle gets wrong (default: none)',
    },
    router: ROUTER_OPTION,
    json: { type: 'string', help: 'where to write the JSON result' },
  },
  async run({ values }, io) {
    const a = generateArgs(values);
    if (await isQwenDir(a.targetDir)) return runQwen(a, values, io);
    return runGemma(a, values, io);
  },
};

type Values = Record<string, string | boolean | undefined>;

/** The options of a generate run, read and checked. */
interface GenerateArgs {
  out: string;
  mode: 'classic' | 'mtp';
  router: ReturnType<typeof routerOption>;
  K: number;
  maxNew: number;
  precision: 'f32' | 'bf16';
  source: 'assistant' | 'oracle';
  position: DraftConvention;
  targetDir: string;
  /** --oracle-mismatch: the emitted-token indices whose draft the oracle gets wrong. */
  wrong: Set<number>;
  /** --tokens, where given. */
  ids: number[] | undefined;
}

/** Reads every option of the command and checks how they combine. */
function generateArgs(values: Values): GenerateArgs {
  const out = requireOutputFile(values, 'json');
  const mode = choice(values, 'mode', ['classic', 'mtp'] as const)!;
  const router = routerOption(values);
  const K = intOption(values, 'block', 2, MAX_VERIFY_BLOCK)!;
  const maxNew = intOption(values, 'max-new', 1, MAX_NEW)!;
  const precision = choice(values, 'precision', ['f32', 'bf16'] as const)!;
  const source = choice(values, 'draft-source', ['assistant', 'oracle'] as const)!;
  const position = choice(values, 'draft-position', ['hf', 'mlxcel'] as const)! as DraftConvention;
  const targetDir = requireString(values, 'target');
  // Every option is checked before a model is read: a typo must not cost a load and a classic run first.
  const oracle = mode === 'mtp' && source === 'oracle';
  if (values['oracle-mismatch'] !== undefined && !oracle)
    throw new Error('--oracle-mismatch applies to --mode mtp --draft-source oracle only');
  const wrong = new Set(intList(values, 'oracle-mismatch', { min: 0, max: maxNew - 1, count: maxNew }) ?? []);
  const ids = intList(values, 'tokens', { min: 0, max: MAX_VOCAB - 1, count: MAX_POSITIONS });
  if (ids && values.prompt !== undefined) throw new Error('give --tokens or --prompt, not both');
  if (values.chat && values.prompt === undefined) throw new Error('--chat wraps --prompt TEXT: give --prompt');
  if (!ids && typeof values.prompt !== 'string') throw new Error('give --tokens CSV or --prompt TEXT');
  return { out, mode, router, K, maxNew, precision, source, position, targetDir, wrong, ids };
}

/** The prompt, and the positions the run reaches checked against the model's limit, before any upload. */
function promptOf(
  a: GenerateArgs,
  values: Values,
  io: CommandIO,
  tok: TextCodec | undefined,
  label: string,
  vocab: number,
  maxPositions: number | null,
): number[] {
  const { ids, mode, K, maxNew } = a;
  let prompt: number[] = [];
  if (ids) prompt = ids;
  else if (!tok) throw new Error(`${label}: no tokenizer.json in the target folder; use --tokens`);
  else {
    if (values.chat === true) io.err(chatFormNote(tok));
    prompt = tok.encode(String(values.prompt), values.chat === true);
  }
  if (!prompt.length) throw new Error(`--prompt "${String(values.prompt)}" encodes to no tokens: give some text`);
  for (const t of prompt) if (t >= vocab) throw new Error(`token ${t} is outside the vocabulary (${vocab})`);
  const source = ids ? '--tokens' : '--prompt';
  // an MTP verify block may feed K - 1 drafted tokens past the last one emitted
  const drafted = mode === 'mtp' ? K - 1 : 0;
  checkPositions(
    prompt.length + maxNew + drafted,
    `${source} ${prompt.length} tokens + --max-new ${maxNew}${drafted ? ` + --block ${K} - 1` : ''}`,
    maxPositions,
    label,
  );
  return prompt;
}

/** What generationModels sizes and configures the engine for. */
function setup(a: GenerateArgs, values: Values, prompt: number[]) {
  return {
    promptLength: prompt.length,
    maxNew: a.maxNew,
    block: a.K,
    policy: String(values.policy),
    precision: a.precision,
    draftPosition: a.position,
    router: a.router,
  };
}

/** A Qwen3.5 target: MTP drafts with a split drafter folder given as --draft, else with the target's own mtp.* head. */
async function runQwen(a: GenerateArgs, values: Values, io: CommandIO): Promise<number> {
  const { targetDir, position, router, mode, source } = a;
  checkPolicyName('qwen3_5', String(values.policy)); // refuse a policy the family lacks before loading
  // the draft position convention is a Gemma 4 assistant's (its frozen position); a Qwen3.5 head has none
  if (position !== 'hf') throw new Error('--draft-position applies to Gemma 4 assistants, not to Qwen3.5 MTP heads');
  if (router) throw routerRefused(targetDir);
  let prompt: number[] = [];
  const q = await loadQwenTarget(targetDir, values.draft ? String(values.draft) : undefined, (ck, tok) => {
    prompt = promptOf(a, values, io, tok, ck.label, ck.description.vocab, ck.description.config.maxPositions);
  });
  try {
    // which head drafts (without one, generation's mtpDrafter() says why)
    if (mode === 'mtp' && source === 'assistant' && q.checkpoint.description.mtp)
      io.out(`MTP head: ${q.checkpoint.mtpHead}`);
    const selfTest = await exactnessBeforeVerdict(q.ctx, io);
    const g = generationModels(q.ctx, { family: 'qwen3_5', target: q.weights }, setup(a, values, prompt));
    try {
      await generateAndReport(a, io, g, prompt, selfTest, q.tokenizer, q.checkpoint.mtpHead);
    } finally {
      g.destroy();
    }
    return exitAfterSelfTest(selfTest, 0);
  } finally {
    q.close();
  }
}

/** A Gemma 4 target (dense, E-series or MoE), with its assistant as the drafter. */
async function runGemma(a: GenerateArgs, values: Values, io: CommandIO): Promise<number> {
  const { targetDir, router, mode, source } = a;
  if (mode === 'mtp' && source === 'assistant' && !values.draft)
    throw new Error('--mode mtp with --draft-source assistant needs --draft DIR');
  checkPolicyName('gemma4', String(values.policy));
  let prompt: number[] = [];
  const m = await loadModels(targetDir, values.draft ? String(values.draft) : undefined, (o) => {
    refuseRouterWithoutExperts(router, targetDir)(o.target);
    prompt = promptOf(
      a,
      values,
      io,
      o.tokenizer,
      o.target.label,
      o.target.description.vocab,
      o.target.description.config.maxPositions,
    );
  });
  try {
    const selfTest = await exactnessBeforeVerdict(m.ctx, io);
    const weights = { family: 'gemma4' as const, target: m.targetWeights, assistant: m.assistantWeights };
    const g = generationModels(m.ctx, weights, setup(a, values, prompt));
    await generateAndReport(a, io, g, prompt, selfTest, m.tokenizer);
    g.destroy();
    return exitAfterSelfTest(selfTest, 0);
  } finally {
    m.close();
  }
}

/** Generates, writes the JSON document and prints the run's figures. */
async function generateAndReport(
  a: GenerateArgs,
  io: CommandIO,
  g: GenerationModels,
  prompt: number[],
  selfTest: ExactnessSelfTestSummary,
  tokenizer?: TextCodec,
  mtpHead?: string,
): Promise<void> {
  const { mode, source, precision } = a;
  for (const t of prompt) if (t >= g.vocab) throw new Error(`token ${t} is outside the vocabulary (${g.vocab})`);
  const policy = g.policy;
  const result = await generateTokens(a, io, g, prompt);
  // a MoE target's router convention beside the policy: both decide the tokens
  const json = {
    ...result,
    policy: policy.name,
    precision,
    ...(g.router ? { router: g.router } : {}),
    text: tokenizer?.decode(result.tokens),
    exactnessSelfTest: selfTest,
  };
  // which MTP head drafted (Qwen3.5: the target's own mtp.* head or a split drafter folder)
  if (mtpHead && mode === 'mtp' && source === 'assistant') Object.assign(json, { mtpHead });
  await writeFile(a.out, generateJsonText(json));
  printResult(io, mode, result, json.text, selfTest);
}

/** Greedy generation in the mode asked for: classic, MTP with the assistant, or MTP with the oracle's drafts. */
async function generateTokens(
  a: GenerateArgs,
  io: CommandIO,
  g: GenerationModels,
  prompt: number[],
): Promise<GenerateResult> {
  const { mode, source, maxNew, K, wrong } = a;
  const opts = {
    maxNew,
    eosIds: g.eosIds,
    policy: g.policy,
    onProgress: (p: { done: number; total: number }) => io.err(`[${mode}] ${p.done}/${p.total}`),
  };
  let result: GenerateResult;
  if (mode === 'classic') result = await generateClassic(g.target, prompt, opts);
  else if (source === 'assistant') {
    const m = g.mtpDrafter();
    result = await generateMtp(g.target, m.source, prompt, K, { ...opts, draftPosition: m.position });
    m.done();
  } else {
    const { stream } = await classicWithOracleStream(g.target, prompt, { ...opts, onProgress: undefined }, K - 1);
    result = await generateMtp(
      g.target,
      oracleSource(stream, g.vocab, (i) => wrong.has(i)),
      prompt,
      K,
      opts,
    );
  }
  return result;
}

/** The run's figures: tokens and speed, MTP counters and first rejection, the text, the self-test's warning. */
function printResult(
  io: CommandIO,
  mode: 'classic' | 'mtp',
  result: GenerateResult,
  text: string | undefined,
  selfTest: ExactnessSelfTestSummary,
): void {
  io.out(
    `${mode}: ${result.tokens.length} tokens, sha256 ${result.sha256.slice(0, 16)}…, ${result.timings.tokensPerSecond.toFixed(1)} tok/s${pipelinesNote(result.timings)}`,
  );
  if (result.counters)
    io.out(
      `rounds ${result.counters.rounds}, drafted ${result.counters.drafted}, accepted ${result.counters.accepted} (${(100 * result.counters.acceptanceRate).toFixed(1)}%), histogram ${result.counters.acceptedHistogram.join(',')}`,
    );
  const rejected = result.rounds?.findIndex((r) => r.accepted < r.drafts.length) ?? -1;
  if (result.rounds && rejected >= 0) {
    const r = result.rounds[rejected];
    io.out(
      `first rejection: round ${rejected} at token ${r.at} (position ${r.pos}): drafted ${r.drafts.join(',')}, accepted ${r.accepted}, verify emitted ${roundEmitted(r).join(',')}`,
    );
  }
  if (text !== undefined) io.out(`text: ${text}`);
  if (selfTest.warning) io.out(`warning: ${selfTest.warning}`);
}

/** Which chat form --chat used: the folder's own template, or (none in the folder) Gemma 4's turn form. */
export function chatFormNote(tok: TextCodec): string {
  return tok.chatTemplate
    ? `chat prompt: rendered with the folder's ${tok.chatTemplate}`
    : "chat prompt: the folder has no chat template (chat_template.jinja, or tokenizer_config.json's chat_template); Gemma 4's turn form <bos><|turn>user\\n...<turn|>\\n<|turn>model\\n is used";
}

/**
 * What a decode's tokens per second include when it created GPU pipelines: their compiles, once per machine and
 * driver cache, which a first run pays inside its decode (GenerateTimings.decodePipelines).
 */
export function pipelinesNote(t: GenerateTimings): string {
  const p = t.decodePipelines;
  if (!p) return '';
  return ` (the decode created ${p.created} GPU pipelines in ${p.ms.toFixed(0)} ms, compiled once per machine and driver cache: ${p.tokensPerSecondWithout.toFixed(1)} tok/s without them)`;
}
