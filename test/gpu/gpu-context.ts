/** Shared by GPU tests: one Dawn device per test file. */
import { nodeGpuContext } from '../../src/cli/node-gpu.ts';
import type { GpuContext } from '../../src/gpu/device.ts';

/**
 * RINGSIDE_ADAPTER names the adapter a run must be on (scripts/test.sh sets it for its lavapipe and
 * SwiftShader passes): a wrong or missing ICD then fails instead of silently testing another driver.
 */
const EXPECTED_ADAPTER: Record<string, RegExp> = {
  lavapipe: /llvmpipe|lavapipe/i,
  swiftshader: /swiftshader/i,
};

export async function testGpu(): Promise<GpuContext> {
  if (!process.env.VK_ICD_FILENAMES && process.platform === 'linux') {
    throw new Error('GPU tests need a Vulkan adapter: run them with `npm test` (scripts/test.sh provisions lavapipe).');
  }
  const want = process.env.RINGSIDE_ADAPTER;
  const pattern = want ? EXPECTED_ADAPTER[want] : undefined;
  if (want && !pattern) {
    throw new Error(`RINGSIDE_ADAPTER="${want}" is not one of: ${Object.keys(EXPECTED_ADAPTER).join(', ')}.`);
  }
  const ctx = await nodeGpuContext();
  const r = ctx.report;
  const name = `${r.description} / ${r.architecture} / ${r.device} / ${r.vendor}`;
  if (pattern && !pattern.test(name)) {
    ctx.destroy();
    throw new Error(
      `RINGSIDE_ADAPTER=${want} but Dawn gave the adapter "${name}" (VK_ICD_FILENAMES=${process.env.VK_ICD_FILENAMES ?? 'unset'}).`,
    );
  }
  return ctx;
}
