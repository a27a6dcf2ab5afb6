import { writeFile } from 'node:fs/promises';
import { loadModels } from '../load-models.ts';
import { runTrace } from '../../parity/trace.ts';
import { checkpointInfo, qwenCheckpointInfo } from '../../parity/summary.ts';
import { isQwenDir, loadQwenTarget } from '../qwen-target.ts';
import { choice, intOption, jsonFileOption, requireOutputFile, requireString } from '../args.ts';
import type { Command } from '../command.ts';
import { checkPolicyName } from '../../model/family-policies.ts';

export const trace: Command = {
  name: 'trace',
  summary: 'Teacher-forced trace: chain vs block logits over traced positions after an untraced prefix (JSON report).',
  usage:
    'trace --target DIR [--prefix 1536] [--traced 256] [--block K] [--policy NAME] [--precision f32|bf16] [--stream FILE.json] --report FILE',
  options: {
    target: { type: 'string', help: 'target checkpoint folder' },
    prefix: { type: 'string', help: 'untraced context tokens', default: '1536' },
    traced: { type: 'string', help: 'traced positions', default: '256' },
    block: { type: 'string', help: 'block width K', default: '4' },
    policy: { type: 'string', help: 'numerics policy', default: 'exact' },
    precision: { type: 'string', help: 'f32 | bf16', default: 'f32' },
    stream: { type: 'string', help: 'JSON array of token ids (default: a deterministic pseudo-random stream)' },
    report: { type: 'string', help: 'where to write the JSON report' },
  },
  async run({ values }, io) {
    const out = requireOutputFile(values, 'report');
    const dir = requireString(values, 'target');
    // read before the weights are uploaded: a file that is missing or not JSON is refused without that wait
    const stream = (await jsonFileOption(values, 'stream')) as number[] | undefined;
    // every option is checked before the models are read
    const opts = {
      prefix: intOption(values, 'prefix', 1)!,
      traced: intOption(values, 'traced', 1)!,
      block: intOption(values, 'block', 1, 16)!,
      policy: String(values.policy),
      precision: choice(values, 'precision', ['f32', 'bf16'] as const)!,
      stream,
    };
    checkPolicyName((await isQwenDir(dir)) ? 'qwen3_5' : 'gemma4', opts.policy);
    // A Qwen3.5 folder opens with its family's loader (the trace needs the target only).
    const q = (await isQwenDir(dir)) ? await loadQwenTarget(dir) : undefined;
    const m = q
      ? { ctx: q.ctx, targetWeights: q.weights, info: qwenCheckpointInfo(q.checkpoint), close: () => q.close() }
      : await loadModels(dir).then((g) => ({
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
