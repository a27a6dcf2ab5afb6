import { writeFile } from 'node:fs/promises';
import { nodeGpuContext } from '../node-gpu.ts';
import { uploadWeights } from '../../model/gpu-weights.ts';
import type { TargetDescription } from '../../format/model-description.ts';
import { runProbe } from '../../parity/probe.ts';
import { checkpointInfo, qwenCheckpointInfo } from '../../parity/summary.ts';
import { uploadQwenWeights } from '../../model/qwen3_5/weights.ts';
import { isQwenDir, openQwenTargetDir, qwenDrafterInfo } from '../qwen-target.ts';
import { openGemmaPair } from '../load-models.ts';
import type { ProbeEnv } from '../../parity/probe.ts';
import { choice, intList, intOption, outputFileOption, requireString } from '../args.ts';
import { checkPositions, MAX_POSITIONS } from '../bounds.ts';
import { defaultReportPath, ensureReportFolder } from '../report-path.ts';
import { defaultDrawLengths, QWEN_DRAW_LENGTHS } from '../../parity/draws.ts';
import type { Command } from '../command.ts';
import { checkPolicyName } from '../../model/policy-registry.ts';
import { MAX_VERIFY_BLOCK } from '../../model/target.ts';
import { EXACTNESS_FAILED_EXIT, exactnessBeforeVerdict, exitAfterSelfTest } from '../exactness.ts';

export const probe: Command = {
  name: 'probe',
  summary: `Run the block-versus-chain probe (mlxcel startup guard) print its summary and write a JSON report. Exit 0 equal, 3 diverges, ${EXACTNESS_FAILED_EXIT} when the exactness self-test run first (selftest --exactness) failed on this adapter.`,
  usage:
    'probe --target DIR|ORG/NAME [--draft DIR|ORG/NAME] [--block K] [--lengths CSV] [--prefill-chunk N] [--policy NAME] [--precision f32|bf16] [--no-localize] [--report FILE]',
  options: {
    target: {
      type: 'string',
      help: 'target checkpoint folder (MLX), or a Hub id in the local Hugging Face cache',
      checkpoint: 'target',
    },
    draft: {
      type: 'string',
      help: 'assistant checkpoint folder, or a split Qwen3.5 MTP drafter folder (checked for compatibility, recorded in provenance)',
      checkpoint: 'draft',
    },
    block: { type: 'string', help: 'block width K', default: '4' },
    lengths: { type: 'string', help: 'draw prompt lengths (default 8,8,8 and min(W+32,1536))' },
    policy: { type: 'string', help: 'numerics policy (see `policies`)', default: 'exact' },
    precision: { type: 'string', help: 'activation precision f32 | bf16', default: 'f32' },
    'prefill-chunk': { type: 'string', help: 'prefill chunk size (default: whole prompt up to 512)' },
    'no-localize': { type: 'boolean', help: 'skip failure localization' },
    report: { type: 'string', help: 'where to write the JSON report (default reports/probe-YYYYMMDD-HHMMSS.json)' },
  },
  async run({ values }, io) {
    const reportPath = outputFileOption(values, 'report') ?? defaultReportPath('probe');
    const block = intOption(values, 'block', 1, MAX_VERIFY_BLOCK)!;
    const precision = choice(values, 'precision', ['f32', 'bf16'] as const)!;
    const targetDir = requireString(values, 'target');
    const lengths = intList(values, 'lengths', { min: 1, max: MAX_POSITIONS, count: 1024 });
    const prefillChunk = intOption(values, 'prefill-chunk', 1, MAX_POSITIONS);
    checkPolicyName((await isQwenDir(targetDir)) ? 'qwen3_5' : 'gemma4', String(values.policy));
    // A Qwen3.5 target opens with its family's opener; the probe's draws are pseudo-random tokens, so a split
    // MTP drafter given as --draft is only checked against the target and recorded, as Gemma's assistant is.
    const draftDir = values.draft ? String(values.draft) : undefined;
    const qwen = (await isQwenDir(targetDir)) ? await openQwenTargetDir(targetDir, draftDir) : undefined;
    const { target, assistant } = qwen ? {} : await openGemmaPair(targetDir, draftDir);
    // the draws' positions against the model's own limit, before any upload (runProbe takes the same defaults)
    const desc = qwen ? qwen.description : (target!.description as TargetDescription);
    const drawn = lengths ?? ('window' in desc ? defaultDrawLengths(desc.window) : [...QWEN_DRAW_LENGTHS]);
    const longest = Math.max(...drawn);
    checkPositions(
      longest + block,
      `${lengths ? `--lengths ${longest}` : `the longest default draw (${longest})`} + --block ${block}`,
      desc.config.maxPositions,
      qwen ? qwen.label : target!.label,
    );
    const ctx = await nodeGpuContext();
    const exactnessSelfTest = await exactnessBeforeVerdict(ctx, io);
    const weights: ProbeEnv['weights'] = qwen
      ? await uploadQwenWeights(ctx.device, qwen.description)
      : await uploadWeights(ctx.device, target!.description as TargetDescription);
    const report = await runProbe(
      {
        ctx,
        weights,
        target: qwen ? qwenCheckpointInfo(qwen) : checkpointInfo(target!),
        assistant: qwen ? qwenDrafterInfo(qwen) : assistant ? checkpointInfo(assistant) : undefined,
        platform: ctx.report.platform,
        onProgress: (p) => io.err(`[probe] ${p.detail ?? p.phase}`),
        exactnessSelfTest,
      },
      {
        block,
        precision,
        policy: String(values.policy),
        lengths,
        prefillChunk,
        localize: !values['no-localize'],
      },
    );
    ensureReportFolder(reportPath);
    await writeFile(reportPath, JSON.stringify(report, null, 1));
    io.out(report.summary);
    for (const d of report.draws) {
      io.out(
        `  draw ${d.index} (prompt ${d.promptLength}): ${d.text}${d.firstDivergence ? `; ${d.firstDivergence.text}` : ''}`,
      );
      if (d.firstDivergence?.cause) io.out(`    ${d.firstDivergence.cause}`);
    }
    io.out(report.consequence);
    if (exactnessSelfTest.warning) io.out(`warning: ${exactnessSelfTest.warning}`);
    io.out(`report written to ${reportPath}`);
    weights.destroy();
    ctx.destroy();
    return exitAfterSelfTest(exactnessSelfTest, report.verdict === 'equal' ? 0 : 3);
  },
};
