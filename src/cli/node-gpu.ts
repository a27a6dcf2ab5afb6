/**
 * WebGPU in Node through Dawn (npm `webgpu`). Installs the WebGPU globals (GPUBufferUsage, ...) and
 * returns the GPU object. Dawn keeps the process alive while references exist: call `release()`.
 */
import { create, globals } from 'webgpu';
import { createGpuContext, type DeviceOptions, type GpuContext } from '../gpu/device.ts';
import os from 'node:os';

let gpu: GPU | undefined;

export function nodeGpu(): GPU {
  if (!gpu) {
    Object.assign(globalThis, globals);
    gpu = create([]) as GPU;
  }
  return gpu;
}

export async function nodeGpuContext(opts: DeviceOptions = {}): Promise<GpuContext> {
  return createGpuContext(nodeGpu(), {
    platform: `node ${process.version} ${os.platform()} ${os.arch()} (Dawn, npm webgpu)`,
    ...opts,
  });
}

export function releaseNodeGpu(): void {
  gpu = undefined;
}
