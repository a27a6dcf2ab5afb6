/**
 * --target ORG/NAME (and --draft, --model) read a model from the local Hugging Face cache, never downloading it: the
 * cache folder as huggingface_hub chooses it, the snapshot refs/main names, files that are links into blobs/. The
 * cache here is built in the test from a fixture's files (test/support/hub-cache.ts).
 */
import { lstatSync, readlinkSync, renameSync, rmSync, unlinkSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkpointLabel, resolveCheckpointOption } from '../../src/cli/checkpoint-dir.ts';
import { hubCacheDir, looksLikeHubId, resolveHubId } from '../../src/cli/hub-cache.ts';
import { openGemmaDir } from '../../src/cli/load-models.ts';
import { openCheckpointDir } from '../../src/node/file-source.ts';
import { cliRun } from '../support/cli-run.ts';
import { GEMMA4_E_TINY } from '../support/fixtures.ts';
import { makeHubCache } from '../support/hub-cache.ts';

const FIXTURE = path.join(GEMMA4_E_TINY, 'target');

describe('the Hugging Face cache folder', () => {
  it('HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE, else HF_HOME/hub, else XDG_CACHE_HOME, else ~/.cache', () => {
    const home = { HOME: '/home/u' };
    expect(hubCacheDir(home)).toBe('/home/u/.cache/huggingface/hub');
    expect(hubCacheDir({ ...home, XDG_CACHE_HOME: '/x' })).toBe('/x/huggingface/hub');
    expect(hubCacheDir({ ...home, XDG_CACHE_HOME: '/x', HF_HOME: '~/hf' })).toBe('/home/u/hf/hub');
    expect(hubCacheDir({ ...home, HF_HOME: '/hf', HUGGINGFACE_HUB_CACHE: '/old' })).toBe('/old');
    expect(hubCacheDir({ ...home, HF_HOME: '/hf', HUGGINGFACE_HUB_CACHE: '/old', HF_HUB_CACHE: '/c' })).toBe('/c');
  });

  it('ORG/NAME reads as a Hub id; paths do not', () => {
    for (const id of ['mlx-community/gemma-4-E2B-it-4bit', 'google/gemma-4-31b-it', 'a/b.c_d'])
      expect(looksLikeHubId(id), id).toBe(true);
    for (const p of ['./x/y', '../x', '~/x', '/abs/path', 'x', 'a/b/c', 'a/-b', '.a/b', 'a--b/c', 'a/b..c'])
      expect(looksLikeHubId(p), p).toBe(false);
  });
});

describe('a model in a cache of symlinked blobs', () => {
  const id = 'test-org/tiny-e';
  const { cache, snapshot, model } = makeHubCache(id, FIXTURE);
  const env = { HF_HUB_CACHE: cache };

  it('resolves to the snapshot refs/main names, whose files are links', () => {
    expect(resolveHubId(id, '--target', env)).toBe(snapshot);
    expect(lstatSync(path.join(snapshot, 'config.json')).isSymbolicLink()).toBe(true);
    // an existing path wins over an id of the same spelling; a checkpoint option records the id as its label
    expect(resolveCheckpointOption('target', id, 'target', 'draft', env)).toBe(snapshot);
    expect(checkpointLabel(snapshot)).toBe(id);
  });

  it('opens through the links to the same checkpoint as the folder it was made from, labelled by its id', async () => {
    const dir = resolveCheckpointOption('target', id, 'target', 'draft', env);
    const viaHub = await openGemmaDir(dir, 'target');
    const direct = await openCheckpointDir(FIXTURE);
    expect(viaHub.label).toBe(id);
    expect(viaHub.digest).toBe(direct.digest);
    expect(viaHub.totalBytes).toBe(direct.totalBytes);
  });

  it('a missing id names the folder looked in; Ringside does not download', () => {
    expect(() => resolveHubId('nobody/nothing', '--draft', env)).toThrow(
      `--draft nobody/nothing: no such folder here, and not in the Hugging Face cache (no ${path.join(cache, 'models--nobody--nothing')}); Ringside never downloads (\`hf download nobody/nothing\` fetches it)`,
    );
  });

  it('a cache without refs/main, or whose refs/main names no snapshot, is refused naming the file', () => {
    const ref = path.join(model, 'refs', 'main');
    renameSync(ref, `${ref}.away`);
    try {
      expect(() => resolveHubId(id, '--target', env)).toThrow(
        `--target ${id}: ${ref} is missing (the cache holds no main branch of it; its snapshots: ${path.basename(snapshot)}; pass one of their folders under ${path.join(model, 'snapshots')})`,
      );
    } finally {
      renameSync(`${ref}.away`, ref);
    }
  });

  it('a link whose blob is gone (an interrupted download) is named', async () => {
    const broken = makeHubCache('test-org/broken', FIXTURE);
    const link = path.join(broken.snapshot, 'model.safetensors');
    const blob = path.resolve(path.dirname(link), readlinkSync(link));
    unlinkSync(blob);
    await expect(openGemmaDir(broken.snapshot, 'target')).rejects.toThrow(
      `${broken.snapshot}: model.safetensors is a link to`,
    );
    rmSync(broken.cache, { recursive: true });
  });

  it('the CLI takes the id and refuses, in one line, what a run past the model would need', async () => {
    // a refusal that comes after the checkpoint was opened: the id resolved and the files were read through the links
    const ok = await cliRun(['probe', '--target', id, '--lengths', '5000'], undefined, 120_000, env);
    expect(ok.code).toBe(1);
    expect(ok.out.trim()).toBe(
      `error: --lengths 5000 + --block 4 = 5004 positions, past the 4096 that ${id}/config.json declares (max_position_embeddings); Ringside refuses positions the model was not built for`,
    );
    const missing = await cliRun(['probe', '--target', 'nobody/nothing'], undefined, 120_000, env);
    expect(missing.code).toBe(1);
    expect(missing.out.trim()).toBe(
      `error: --target nobody/nothing: no such folder here, and not in the Hugging Face cache (no ${path.join(cache, 'models--nobody--nothing')}); Ringside never downloads (\`hf download nobody/nothing\` fetches it)`,
    );
  }, 120_000);
});
