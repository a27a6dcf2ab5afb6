/** Shared by GPU tests: one Dawn device per test file. */
import { nodeGpuContext } from '../../src/cli/node-gpu.ts';
import type { GpuContext } from '../../src/gpu/device.ts';

export async function testGpu(): Promise<GpuContext> {
  if (!process.env.VK_ICD_FILENAMES && process.platform === 'linux') {
    throw new Error('GPU tests need a Vulkan adapter: run them with `npm test` (scripts/test.sh provisions lavapipe).');
  }
  return nodeGpuContext();
}
