import { writeFile } from 'node:fs/promises';
import { loadModels } from '../load-models.ts';
import type { DraftConvention } from '../../model/gemma4/assistant.ts';
import { generateClassic, generateMtp } from '../../model/generate.ts';
import { generationModels } from '../../model/generation-setup.ts';
import { checkPolicyName } from '../../model/policy-registry.ts';
import { isQwenDir } from '../qwen-target.ts';
import { refuseRouterWithoutExperts, ROUTER_OPTION, routerOption } from '../router-option.ts';
import { diffGenerations } from '../../parity/generation-diff.ts';
import { choice, intOption, jsonFileOption, requireOutputFile, requireString } from '../args.ts';
import type { Command } from '../command.ts';
import { chatFormNote } from './generate.ts';
import { checkPositions, MAX_NEW } from '../bounds.ts';
import { MAX_VERIFY_BLOCK } from '../../model/target.ts';
import { EXACTNESS_FAILED_EXIT, exactnessBeforeVerdict, exitAfterSelfTest } from '../exactness.ts';

export const compare: Command = {
  name: 'compare',
  summary: `Free-generation comparison: for N prompts, classic vs MTP greedy output (identical, or the first differing token). Exit 0 all identical, 3 one differs, ${EXACTNESS_FAILED_EXIT} when the exactness self-test run first failed on this adapter.`,
  usage:
    'compare --target DIR|ORG/NAME --draft DIR|ORG/NAME --prompts FILE.json [--chat] [--max-new N] [--block K] [--policy NAME] [--draft-position hf|mlxcel] [--precision f32|bf16] [--router mlx|transformers] --json FILE',
  options: {
    target: {
      type: 'string',
      help: 'target checkpoint folder, or a Hub id in the local Hugging Face cache',
      checkpoint: 'target',
    },
    draft: { type: 'string', help: 'assistant checkpoint folder, or a Hub id', checkpoint: 'draft' },
    prompts: { type: 'string', help: 'JSON array of prompts: token-id arrays, or strings (needs tokenizer.json)' },
    chat: { type: 'boolean', help: 'wrap text prompts in the Gemma chat template' },
    'max-new': { type: 'string', help: 'tokens per generation', default: '64' },
    block: { type: 'string', help: 'MTP block width K', default: '4' },
    policy: { type: 'string', help: 'numerics policy (for both modes)', default: 'exact' },
    precision: { type: 'string', help: 'f32 | bf16', default: 'f32' },
    'draft-position': { type: 'string', help: 'hf | mlxcel', default: 'hf' },
    router: ROUTER_OPTION,
    json: { type: 'string', help: 'where to write the JSON result' },
  },
  async run({ values }, io) {
    // every option is checked before the models are read
    const out = requireOutputFile(values, 'json');
    requireString(values, 'prompts');
    const K = intOption(values, 'block', 2, MAX_VERIFY_BLOCK)!;
    const maxNew = intOption(values, 'max-new', 1, MAX_NEW)!;
    const precision = choice(values, 'precision', ['f32', 'bf16'] as const)!;
    const position = choice(values, 'draft-position', ['hf', 'mlxcel'] as const)! as DraftConvention;
    const policyName = String(values.policy);
    const router = routerOption(values);
    checkPolicyName('gemma4', policyName);
    const raw = await jsonFileOption(values, 'prompts');
    if (!Array.isArray(raw) || !raw.length)
      throw new Error(`--prompts ${values.prompts}: must be a non-empty JSON array of prompts`);
    const targetDir = requireString(values, 'target');
    if (await isQwenDir(targetDir))
      throw new Error(
        `${targetDir}: compare runs Gemma 4 targets with their assistant; for a Qwen3.5 target compare \`generate --mode classic\` with \`generate --mode mtp\` (same --tokens or --prompt): their JSON carries both SHA-256s`,
      );
    // the prompts tokenized and their positions checked against the target's limit before any upload
    let prompts: number[][] = [];
    const m = await loadModels(targetDir, requireString(values, 'draft'), ({ target, tokenizer }) => {
      refuseRouterWithoutExperts(router, targetDir)(target);
      const vocab = target.description.vocab;
      if (values.chat === true && tokenizer) io.err(chatFormNote(tokenizer));
      prompts = raw.map((p, i) => {
        let ids: number[];
        if (typeof p === 'string') {
          if (!tokenizer) throw new Error(`prompt ${i} is text but ${target.label} has no tokenizer.json`);
          ids = tokenizer.encode(p, values.chat === true);
        } else if (!Array.isArray(p) || p.some((t) => !Number.isInteger(t) || t < 0 || t >= vocab))
          throw new Error(`prompt ${i}: not a list of token ids below ${vocab}`);
        else ids = p as number[];
        if (!ids.length) throw new Error(`prompt ${i} has no tokens: every prompt needs at least one`);
        // an MTP verify block may feed K - 1 drafted tokens past the last one emitted
        checkPositions(
          ids.length + maxNew + K - 1,
          `prompt ${i} (${ids.length} tokens) + --max-new ${maxNew} + --block ${K} - 1`,
          target.description.config.maxPositions,
          target.label,
        );
        return ids;
      });
    });
    try {
      const selfTest = await exactnessBeforeVerdict(m.ctx, io);
      const weights = { family: 'gemma4' as const, target: m.targetWeights, assistant: m.assistantWeights };
      const results = [];
      let policy = '';
      let routerRun: string | undefined;
      for (const [i, prompt] of prompts.entries()) {
        // the E-series and MoE targets run in their own engines: generationModels picks the one for this target
        const g = generationModels(m.ctx, weights, {
          promptLength: prompt.length,
          maxNew,
          block: K,
          policy: policyName,
          precision,
          draftPosition: position,
          router,
        });
        try {
          policy = g.policy.name;
          routerRun = g.router;
          const opts = { maxNew, eosIds: g.eosIds, policy: g.policy };
          const classic = await generateClassic(g.target, prompt, opts);
          const drafter = g.mtpDrafter();
          const mtp = await generateMtp(g.target, drafter.source, prompt, K, { ...opts, draftPosition: position });
          drafter.done();
          const diff = diffGenerations(classic, mtp);
          results.push({
            ...diff,
            classicText: m.tokenizer?.decode(classic.tokens),
            mtpText: m.tokenizer?.decode(mtp.tokens),
          });
          io.out(
            `prompt ${i}: ${diff.identical ? 'identical' : `first difference at token ${diff.firstDifference}`} (${mtp.tokens.length} tokens, acceptance ${(100 * mtp.counters!.acceptanceRate).toFixed(1)}%)`,
          );
        } finally {
          g.destroy();
        }
      }
      const identical = results.filter((r) => r.identical).length;
      await writeFile(
        out,
        JSON.stringify(
          {
            kind: 'generation-comparison',
            block: K,
            policy,
            precision,
            draftPosition: position,
            // a MoE target's router convention (both modes run it)
            ...(routerRun ? { router: routerRun } : {}),
            identical,
            total: results.length,
            results,
            exactnessSelfTest: selfTest,
          },
          null,
          1,
        ),
      );
      io.out(`${identical} of ${results.length} prompts identical; written to ${out}`);
      if (selfTest.warning) io.out(`warning: ${selfTest.warning}`);
      return exitAfterSelfTest(selfTest, identical === results.length ? 0 : 3);
    } finally {
      m.close();
    }
  },
};
