import { writeFile } from 'node:fs/promises';
import { loadModels } from '../load-models.ts';
import { runTrace } from '../../parity/trace.ts';
import { checkpointInfo, qwenCheckpointInfo } from '../../parity/summary.ts';
import { isQwenDir, loadQwenTarget } from '../qwen-target.ts';
import { choice, intOption, jsonFileOption, outputFileOption, requireString } from '../args.ts';
import { checkPositions, MAX_POSITIONS } from '../bounds.ts';
import { defaultReportPath, ensureReportFolder } from '../report-path.ts';
import type { Command } from '../command.ts';
import { checkPolicyName } from '../../model/family-policies.ts';

export const trace: Command = {
  name: 'trace',
  summary:
    'Teacher-forced trace: chain vs block logits over traced positions after an untraced prefix (summary, and a JSON report).',
  usage:
    'trace --target DIR|ORG/NAME [--prefix 1536] [--traced 256] [--block K] [--policy NAME] [--precision f32|bf16] [--stream FILE.json] [--report FILE]',
  options: {
    target: {
      type: 'string',
      help: 'target checkpoint folder, or a Hub id in the local Hugging Face cache',
      checkpoint: 'target',
    },
    prefix: { type: 'string', help: 'untraced context tokens', default: '1536' },
    traced: { type: 'string', help: 'traced positions', default: '256' },
    block: { type: 'string', help: 'block width K', default: '4' },
    policy: { type: 'string', help: 'numerics policy', default: 'exact' },
    precision: { type: 'string', help: 'f32 | bf16', default: 'f32' },
    stream: { type: 'string', help: 'JSON array of token ids (default: a deterministic pseudo-random stream)' },
    report: { type: 'string', help: 'where to write the JSON report (default reports/trace-YYYYMMDD-HHMMSS.json)' },
  },
  async run({ values }, io) {
    const out = outputFileOption(values, 'report') ?? defaultReportPath('trace');
    const dir = requireString(values, 'target');
    // read before the weights are uploaded: a file that is missing or not JSON is refused without that wait
    const stream = (await jsonFileOption(values, 'stream')) as number[] | undefined;
    // every option is checked before the models are read
    const opts = {
      prefix: intOption(values, 'prefix', 1, MAX_POSITIONS)!,
      traced: intOption(values, 'traced', 1, MAX_POSITIONS)!,
      block: intOption(values, 'block', 1, 16)!,
      policy: String(values.policy),
      precision: choice(values, 'precision', ['f32', 'bf16'] as const)!,
      stream,
    };
    checkPolicyName((await isQwenDir(dir)) ? 'qwen3_5' : 'gemma4', opts.policy);
    // the positions fed (the prefix, then the traced tokens) against the model's limit, before any upload
    const positions = (label: string, maxPositions: number | null) =>
      checkPositions(
        opts.prefix + opts.traced,
        `--prefix ${opts.prefix} + --traced ${opts.traced}`,
        maxPositions,
        label,
      );
    if (opts.prefix + opts.traced > MAX_POSITIONS)
      throw new Error(
        `--prefix ${opts.prefix} + --traced ${opts.traced} = ${opts.prefix + opts.traced} positions, more than the ${MAX_POSITIONS} any command takes`,
      );
    // A Qwen3.5 folder opens with its family's loader (the trace needs the target only).
    const q = (await isQwenDir(dir))
      ? await loadQwenTarget(dir, undefined, (ck) => positions(ck.label, ck.description.config.maxPositions))
      : undefined;
    const m = q
      ? { ctx: q.ctx, targetWeights: q.weights, info: qwenCheckpointInfo(q.checkpoint), close: () => q.close() }
      : await loadModels(dir, undefined, (o) =>
          positions(o.target.label, o.target.description.config.maxPositions),
        ).then((g) => ({
          ctx: g.ctx,
          targetWeights: g.targetWeights,
          info: checkpointInfo(g.target),
          close: () => g.close(),
        }));
    try {
      if (
        stream &&
        (!Array.isArray(stream) || stream.some((t) => !Number.isInteger(t) || t < 0 || t >= m.targetWeights.desc.vocab))
      ) {
        throw new Error(
          `--stream ${values.stream}: must be a JSON array of token ids below the vocabulary size ${m.targetWeights.desc.vocab}`,
        );
      }
      const report = await runTrace(
        {
          ctx: m.ctx,
          weights: m.targetWeights,
          target: m.info,
          platform: m.ctx.report.platform,
          onProgress: (p) => io.err(`[trace] ${p.phase} ${p.done}/${p.total}`),
        },
        opts,
      );
      ensureReportFolder(out);
      await writeFile(out, JSON.stringify(report, null, 1));
      const x = report.metrics;
      io.out(report.summary);
      io.out(
        `top-1 disagreements ${x.top1Disagreements}/${x.positions}; decided (gap >= 2) ${x.decidedDisagreements}/${x.decidedPositions}; |delta logit| p50 ${x.deltaLogit.p50.toExponential(2)} p90 ${x.deltaLogit.p90.toExponential(2)} p99 ${x.deltaLogit.p99.toExponential(2)} max ${x.deltaLogit.max.toExponential(2)}; perplexity chain ${x.perplexity.chain.toPrecision(6)} block ${x.perplexity.block.toPrecision(6)}`,
      );
      io.out(`report written to ${out}`);
      // as probe: 0 when every block row equals the chain, 3 when one differs
      return report.verdict === 'equal' ? 0 : 3;
    } finally {
      m.close();
    }
  },
};
