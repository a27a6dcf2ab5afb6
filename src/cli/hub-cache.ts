/**
 * A Hugging Face Hub model id (ORG/NAME) found in the local Hugging Face cache, where `hf download`, mlx-lm and
 * mlx-vlm put what they fetch. Ringside never downloads: it reads the snapshot already on disk.
 *
 * The cache layout (huggingface_hub's file_download.py): `<cache>/models--ORG--NAME/refs/main` holds the commit the
 * main branch pointed at when it was fetched, `snapshots/<commit>/` holds the model's files as symbolic links into
 * `blobs/` (one blob per file content, named by its hash).
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * The cache folder, chosen as huggingface_hub's constants.py chooses it: HF_HUB_CACHE, else the older
 * HUGGINGFACE_HUB_CACHE, else HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
 */
export function hubCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const home = env.HOME || os.homedir();
  const expand = (p: string) => (p === '~' || p.startsWith('~/') ? path.join(home, p.slice(1)) : p);
  if (env.HF_HUB_CACHE) return expand(env.HF_HUB_CACHE);
  if (env.HUGGINGFACE_HUB_CACHE) return expand(env.HUGGINGFACE_HUB_CACHE);
  if (env.HF_HOME) return path.join(expand(env.HF_HOME), 'hub');
  return path.join(env.XDG_CACHE_HOME ? expand(env.XDG_CACHE_HOME) : path.join(home, '.cache'), 'huggingface', 'hub');
}

/**
 * ORG/NAME as the Hub spells repository ids: two names of letters, digits, "-", "_" and ".", neither starting with
 * "-" or "." (so "./x", "../x" and "~/x" are paths, never ids).
 */
const HUB_ID = /^[A-Za-z0-9][\w.-]*\/[A-Za-z0-9][\w.-]*$/;

export function looksLikeHubId(s: string): boolean {
  return HUB_ID.test(s) && !s.includes('--') && !s.includes('..') && s.length <= 96 * 2 + 1;
}

/** The folder of model `id` in cache `cache` (models--ORG--NAME). */
export function hubModelFolder(id: string, cache: string): string {
  return path.join(cache, `models--${id.replace('/', '--')}`);
}

/**
 * The snapshot folder of model `id` that the cache's refs/main names, or an Error whose one line says which folder
 * was looked in and what was missing there. `option` is the option that named it ("--target").
 */
export function resolveHubId(id: string, option: string, env: NodeJS.ProcessEnv = process.env): string {
  const cache = hubCacheDir(env);
  const model = hubModelFolder(id, cache);
  const never = `Ringside never downloads (\`hf download ${id}\` fetches it)`;
  if (!isFolder(model))
    throw new Error(`${option} ${id}: no such folder here, and not in the Hugging Face cache (no ${model}); ${never}`);
  const ref = path.join(model, 'refs', 'main');
  let commit: string;
  try {
    commit = readFileSync(ref, 'utf8').trim();
  } catch {
    const have = snapshotsIn(model);
    throw new Error(
      `${option} ${id}: ${ref} is missing (the cache holds no main branch of it${have.length ? `; its snapshots: ${have.join(', ')}; pass one of their folders under ${path.join(model, 'snapshots')}` : ''})`,
    );
  }
  const snapshot = path.join(model, 'snapshots', commit);
  if (!/^[0-9a-f]{7,64}$/i.test(commit) || !isFolder(snapshot))
    throw new Error(
      `${option} ${id}: ${ref} names commit "${commit}", but there is no folder ${snapshot} (an interrupted download?); ${never}`,
    );
  return snapshot;
}

function isFolder(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

function snapshotsIn(model: string): string[] {
  try {
    return readdirSync(path.join(model, 'snapshots')).sort();
  } catch {
    return [];
  }
}
