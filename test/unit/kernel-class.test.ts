/**
 * Which kernel family a device runs (src/gpu/kernel-class.ts): software adapters the software family, GPUs the
 * GPU family unless their shader stages take fewer storage buffers than its matvec binds (WebGPU guarantees 8),
 * where creating its pipelines would fail.
 */
import { describe, expect, it } from 'vitest';
import { detectKernelClass, GPU_CLASS_STORAGE_BUFFERS } from '../../src/gpu/kernel-class.ts';
import { shaderSource } from '../../src/gpu/shaders.ts';

const gpu = { vendor: 'apple', architecture: 'metal-3', description: 'Apple M3 Max' };
const swiftshader = { vendor: 'google', description: 'SwiftShader driver 5.0.0' };

describe('kernel class', () => {
  it('follows the adapter, and a GPU whose stages take too few storage buffers gets the software family', () => {
    expect(detectKernelClass(gpu)).toBe('gpu');
    expect(detectKernelClass(gpu, { maxStorageBuffersPerShaderStage: 10 })).toBe('gpu');
    expect(detectKernelClass(gpu, { maxStorageBuffersPerShaderStage: GPU_CLASS_STORAGE_BUFFERS })).toBe('gpu');
    expect(detectKernelClass(gpu, { maxStorageBuffersPerShaderStage: 8 })).toBe('software');
    expect(detectKernelClass(swiftshader, { maxStorageBuffersPerShaderStage: 10 })).toBe('software');
  });

  it("counts the storage buffers of the GPU family's matvec (matmul_coop.wgsl `main` and `gate_up` bind all but one)", () => {
    const text = shaderSource('matmul_coop.wgsl');
    const declared = text.match(/var<storage\b/g)?.length;
    // the one more: gate_up_sums' xs_out, run only where the stage takes ten (ops.downSumsFused checks the limit)
    expect(declared).toBe(GPU_CLASS_STORAGE_BUFFERS + 1);
    expect(text).toMatch(/@binding\(12\) var<storage, read_write> xs_out/);
  });
});
