/**
 * A Hugging Face hub cache built the way huggingface_hub writes one: each file's bytes in blobs/<sha256>, the
 * snapshot folder snapshots/<commit>/ made of relative symbolic links into blobs/, and refs/main naming the commit.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** Files of `dir` (recursively), as paths relative to it. */
function filesUnder(dir: string, sub = ''): string[] {
  return readdirSync(path.join(dir, sub)).flatMap((n) => {
    const rel = sub ? `${sub}/${n}` : n;
    return statSync(path.join(dir, rel)).isDirectory() ? filesUnder(dir, rel) : [rel];
  });
}

/**
 * A new cache folder holding model `id` (ORG/NAME) with the files of checkpoint folder `from`; returns the cache
 * folder and the snapshot folder.
 */
export function makeHubCache(id: string, from: string): { cache: string; snapshot: string; model: string } {
  const cache = mkdtempSync(path.join(tmpdir(), 'ringside-hub-'));
  const model = path.join(cache, `models--${id.replace('/', '--')}`);
  const commit = createHash('sha1').update(id).digest('hex');
  const snapshot = path.join(model, 'snapshots', commit);
  mkdirSync(path.join(model, 'blobs'), { recursive: true });
  mkdirSync(path.join(model, 'refs'));
  for (const rel of filesUnder(from)) {
    const bytes = readFileSync(path.join(from, rel));
    const blob = createHash('sha256').update(bytes).digest('hex');
    writeFileSync(path.join(model, 'blobs', blob), bytes);
    const link = path.join(snapshot, rel);
    mkdirSync(path.dirname(link), { recursive: true });
    symlinkSync(path.relative(path.dirname(link), path.join(model, 'blobs', blob)), link);
  }
  writeFileSync(path.join(model, 'refs', 'main'), commit);
  return { cache, snapshot, model };
}
