import { writeFile } from 'node:fs/promises';
import { nodeGpuContext } from '../node-gpu.ts';
import { openGemmaDir } from '../load-models.ts';
import { uploadWeights } from '../../model/gpu-weights.ts';
import type { TargetDescription } from '../../format/model-description.ts';
import { isMoeTarget } from '../../model/gemma4/moe/moe-target.ts';
import { probeDraw } from '../../parity/draws.ts';
import { compareRouters, routerReportText } from '../../parity/router-compare.ts';
import { choice, intList, intOption, outputFileOption, requireString } from '../args.ts';
import type { Command } from '../command.ts';
import { checkPositions, MAX_POSITIONS, MAX_VOCAB } from '../bounds.ts';

export const routers: Command = {
  name: 'routers',
  summary:
    "Gemma 4 MoE: compare the router conventions (MLX's vs transformers' softmax order; bf16 vs exact router scalar) per layer.",
  usage:
    'routers --target DIR|ORG/NAME [--tokens CSV | --length N] [--order mlx|transformers] [--scale mlx-bf16|transformers] [--precision f32|bf16] [--prefill-chunk N] [--report FILE]',
  options: {
    target: {
      type: 'string',
      help: 'MoE target checkpoint folder (MLX, Gemma 4 26B-A4B layout), or a Hub id in the local Hugging Face cache',
      checkpoint: 'target',
    },
    tokens: { type: 'string', help: 'prompt token ids, comma-separated' },
    length: {
      type: 'string',
      help: 'without --tokens: the probe draw 0 prompt of this length ((7 i + 2) mod V)',
      default: '24',
    },
    order: {
      type: 'string',
      help: 'base softmax order, held fixed in the scalar comparison: mlx | transformers',
      default: 'mlx',
    },
    scale: {
      type: 'string',
      help: 'base router scalar, held fixed in the order comparison: mlx-bf16 (bf16(scale x H^-0.5)) | transformers',
      default: 'mlx-bf16',
    },
    precision: { type: 'string', help: 'activation precision f32 | bf16', default: 'f32' },
    'prefill-chunk': { type: 'string', help: 'prefill chunk size (default: whole prompt up to 512)' },
    report: { type: 'string', help: 'where to write the JSON report' },
  },
  async run({ values }, io) {
    const precision = choice(values, 'precision', ['f32', 'bf16'] as const)!;
    const order = choice(values, 'order', ['mlx', 'transformers'] as const)!;
    const scale = choice(values, 'scale', ['mlx-bf16', 'transformers'] as const)!;
    const reportPath = outputFileOption(values, 'report');
    const ids = intList(values, 'tokens', { min: 0, max: MAX_VOCAB - 1, count: MAX_POSITIONS });
    const length = intOption(values, 'length', 1, 4096)!;
    const prefillChunk = intOption(values, 'prefill-chunk', 1, MAX_POSITIONS);
    const ck = await openGemmaDir(requireString(values, 'target'), 'target');
    const desc = ck.description as TargetDescription;
    if (!isMoeTarget(desc))
      throw new Error(
        `${ck.label}: not a mixture-of-experts target (enable_moe_block is not set): no router to compare`,
      );
    for (const t of ids ?? [])
      if (t >= desc.vocab) throw new Error(`token ${t} is outside the vocabulary (${desc.vocab})`);
    const tokens = ids ?? probeDraw(0, length, 1, desc.vocab).prompt;
    checkPositions(
      tokens.length,
      ids ? `--tokens ${tokens.length} tokens` : `--length ${length}`,
      desc.config.maxPositions,
      ck.label,
    );
    const ctx = await nodeGpuContext();
    const weights = await uploadWeights(ctx.device, desc);
    try {
      const report = await compareRouters(
        ctx,
        weights,
        { tokens, precision, base: { order, scale }, prefillChunk },
        { label: ck.label, digest: ck.digest },
      );
      for (const line of routerReportText(report)) io.out(line);
      if (reportPath) {
        await writeFile(reportPath, JSON.stringify(report, null, 1));
        io.out(`report written to ${reportPath}`);
      }
      // The conventions are equal in exact arithmetic: differing expert sets under the two softmax orders are a finding.
      return report.order.totals.setsAgree === report.order.totals.rows ? 0 : 3;
    } finally {
      weights.destroy();
      ctx.destroy();
    }
  },
};
