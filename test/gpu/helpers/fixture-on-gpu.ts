/**
 * A family fixture's target and assistant uploaded to a test GPU, with its goldens: the set-up of the GPU tests
 * that run a fixture's models (gemma4-e-assistant, gemma4-e-centroid-fill, gemma4-e-mtp, gemma4-moe-mtp).
 * `destroy` frees the weights and the device; models built on them are the test's to destroy first.
 */
import path from 'node:path';
import type { AssistantDescription, TargetDescription } from '../../../src/format/model-description.ts';
import type { GpuContext } from '../../../src/gpu/device.ts';
import { uploadWeights, type GpuWeights } from '../../../src/model/gpu-weights.ts';
import { openCheckpointDir } from '../../../src/node/file-source.ts';
import { loadGolden, type Golden } from '../../support/fixtures.ts';
import { testGpu } from '../gpu-context.ts';

export interface FixtureOnGpu {
  ctx: GpuContext;
  golden: Golden;
  tw: GpuWeights<TargetDescription>;
  aw: GpuWeights<AssistantDescription>;
  destroy(): void;
}

/** Uploads `dir`/target and `dir`/assistant (a fixture folder with goldens) to a fresh test GPU. */
export async function fixtureOnGpu(dir: string): Promise<FixtureOnGpu> {
  const ctx = await testGpu();
  let tw: GpuWeights<TargetDescription> | undefined;
  try {
    const golden = await loadGolden(dir);
    const t = await openCheckpointDir(path.join(dir, 'target'));
    const a = await openCheckpointDir(path.join(dir, 'assistant'));
    tw = await uploadWeights(ctx.device, t.description as TargetDescription);
    const aw = await uploadWeights(ctx.device, a.description as AssistantDescription);
    return fixture(ctx, golden, tw, aw);
  } catch (e) {
    // the test's afterAll sees no fixture: free what was made before the failure here
    tw?.destroy();
    ctx.destroy();
    throw e;
  }
}

function fixture(
  ctx: GpuContext,
  golden: Golden,
  tw: GpuWeights<TargetDescription>,
  aw: GpuWeights<AssistantDescription>,
): FixtureOnGpu {
  return {
    ctx,
    golden,
    tw,
    aw,
    destroy() {
      aw.destroy();
      tw.destroy();
      ctx.destroy();
    },
  };
}
