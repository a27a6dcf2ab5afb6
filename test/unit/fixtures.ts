/**
 * Unit-test helpers: small in-memory checkpoint builders, and the golden tensors loaded eagerly.
 * Where the fixtures are and the error measures live in test/support/fixtures.ts (shared with GPU tests).
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { bytesSource, type ByteSource } from '../../src/format/bytesource.ts';
import { readSafetensorsHeader, readTensorBytes } from '../../src/format/safetensors.ts';
import { writeSafetensors, type TensorToWrite } from '../../src/format/safetensors-writer.ts';
import { TINY_A, loadGolden as loadGoldenLazy, maxAbsDiff } from '../support/fixtures.ts';

export { TINY_A };
export const maxAbs = maxAbsDiff;

/** A fixture folder's files (tiny-a unless `fixture` says which), as config + tensors to rebuild a checkpoint from. */
export async function fixtureFiles(
  which: 'target' | 'assistant',
  fixture = TINY_A,
): Promise<{ config: any; tensors: TensorToWrite[]; metadata?: Record<string, string> }> {
  const dir = path.join(fixture, which);
  const config = JSON.parse(await readFile(path.join(dir, 'config.json'), 'utf8'));
  const st = bytesSource('model.safetensors', new Uint8Array(await readFile(path.join(dir, 'model.safetensors'))));
  const h = await readSafetensorsHeader(st);
  const tensors: TensorToWrite[] = [];
  for (const t of h.tensors)
    tensors.push({ name: t.name, dtype: t.dtype, shape: t.shape, data: await readTensorBytes(t) });
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

/** Every golden tensor, loaded at once (the reference tests read most of them). */
export async function loadGolden(): Promise<{
  json: any;
  tensors: Map<string, { shape: readonly number[]; data: Float64Array }>;
}> {
  const golden = await loadGoldenLazy();
  const tensors = new Map<string, { shape: readonly number[]; data: Float64Array }>();
  for (const name of golden.names) tensors.set(name, await golden.tensor(name));
  return { json: golden.json, tensors };
}

export function maxAbsOf(a: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]));
  return m;
}
