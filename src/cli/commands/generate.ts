import { writeFile } from 'node:fs/promises';
import { loadModels } from '../load-models.ts';
import { TargetModel } from '../../model/target.ts';
import { AssistantModel, type DraftConvention } from '../../model/assistant.ts';
import {
  assistantSource,
  generateClassic,
  generateMtp,
  oracleSource,
  roundEmitted,
  type GenerateResult,
} from '../../model/generate.ts';
import { policyByName } from '../../model/policy.ts';
import { choice, intList, intOption, requireString } from '../args.ts';
import type { Command } from '../command.ts';

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
  summary: 'Greedy generation, classic (chain decode) or MTP (draft, verify, accept, roll back), with counters.',
  usage:
    'generate --target DIR [--draft DIR] (--tokens CSV | --prompt TEXT [--chat]) --max-new N --mode classic|mtp [--block K] [--policy NAME] [--draft-source assistant|oracle] [--draft-position hf|mlxcel] [--oracle-mismatch CSV] [--precision f32|bf16] --json FILE',
  options: {
    target: { type: 'string', help: 'target checkpoint folder' },
    draft: { type: 'string', help: 'assistant checkpoint folder (mode mtp with --draft-source assistant)' },
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
    'oracle-mismatch': { type: 'string', help: 'emitted-token indices whose draft the oracle gets wrong', default: '' },
    json: { type: 'string', help: 'where to write the JSON result' },
  },
  async run({ values }, io) {
    const out = requireString(values, 'json');
    const mode = choice(values, 'mode', ['classic', 'mtp'] as const)!;
    const K = intOption(values, 'block', 2, 16)!;
    const maxNew = intOption(values, 'max-new', 1, 100_000)!;
    const precision = choice(values, 'precision', ['f32', 'bf16'] as const)!;
    const source = choice(values, 'draft-source', ['assistant', 'oracle'] as const)!;
    const position = choice(values, 'draft-position', ['hf', 'mlxcel'] as const)! as DraftConvention;
    const policy = policyByName(String(values.policy));
    if (mode === 'mtp' && source === 'assistant' && !values.draft)
      throw new Error('--mode mtp with --draft-source assistant needs --draft DIR');
    const m = await loadModels(requireString(values, 'target'), values.draft ? String(values.draft) : undefined);
    try {
      let prompt = intList(values, 'tokens');
      if (!prompt) {
        if (typeof values.prompt !== 'string') throw new Error('give --tokens CSV or --prompt TEXT');
        if (!m.tokenizer) throw new Error(`${m.target.label}: no tokenizer.json in the target folder; use --tokens`);
        prompt = m.tokenizer.encode(values.prompt, values.chat === true);
      }
      const desc = m.targetWeights.desc;
      for (const t of prompt)
        if (t >= desc.vocab) throw new Error(`token ${t} is outside the vocabulary (${desc.vocab})`);
      const target = new TargetModel(m.ctx, m.targetWeights, {
        maxContext: prompt.length + maxNew + K,
        maxBlock: K,
        prefillChunk: Math.min(prompt.length, 512),
        precision,
      });
      const opts = {
        maxNew,
        eosIds: desc.eosIds,
        policy,
        onProgress: (p: { done: number; total: number }) => io.err(`[${mode}] ${p.done}/${p.total}`),
      };
      let result: GenerateResult;
      if (mode === 'classic') result = await generateClassic(target, prompt, opts);
      else if (source === 'assistant') {
        const asst = new AssistantModel(m.ctx, m.assistantWeights!, target, position, precision);
        result = await generateMtp(target, assistantSource(asst), prompt, K, { ...opts, draftPosition: position });
        asst.destroy();
      } else {
        const stream = (await generateClassic(target, prompt, { ...opts, onProgress: undefined })).tokens;
        const wrong = new Set(intList(values, 'oracle-mismatch') ?? []);
        result = await generateMtp(
          target,
          oracleSource(stream, desc.vocab, (i) => wrong.has(i)),
          prompt,
          K,
          opts,
        );
      }
      const json = { ...result, policy: policy.name, precision, text: m.tokenizer?.decode(result.tokens) };
      await writeFile(out, generateJsonText(json));
      io.out(
        `${mode}: ${result.tokens.length} tokens, sha256 ${result.sha256.slice(0, 16)}…, ${result.timings.tokensPerSecond.toFixed(1)} tok/s`,
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
      if (json.text !== undefined) io.out(`text: ${json.text}`);
      target.destroy();
      return 0;
    } finally {
      m.close();
    }
  },
};
