import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createGpuContext } from '../../src/gpu/device.ts';
import { GpuError } from '../../src/gpu/errors.ts';

const run = promisify(execFile);

describe('GPU error paths', () => {
  it('no WebGPU at all -> GpuError no-webgpu with what to do', async () => {
    const err = await createGpuContext(undefined).catch((e) => e);
    expect(err).toBeInstanceOf(GpuError);
    expect(err.kind).toBe('no-webgpu');
    expect(err.message).toMatch(/navigator\.gpu is missing/);
    expect(err.message).toMatch(/Chrome|Safari/);
  });

  it('an adapter request that yields null -> GpuError no-adapter', async () => {
    const gpu = { requestAdapter: async () => null } as unknown as GPU;
    const err = await createGpuContext(gpu).catch((e) => e);
    expect(err).toBeInstanceOf(GpuError);
    expect(err.kind).toBe('no-adapter');
    expect(err.message).toMatch(/No WebGPU adapter was found/);
  });

  it('the CLI on a machine with no Vulkan driver fails with the no-adapter message, not a crash', async () => {
    const env = { ...process.env, VK_ICD_FILENAMES: '/nonexistent/icd.json' };
    const err = await run('npm', ['run', '-s', 'cli', '--', 'info'], { env, timeout: 60_000 }).catch((e) => e);
    expect(err.code).toBe(1);
    expect(err.stderr).toMatch(/error: No WebGPU adapter was found/);
    expect(err.stderr).toMatch(/Vulkan driver/);
  });

  it('`cli info` prints valid JSON with adapter info, limits and features', async () => {
    const { stdout } = await run('npm', ['run', '-s', 'cli', '--', 'info'], { timeout: 60_000 });
    const report = JSON.parse(stdout);
    expect(typeof report.description).toBe('string');
    expect(report.limits.maxStorageBufferBindingSize).toBeGreaterThan(0);
    expect(report.features).toContain('shader-f16');
  });
});
