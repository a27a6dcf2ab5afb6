/** Shared helpers for unit tests: where the fixtures are, and small in-memory checkpoint builders. */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { bytesSource, type ByteSource } from '../../src/format/bytesource.ts';
import { readSafetensorsHeader, readTensorBytes, toFloat64 } from '../../src/format/safetensors.ts';
import { writeSafetensors, type TensorToWrite } from '../../src/format/safetensors-writer.ts';

export const SHARED = path.resolve(process.cwd(), '../shared');
export const TINY_A = path.join(SHARED, 'fixtures/tiny-a');

/** The fixture folder's files as in-memory ByteSources (config.json + model.safetensors). */
export async function fixtureFiles(which: 'target' | 'assistant'): Promise<{ config: any; tensors: TensorToWrite[]; metadata?: Record<string, string> }> {
  const dir = path.join(TINY_A, which);
  const config = JSON.parse(await readFile(path.join(dir, 'config.json'), 'utf8'));
  const st = bytesSource('model.safetensors', new Uint8Array(await readFile(path.join(dir, 'model.safetensors'))));
  const h = await readSafetensorsHeader(st);
  const tensors: TensorToWrite[] = [];
  for (const t of h.tensors) tensors.push({ name: t.name, dtype: t.dtype, shape: t.shape, data: await readTensorBytes(t) });
  return { config, tensors, metadata: h.metadata };
}

/** A checkpoint folder in memory: config.json + model.safetensors (+ extra files). */
export function memoryCheckpoint(config: unknown, tensors: TensorToWrite[], extra: ByteSource[] = []): ByteSource[] {
  return [
    bytesSource('config.json', new TextEncoder().encode(JSON.stringify(config))),
    bytesSource('model.safetensors', writeSafetensors(tensors, { format: 'mlx' })),
    ...extra,
  ];
}

export async function loadGolden(): Promise<{ json: any; tensors: Map<string, { shape: readonly number[]; data: Float64Array }> }> {
  const json = JSON.parse(await readFile(path.join(TINY_A, 'golden.json'), 'utf8'));
  const src = bytesSource('golden.safetensors', new Uint8Array(await readFile(path.join(TINY_A, 'golden.safetensors'))));
  const h = await readSafetensorsHeader(src);
  const tensors = new Map<string, { shape: readonly number[]; data: Float64Array }>();
  for (const t of h.tensors) tensors.set(t.name, { shape: t.shape, data: toFloat64(await readTensorBytes(t), t.dtype) });
  return { json, tensors };
}

export function maxAbs(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`length ${a.length} != ${b.length}`);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

export function maxAbsOf(a: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]));
  return m;
}
