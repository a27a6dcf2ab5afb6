/**
 * A safetensors file with bytes after the last tensor's data is refused: the format
 * does not allow them (the reference implementation refuses a data section whose length is not the end of the last
 * tensor: MetadataIncompleteBuffer). Refused with the file, the expected data length and the actual one; every
 * checkpoint the project ships or tests with (the demo, test/fixtures, synth output) still opens,
 * through the Node byte source (the CLI) and the Blob one (the page).
 */
import { appendFile, cp, mkdtemp, readFile, rm } from 'node:fs/promises';
import { readdirSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { blobSource, bytesSource, type ByteSource } from '../../src/format/bytesource.ts';
import { openFamilyCheckpoint } from '../../src/format/open-target.ts';
import { readSafetensorsHeader } from '../../src/format/safetensors.ts';
import { writeSafetensors } from '../../src/format/safetensors-writer.ts';
import { nodeFileSource, nodeFolderSources } from '../../src/node/file-source.ts';
import { refusal } from '../support/refusal.ts';
import { DEMO, FIXTURES, GEMMA4_E_TINY, GEMMA4_MOE_TINY, TINY_A } from '../support/fixtures.ts';

const QWEN_TINY = path.resolve('test/fixtures/qwen-tiny');

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'ringside-trailing-'));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

/** One F32 tensor of two values, then `extra` bytes after its data. */
function withTrailing(extra: number): Uint8Array {
  const f = writeSafetensors([{ name: 'x', dtype: 'F32', shape: [2], data: new Uint8Array(8) }]);
  const out = new Uint8Array(f.byteLength + extra);
  out.set(f);
  return out;
}

describe('safetensors data section length', () => {
  it('bytes after the last tensor are refused with the expected and actual data lengths', async () => {
    const ok = withTrailing(0);
    const dataStart = ok.byteLength - 8;
    expect((await readSafetensorsHeader(bytesSource('model.safetensors', ok))).tensors).toHaveLength(1);
    expect(await refusal(readSafetensorsHeader(bytesSource('model.safetensors', withTrailing(3))))).toBe(
      `model.safetensors: 3 bytes after the last tensor's data: the tensors' data_offsets end at 8, so the data section after the ${dataStart}-byte header must be 8 bytes, but it is 11 (file of ${ok.byteLength + 3} bytes, expected ${ok.byteLength}); safetensors allows no trailing bytes`,
    );
  });

  it('a file with no tensors has an empty data section', async () => {
    const empty = writeSafetensors([]);
    expect((await readSafetensorsHeader(bytesSource('e.safetensors', empty))).tensors).toEqual([]);
    const padded = new Uint8Array(empty.byteLength + 1);
    padded.set(empty);
    expect(await refusal(readSafetensorsHeader(bytesSource('e.safetensors', padded)))).toMatch(
      /^e\.safetensors: 1 bytes after the last tensor's data: the tensors' data_offsets end at 0, /,
    );
  });

  it('a checkpoint on disk with bytes appended to its weights is refused, naming the folder and file', async () => {
    const dir = path.join(tmp, 'appended');
    await cp(path.join(TINY_A, 'target'), dir, { recursive: true });
    await appendFile(path.join(dir, 'model.safetensors'), new Uint8Array(100));
    const msg = await refusal(openFamilyCheckpoint(await nodeFolderSources(dir), 'appended'));
    expect(msg).toMatch(
      /^appended: model\.safetensors: 100 bytes after the last tensor's data: the tensors' data_offsets end at (\d+), so the data section after the \d+-byte header must be \1 bytes, but it is \d+ /,
    );
  });

  /** Every checkpoint folder (a config.json beside .safetensors weights) under `root`. */
  function checkpointDirs(root: string): string[] {
    const out: string[] = [];
    const walk = (d: string) => {
      const names = readdirSync(d);
      if (names.includes('config.json') && names.some((n) => n.endsWith('.safetensors'))) out.push(d);
      for (const n of names) if (statSync(path.join(d, n)).isDirectory()) walk(path.join(d, n));
    };
    walk(root);
    return out;
  }

  it('every shipped checkpoint still opens, through the Node and the Blob byte sources', async () => {
    const dirs = [DEMO, FIXTURES, GEMMA4_E_TINY, GEMMA4_MOE_TINY, QWEN_TINY].flatMap(checkpointDirs);
    expect(dirs.length).toBeGreaterThanOrEqual(9);
    for (const dir of dirs) {
      const nodeFiles = await nodeFolderSources(dir);
      const opened = await openFamilyCheckpoint(nodeFiles, path.basename(dir));
      expect(opened.checkpoint.tensors.size, dir).toBeGreaterThan(0);
      // the page's byte source: the dropped File's size is the file's size, as on disk
      const blobs: ByteSource[] = [];
      for (const f of nodeFiles) blobs.push(blobSource(f.name, new Blob([await readFile(path.join(dir, f.name))])));
      expect((await openFamilyCheckpoint(blobs, path.basename(dir))).checkpoint.digest, dir).toBe(
        opened.checkpoint.digest,
      );
    }
    // a single file through nodeFileSource, as the tests' helpers read goldens
    expect(
      (await readSafetensorsHeader(await nodeFileSource(path.join(QWEN_TINY, 'golden.safetensors')))).tensors.length,
    ).toBeGreaterThan(0);
  });
});
