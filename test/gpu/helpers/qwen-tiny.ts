import path from 'node:path';
import { openQwen35Checkpoint } from '../../../src/format/qwen3_5/index.ts';
import { nodeFolderSources } from '../../../src/node/file-source.ts';
import type { GpuContext } from '../../../src/gpu/device.ts';
import { type QwenGpuWeights, uploadQwenWeights } from '../../../src/model/qwen3_5/weights.ts';
import type { CheckpointInfo } from '../../../src/parity/report.ts';
import { qwenCheckpointInfo } from '../../../src/parity/summary.ts';

/**
 * The qwen-tiny fixture's target opened and uploaded, in the shape the probe and the trace take as their
 * environment (ProbeEnv, TraceEnv); the caller destroys `weights`.
 */
export async function qwenTinyEnv(
  ctx: GpuContext,
): Promise<{ ctx: GpuContext; weights: QwenGpuWeights; target: CheckpointInfo; platform: string }> {
  const dir = path.resolve(process.cwd(), 'test/fixtures/qwen-tiny/target');
  const ck = await openQwen35Checkpoint(await nodeFolderSources(dir), 'qwen-tiny');
  return {
    ctx,
    weights: await uploadQwenWeights(ctx.device, ck.description),
    target: qwenCheckpointInfo(ck),
    platform: 'test',
  };
}
