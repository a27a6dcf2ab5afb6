import { writeFile } from 'node:fs/promises';
import { loadModels } from '../load-models.ts';
import { TargetModel } from '../../model/target.ts';
import { AssistantModel, type DraftConvention } from '../../model/assistant.ts';
import { assistantSource, generateClassic, generateMtp } from '../../model/generate.ts';
import { policyByName } from '../../model/policy.ts';
import { diffGenerations } from '../../parity/generation-diff.ts';
import { choice, intOption, jsonFileOption, requireString } from '../args.ts';
import type { Command } from '../command.ts';

export const compare: Command = {
  name: 'compare',
  summary:
    'Free-generation comparison: for N prompts, classic vs MTP greedy output (identical, or the first differing token).',
  usage:
    'compare --target DIR --draft DIR --prompts FILE.json [--max-new N] [--block K] [--policy NAME] [--draft-position hf|mlxcel] [--precision f32|bf16] --json FILE',
  options: {
    target: { type: 'string', help: 'target checkpoint folder' },
    draft: { type: 'string', help: 'assistant checkpoint folder' },
    prompts: { type: 'string', help: 'JSON array of prompts: token-id arrays, or strings (needs tokenizer.json)' },
    chat: { type: 'boolean', help: 'wrap text prompts in the Gemma chat template' },
    'max-new': { type: 'string', help: 'tokens per generation', default: '64' },
    block: { type: 'string', help: 'MTP block width K', default: '4' },
    policy: { type: 'string', help: 'numerics policy (for both modes)', default: 'exact' },
    precision: { type: 'string', help: 'f32 | bf16', default: 'f32' },
    'draft-position': { type: 'string', help: 'hf | mlxcel', default: 'hf' },
    json: { type: 'string', help: 'where to write the JSON result' },
  },
  async run({ values }, io) {
    const out = requireString(values, 'json');
    requireString(values, 'prompts');
    const raw = await jsonFileOption(values, 'prompts');
    if (!Array.isArray(raw) || !raw.length)
      throw new Error(`--prompts ${values.prompts}: must be a non-empty JSON array of prompts`);
    const m = await loadModels(requireString(values, 'target'), requireString(values, 'draft'));
    try {
      const K = intOption(values, 'block', 2, 16)!;
      const maxNew = intOption(values, 'max-new', 1)!;
      const precision = choice(values, 'precision', ['f32', 'bf16'] as const)!;
      const position = choice(values, 'draft-position', ['hf', 'mlxcel'] as const)! as DraftConvention;
      const policy = policyByName(String(values.policy));
      const prompts = raw.map((p, i) => {
        if (typeof p === 'string') {
          if (!m.tokenizer) throw new Error(`prompt ${i} is text but ${m.target.label} has no tokenizer.json`);
          return m.tokenizer.encode(p, values.chat === true);
        }
        if (!Array.isArray(p) || p.some((t) => !Number.isInteger(t) || t < 0 || t >= m.targetWeights.desc.vocab))
          throw new Error(`prompt ${i}: not a list of token ids below ${m.targetWeights.desc.vocab}`);
        return p as number[];
      });
      const results = [];
      for (const [i, prompt] of prompts.entries()) {
        const target = new TargetModel(m.ctx, m.targetWeights, {
          maxContext: prompt.length + maxNew + K,
          maxBlock: K,
          prefillChunk: Math.min(prompt.length, 512),
          precision,
        });
        const asst = new AssistantModel(m.ctx, m.assistantWeights!, target, position, precision);
        const opts = { maxNew, eosIds: m.targetWeights.desc.eosIds, policy };
        const classic = await generateClassic(target, prompt, opts);
        const mtp = await generateMtp(target, assistantSource(asst), prompt, K, { ...opts, draftPosition: position });
        const diff = diffGenerations(classic, mtp);
        results.push({
          ...diff,
          classicText: m.tokenizer?.decode(classic.tokens),
          mtpText: m.tokenizer?.decode(mtp.tokens),
        });
        io.out(
          `prompt ${i}: ${diff.identical ? 'identical' : `first difference at token ${diff.firstDifference}`} (${mtp.tokens.length} tokens, acceptance ${(100 * mtp.counters!.acceptanceRate).toFixed(1)}%)`,
        );
        asst.destroy();
        target.destroy();
      }
      const identical = results.filter((r) => r.identical).length;
      await writeFile(
        out,
        JSON.stringify(
          {
            kind: 'generation-comparison',
            block: K,
            policy: policy.name,
            precision,
            draftPosition: position,
            identical,
            total: results.length,
            results,
          },
          null,
          1,
        ),
      );
      io.out(`${identical} of ${results.length} prompts identical; written to ${out}`);
      return identical === results.length ? 0 : 3;
    } finally {
      m.close();
    }
  },
};
