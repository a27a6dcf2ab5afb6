/**
 * WebGPU in Node through Dawn (npm `webgpu`). Installs the WebGPU globals (GPUBufferUsage, ...) and
 * returns the GPU object. Dawn keeps the process alive while references exist: call `release()`.
 */
import { create, globals } from 'webgpu';
import { createGpuContext, type DeviceOptions, type GpuContext } from '../gpu/device.ts';
import { GpuError, isGpuError } from '../gpu/errors.ts';
import { findVulkanDrivers, noVulkanDriverMessage, type VulkanDrivers } from './vulkan-drivers.ts';
import { cachedLavapipe, softwareAdapterLine, useLavapipe } from './software-adapter.ts';
import os from 'node:os';

/**
 * Verbose (CLI --verbose, or RINGSIDE_VERBOSE=1): Dawn is asked for an adapter even where no Vulkan driver
 * is installed, so that its own loader messages show. Otherwise such a machine gets only the CLI's message.
 */
let verbose = process.env.RINGSIDE_VERBOSE === '1';

export function setVerbose(v: boolean): void {
  verbose = v;
}

let gpu: GPU | undefined;

export function nodeGpu(): GPU {
  if (!gpu) {
    Object.assign(globalThis, globals);
    gpu = create([]) as GPU;
  }
  return gpu;
}

/**
 * The device for Node. Without an adapter the error names what Node lacks (on Linux: the Vulkan driver, its
 * ICD manifest, scripts/provision-webgpu.sh), not the browser's remedies. On Linux the Vulkan drivers are
 * looked for first. When none is configured (VK_ICD_FILENAMES and VK_DRIVER_FILES unset, no usable manifest in the
 * standard folders), or the configured ones give no adapter, the lavapipe that scripts/provision-webgpu.sh left in
 * the repository is taken (software-adapter.ts) and one line on stderr says so. Without it either, Dawn is not asked
 * (unless verbose), so that its loader errors do not precede the message. Dawn prints its messages to stderr itself;
 * src/cli/launch.mjs holds back its routine ones unless --verbose.
 */
export async function nodeGpuContext(opts: DeviceOptions = {}): Promise<GpuContext> {
  const drivers = process.platform === 'linux' ? findVulkanDrivers() : undefined;
  // a driver the user chose with VK_ICD_FILENAMES or VK_DRIVER_FILES is never replaced
  const lavapipe = drivers && !drivers.variable ? cachedLavapipe() : undefined;
  let software: string | undefined; // why the CLI took lavapipe by itself
  if (drivers && drivers.usable.length === 0) {
    if (lavapipe) {
      useLavapipe(lavapipe);
      software = 'no Vulkan driver is configured';
    } else if (!verbose) throw new GpuError('no-adapter', noVulkanDriverMessage(drivers, false), '');
  }
  const platform = `node ${process.version} ${os.platform()} ${os.arch()} (Dawn, npm webgpu)`;
  let ctx: GpuContext;
  try {
    ctx = await createGpuContext(nodeGpu(), { platform, ...opts });
  } catch (e) {
    if (!isGpuError(e) || e.kind !== 'no-adapter') throw e;
    if (!drivers || software || !lavapipe) throw new GpuError('no-adapter', noAdapterMessage(e.detail, drivers), '');
    // the configured drivers gave no adapter (Debian 12's own lavapipe is too old for Dawn): a new Dawn instance
    // reads the provisioned one
    useLavapipe(lavapipe);
    releaseNodeGpu();
    software = `the configured Vulkan driver(s) ${drivers.usable.join(', ')} gave no adapter`;
    try {
      ctx = await createGpuContext(nodeGpu(), { platform, ...opts });
    } catch (again) {
      if (!isGpuError(again) || again.kind !== 'no-adapter') throw again;
      throw new GpuError('no-adapter', noAdapterMessage(again.detail, drivers), '');
    }
  }
  if (software) process.stderr.write(`${softwareAdapterLine(ctx.report.description, lavapipe!, software)}\n`);
  return ctx;
}

function noAdapterMessage(detail: string, drivers: VulkanDrivers | undefined): string {
  return drivers
    ? noVulkanDriverMessage(drivers, true)
    : `${detail} Dawn (npm webgpu) found no usable ${process.platform === 'darwin' ? 'Metal' : 'GPU'} adapter: check the GPU and its driver.`;
}

export function releaseNodeGpu(): void {
  gpu = undefined;
}
