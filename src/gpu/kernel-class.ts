/**
 * Which family of kernels an adapter runs. Software adapters (Mesa lavapipe, SwiftShader: a CPU
 * behind Vulkan) and hardware GPUs want opposite things from a kernel: on a CPU every load is a
 * scalar loop and a workgroup barrier is a context switch, so a matvec there wants few invocations
 * doing wide per-invocation work (matmul_lanes.wgsl); on a GPU a matvec is bound by memory bandwidth
 * and wants many lanes per output row with coalesced loads (matmul_coop.wgsl). The class is a
 * property of the device, fixed for a KernelCache's lifetime, so one adapter runs one pipeline per op
 * whatever the number of rows M is (the exactness contract).
 *
 * `forceKernelClass` (or RINGSIDE_KERNELS=gpu|software in Node) overrides the detection: the test
 * suite runs the GPU kernels on the software adapters so CI checks the path real GPUs take.
 */
export type KernelClass = 'software' | 'gpu';

const SOFTWARE = /llvmpipe|lavapipe|swiftshader|software|warp|cpu/i;

export interface AdapterIdentity {
  vendor?: string;
  architecture?: string;
  device?: string;
  description?: string;
  isFallbackAdapter?: boolean;
}

let forced: KernelClass | undefined = envKernelClass();

function envKernelClass(): KernelClass | undefined {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.RINGSIDE_KERNELS;
  if (env === undefined || env === '') return undefined;
  if (env === 'gpu' || env === 'software') return env;
  throw new Error(`RINGSIDE_KERNELS must be "gpu" or "software", not "${env}"`);
}

/** Forces a kernel class for devices created from now on (undefined: detect from the adapter). */
export function forceKernelClass(c: KernelClass | undefined): void {
  forced = c;
}

/** Whether the adapter is a CPU behind a GPU API (what it is, whatever kernels are forced). */
export function isSoftwareAdapter(info: AdapterIdentity | undefined): boolean {
  if (!info) return true;
  if (info.isFallbackAdapter) return true;
  const text = [info.vendor, info.architecture, info.device, info.description].filter(Boolean).join(' ');
  return SOFTWARE.test(text);
}

/**
 * Storage buffers per shader stage the GPU family binds at most: matmul_coop.wgsl's `main` and `gate_up` take
 * 9 (rmsnorm.wgsl `qkv_rows` and matmul_coop.wgsl `gate_up_sums`, 10, fall back to what they fuse by
 * themselves). WebGPU guarantees 8; the software family needs no more than that.
 */
export const GPU_CLASS_STORAGE_BUFFERS = 9;

/**
 * The family a device runs: forced, else 'software' on software adapters and on GPUs whose shader stages
 * take fewer storage buffers than the GPU family binds (its pipelines could not be made there; the software
 * family is exact too, only slower on a GPU), else 'gpu'.
 */
export function detectKernelClass(
  info: AdapterIdentity | undefined,
  limits?: { maxStorageBuffersPerShaderStage: number },
): KernelClass {
  if (forced) return forced;
  if (isSoftwareAdapter(info)) return 'software';
  if (limits && limits.maxStorageBuffersPerShaderStage < GPU_CLASS_STORAGE_BUFFERS) return 'software';
  return 'gpu';
}
