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

  it('the CLI on a machine with no Vulkan driver says what Node lacks: the driver and the provisioning script', async () => {
    const env = { ...process.env, VK_ICD_FILENAMES: '/nonexistent/icd.json', RINGSIDE_VERBOSE: '' };
    const err = await run('npm', ['run', '-s', 'cli', '--', 'info'], { env, timeout: 60_000 }).catch((e) => e);
    expect(err.code).toBe(1);
    expect(err.stdout).toBe('');
    // one message, nothing from Dawn before it (Dawn is not asked without a driver)
    expect(err.stderr).toMatch(/^error: No WebGPU adapter\. /);
    expect(err.stderr.trim().split('\n')).toHaveLength(1);
    expect(err.stderr).toMatch(
      /no Vulkan driver to use: VK_ICD_FILENAMES=\/nonexistent\/icd\.json names no ICD manifest that exists/,
    );
    expect(err.stderr).toMatch(/lavapipe/);
    expect(err.stderr).toMatch(/scripts\/provision-webgpu\.sh/);
    expect(err.stderr).toMatch(/--verbose/);
    expect(err.stderr).not.toMatch(/chrome:\/\/gpu|browser/i);
  });

  it('with --verbose the CLI lets Dawn try and shows its messages before the same advice', async () => {
    const env = { ...process.env, VK_ICD_FILENAMES: '/nonexistent/icd.json' };
    const err = await run('npm', ['run', '-s', 'cli', '--', 'info', '--verbose'], { env, timeout: 60_000 }).catch(
      (e) => e,
    );
    expect(err.code).toBe(1);
    const at = err.stderr.indexOf('error: No WebGPU adapter.');
    expect(at).toBeGreaterThan(0);
    expect(err.stderr.slice(0, at)).toMatch(/vkCreateInstance|Vulkan|\/nonexistent\/icd\.json/); // Dawn's own
    expect(err.stderr.slice(at)).toMatch(/scripts\/provision-webgpu\.sh.*Dawn's own messages are above/);
    expect(err.stderr).not.toMatch(/chrome:\/\/gpu/);
  });

  it('`cli info` prints valid JSON with adapter info, limits and features', async () => {
    const { stdout } = await run('npm', ['run', '-s', 'cli', '--', 'info'], { timeout: 60_000 });
    const report = JSON.parse(stdout);
    expect(typeof report.description).toBe('string');
    expect(report.limits.maxStorageBufferBindingSize).toBeGreaterThan(0);
    expect(report.features).toContain('shader-f16');
  });
});
