/**
 * WebGPU in Node through Dawn (npm `webgpu`). Installs the WebGPU globals (GPUBufferUsage, ...) and
 * returns the GPU object. Dawn keeps the process alive while references exist: call `release()`.
 */
import { create, globals } from 'webgpu';
import { createGpuContext, type DeviceOptions, type GpuContext } from '../gpu/device.ts';
import { GpuError, isGpuError } from '../gpu/errors.ts';
import { findVulkanDrivers, noVulkanDriverMessage } from './vulkan-drivers.ts';
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
 * looked for first: with none, Dawn is not asked (unless verbose), so its loader errors do not precede the
 * message. Dawn prints its messages to stderr itself; once it is asked, they cannot be held back.
 */
export async function nodeGpuContext(opts: DeviceOptions = {}): Promise<GpuContext> {
  const drivers = process.platform === 'linux' ? findVulkanDrivers() : undefined;
  if (drivers && drivers.usable.length === 0 && !verbose) {
    throw new GpuError('no-adapter', noVulkanDriverMessage(drivers, false), '');
  }
  try {
    return await createGpuContext(nodeGpu(), {
      platform: `node ${process.version} ${os.platform()} ${os.arch()} (Dawn, npm webgpu)`,
      ...opts,
    });
  } catch (e) {
    if (!isGpuError(e) || e.kind !== 'no-adapter') throw e;
    const message = drivers
      ? noVulkanDriverMessage(drivers, true)
      : `${e.detail} Dawn (npm webgpu) found no usable ${process.platform === 'darwin' ? 'Metal' : 'GPU'} adapter: check the GPU and its driver.`;
    throw new GpuError('no-adapter', message, '');
  }
}

export function releaseNodeGpu(): void {
  gpu = undefined;
}
