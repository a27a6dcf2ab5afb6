import { GpuError } from './errors.ts';

/**
 * Small helpers for creating, filling and reading GPU buffers. GPUBufferUsage / GPUMapMode are
 * globals in browsers and are installed by the `webgpu` package's globals in Node (src/cli/node-gpu.ts).
 */

export function storageBuffer(device: GPUDevice, byteSize: number, label: string): GPUBuffer {
  const U = GPUBufferUsage;
  return device.createBuffer({
    label,
    size: Math.max(16, align4(byteSize)),
    usage: U.STORAGE | U.COPY_SRC | U.COPY_DST,
  });
}

export function uniformBuffer(device: GPUDevice, data: ArrayBuffer | ArrayBufferView, label: string): GPUBuffer {
  const U = GPUBufferUsage;
  const bytes =
    data instanceof ArrayBuffer
      ? new Uint8Array(data)
      : new Uint8Array(data.buffer as ArrayBuffer, data.byteOffset, data.byteLength);
  const buf = device.createBuffer({
    label,
    size: Math.max(16, align16(bytes.byteLength)),
    usage: U.UNIFORM | U.COPY_DST,
  });
  device.queue.writeBuffer(buf, 0, bytes);
  return buf;
}

export function uploadBuffer(device: GPUDevice, data: ArrayBufferView, label: string): GPUBuffer {
  const buf = storageBuffer(device, data.byteLength, label);
  writeBytes(device, buf, 0, data);
  return buf;
}

/** writeBuffer needs a size that is a multiple of 4: pad the tail with zeros when it is not. */
export function writeBytes(device: GPUDevice, buf: GPUBuffer, offset: number, data: ArrayBufferView): void {
  const bytes = new Uint8Array(data.buffer as ArrayBuffer, data.byteOffset, data.byteLength);
  if (bytes.byteLength % 4 === 0) {
    device.queue.writeBuffer(buf, offset, bytes);
  } else {
    const padded = new Uint8Array(align4(bytes.byteLength));
    padded.set(bytes);
    device.queue.writeBuffer(buf, offset, padded);
  }
}

/** Copies `byteSize` bytes of `src` (from `offset`) back to the CPU. */
export async function readBytes(device: GPUDevice, src: GPUBuffer, byteSize: number, offset = 0): Promise<Uint8Array> {
  return (await readMany(device, [{ buffer: src, bytes: byteSize, offset }]))[0];
}

/**
 * Reads several buffers back with one copy submit and one map: a decode step needs its argmax ids,
 * logits and seed hidden state, and every extra map round trip costs latency.
 */
export async function readMany(
  device: GPUDevice,
  sources: { buffer: GPUBuffer; bytes: number; offset?: number }[],
): Promise<Uint8Array[]> {
  const offsets: number[] = [];
  let total = 0;
  for (const s of sources) {
    offsets.push(total);
    total += align4(s.bytes);
  }
  if (total === 0) return sources.map(() => new Uint8Array(0));
  const staging = device.createBuffer({
    label: 'readback',
    size: total,
    usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.MAP_READ,
  });
  // A copy WebGPU refuses (a source without COPY_SRC, a range past its end) must fail the read, not
  // hand back the staging buffer's zeros.
  device.pushErrorScope('validation');
  const enc = device.createCommandEncoder({ label: 'readback' });
  sources.forEach((s, i) => enc.copyBufferToBuffer(s.buffer, s.offset ?? 0, staging, offsets[i], align4(s.bytes)));
  device.queue.submit([enc.finish()]);
  const invalid = device.popErrorScope();
  try {
    await staging.mapAsync(GPUMapMode.READ);
  } catch (e) {
    staging.destroy();
    throw new GpuError('device-lost', `The GPU device was lost while reading results back (${(e as Error).message}).`);
  }
  const err = await invalid;
  if (err) {
    staging.unmap();
    staging.destroy();
    throw new GpuError('validation', `Reading results back failed: ${err.message}`);
  }
  const all = new Uint8Array(staging.getMappedRange().slice(0));
  staging.unmap();
  staging.destroy();
  return sources.map((s, i) => all.subarray(offsets[i], offsets[i] + s.bytes));
}

export async function readF32(device: GPUDevice, src: GPUBuffer, count: number, offset = 0): Promise<Float32Array> {
  const b = await readBytes(device, src, count * 4, offset);
  return new Float32Array(b.buffer, b.byteOffset, count);
}

export async function readU32(device: GPUDevice, src: GPUBuffer, count: number, offset = 0): Promise<Uint32Array> {
  const b = await readBytes(device, src, count * 4, offset);
  return new Uint32Array(b.buffer, b.byteOffset, count);
}

export const align4 = (n: number) => Math.ceil(n / 4) * 4;
export const align16 = (n: number) => Math.ceil(n / 16) * 16;
