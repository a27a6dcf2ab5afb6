/** Node implementations of ByteSource (for the CLI and tests); the browser uses blobSource. */
import { open, readdir, readlink, stat, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type { ByteSource } from '../format/bytesource.ts';
import { checkRange } from '../format/bytesource.ts';
import { openCheckpoint, type Checkpoint } from '../format/checkpoint.ts';

/**
 * A ByteSource over a file on disk. Each read opens the file, reads exactly the requested range (never the
 * whole file) and closes it: reads are per tensor (kilobytes to hundreds of MB), so the open costs nothing
 * that matters, and no file handle outlives its read (no leaked descriptors, nothing to close).
 */
export async function nodeFileSource(filePath: string, name = path.basename(filePath)): Promise<ByteSource> {
  const { size } = await stat(filePath);
  return {
    name,
    size,
    async read(offset, length) {
      checkRange(name, size, offset, length);
      const fh: FileHandle = await open(filePath, 'r');
      try {
        const buf = new Uint8Array(length);
        let done = 0;
        while (done < length) {
          const { bytesRead } = await fh.read(buf, done, length - done, offset + done);
          if (bytesRead === 0) throw new Error(`${name}: unexpected end of file at byte ${offset + done}`);
          done += bytesRead;
        }
        return buf;
      } finally {
        await fh.close();
      }
    },
  };
}

/** ByteSources for every regular, non-hidden file in `dir` (recursively), named by their path relative to `dir`. */
export async function nodeFolderSources(dir: string): Promise<ByteSource[]> {
  // readdir's own "ENOENT: ... scandir" names neither what was expected nor that the path came from the user
  const kind = await stat(dir).then(
    (st) => (st.isDirectory() ? 'folder' : 'file'),
    () => 'none',
  );
  if (kind === 'none')
    throw new Error(`${dir}: no such folder (a checkpoint folder holds config.json and *.safetensors)`);
  if (kind === 'file')
    throw new Error(`${dir}: is a file; give the checkpoint's folder (config.json and *.safetensors)`);
  const out: ByteSource[] = [];
  const walk = async (sub: string): Promise<void> => {
    const entries = await readdir(path.join(dir, sub), { withFileTypes: true });
    entries.sort((a, b) => (a.name < b.name ? -1 : 1));
    for (const e of entries) {
      if (e.name.startsWith('.')) continue; // .DS_Store, .cache/ of hub downloads
      const rel = sub ? `${sub}/${e.name}` : e.name;
      if (e.isDirectory()) await walk(rel);
      else if (e.isFile()) out.push(await nodeFileSource(path.join(dir, rel), rel));
      else if (e.isSymbolicLink()) {
        // A Hugging Face cache snapshot holds links into its blobs/ folder: a link to a file is that file. Links to
        // folders are not followed (a link back up would never end).
        const full = path.join(dir, rel);
        const target = await stat(full).catch(() => undefined);
        if (!target)
          throw new Error(
            `${dir}: ${rel} is a link to ${await readlink(full)}, which does not exist (an interrupted download?)`,
          );
        if (target.isFile()) out.push(await nodeFileSource(full, rel));
      }
    }
  };
  await walk('');
  return out;
}

/** Opens the checkpoint in a folder on disk. */
export async function openCheckpointDir(dir: string, label = path.basename(dir)): Promise<Checkpoint> {
  return openCheckpoint(await nodeFolderSources(dir), label);
}
