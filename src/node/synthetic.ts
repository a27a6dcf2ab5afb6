/**
 * Writes a synthetic Gemma 4 target + assistant (src/format/synthetic.ts) to disk, streaming: each file is
 * produced in 8 MB chunks, two buffers alternating so one chunk is computed while the previous is written.
 * Memory stays at ~16 MB whatever the checkpoint size.
 */
import { mkdir, open, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { ByteSource } from '../format/bytesource.ts';
import { type QwenSynthGeometry, syntheticQwen } from '../format/qwen3_5/synthetic.ts';
import { SyntheticFile, type SynthOptions } from '../format/synthetic-files.ts';
import { syntheticCheckpoint, type SynthGeometry } from '../format/synthetic.ts';
import type { ProgressFn } from '../util/cancel.ts';

const CHUNK = 8 << 20;

export interface WrittenFile {
  path: string;
  bytes: number;
}

export interface SynthWriteOptions extends SynthOptions {
  /** Replace our own files (config.json, model*.safetensors, index, tokenizer files) in a non-empty folder. */
  force?: boolean;
  onProgress?: ProgressFn;
}

/**
 * Writes `dir/target` and `dir/assistant` (when the geometry has one; a Qwen3.5 geometry has none, its MTP head
 * is inside the target); returns the files written.
 */
export async function writeSynthetic(
  dir: string,
  g: SynthGeometry | QwenSynthGeometry,
  opts: SynthWriteOptions = {},
): Promise<WrittenFile[]> {
  const pair =
    g.modelType === 'qwen3_5' ? { ...syntheticQwen(g, opts), assistant: null } : syntheticCheckpoint(g, opts);
  const roles: [string, ByteSource[]][] = [['target', pair.target]];
  if (pair.assistant) roles.push(['assistant', pair.assistant]);
  const total = roles.reduce((a, [, fs]) => a + fs.reduce((b, f) => b + f.size, 0), 0);
  const written: WrittenFile[] = [];
  let done = 0;
  for (const [role, files] of roles) {
    const sub = path.join(dir, role);
    await prepareFolder(sub, opts.force === true);
    for (const f of files) {
      const p = path.join(sub, f.name);
      await writeSource(f, p, (n) => {
        done += n;
        opts.onProgress?.({ phase: 'synth', done, total, detail: `${role}/${f.name}` });
      });
      written.push({ path: p, bytes: f.size });
    }
  }
  return written;
}

/** The files synth writes (a --force run replaces them): config, weights, index, a target's tokenizer files. */
const OURS =
  /^(config\.json|model(-\d{5}-of-\d{5})?\.safetensors|model\.safetensors\.index\.json|tokenizer\.json|tokenizer_config\.json|chat_template\.jinja)$/;

/** Creates the folder; refuses to mix with existing files (stale shards would change what opens) unless forced. */
async function prepareFolder(sub: string, force: boolean): Promise<void> {
  await mkdir(sub, { recursive: true });
  const existing = (await readdir(sub)).filter((n) => !n.startsWith('.'));
  if (existing.length === 0) return;
  const foreign = existing.filter((n) => !OURS.test(n));
  if (!force || foreign.length > 0) {
    throw new Error(
      `${sub} is not empty (${existing.slice(0, 5).join(', ')}${existing.length > 5 ? ', ...' : ''}); ` +
        (foreign.length > 0 ? 'use an empty folder' : 'use --force to replace the checkpoint files in it'),
    );
  }
  for (const n of existing) await rm(path.join(sub, n));
}

async function writeSource(src: ByteSource, filePath: string, progress: (n: number) => void): Promise<void> {
  const fh = await open(filePath, 'w');
  try {
    const bufs = [new Uint8Array(CHUNK), new Uint8Array(CHUNK)];
    let pending: Promise<unknown> = Promise.resolve();
    for (let off = 0, k = 0; off < src.size; off += CHUNK, k ^= 1) {
      const n = Math.min(CHUNK, src.size - off);
      let chunk: Uint8Array;
      if (src instanceof SyntheticFile) {
        chunk = bufs[k].subarray(0, n);
        src.readInto(off, chunk); // bufs[k] is free: the write that used it was awaited one step ago
      } else {
        chunk = await src.read(off, n);
      }
      await pending;
      pending = writeAll(fh, chunk, off).then(() => progress(n));
    }
    await pending;
  } finally {
    await fh.close();
  }
}

async function writeAll(fh: Awaited<ReturnType<typeof open>>, chunk: Uint8Array, position: number): Promise<void> {
  let done = 0;
  while (done < chunk.byteLength) {
    const { bytesWritten } = await fh.write(chunk, done, chunk.byteLength - done, position + done);
    done += bytesWritten;
  }
}
