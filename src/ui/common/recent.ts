/**
 * What the page remembers between visits, in IndexedDB (idb-keyval): recently loaded checkpoints and the
 * last probe settings. A checkpoint entry keeps its FileSystemDirectoryHandle when the browser gave one
 * (Chromium drops), so a reload can reopen it after one permission click; otherwise only its name and
 * digest, and the page asks to drop the folder again. Storage failures (private mode, quota) are ignored:
 * remembering is a convenience, never a reason to fail a load.
 */
import { createStore, get, set, type UseStore } from 'idb-keyval';
import type { Role } from '../../worker/engine.ts';

export interface RecentCheckpoint {
  role: Role;
  label: string;
  modelType: string;
  digest: string;
  bytes: number;
  when: number;
  handle?: FileSystemDirectoryHandle;
}

export interface RunSettings {
  lengths: string;
  block: number;
  policy: string;
  precision: 'f32' | 'bf16';
  localize: boolean;
}

/** Trace settings; prefix and traced are kept per model window (they default from it). */
export interface TraceSettings {
  block: number;
  policy: string;
  precision: 'f32' | 'bf16';
}

export interface GenerateSettings {
  prompt: string;
  promptMode: 'ids' | 'text';
  chat: boolean;
  maxNew: number;
  block: number;
  policy: string;
  precision: 'f32' | 'bf16';
  draftPosition: 'hf' | 'mlxcel';
}

const MAX_RECENT = 8;
let store: UseStore | undefined;
const db = () => (store ??= createStore('ringside', 'state'));

async function safe<T>(f: () => Promise<T>, fallback: T): Promise<T> {
  try {
    return await f();
  } catch {
    return fallback;
  }
}

export function listRecent(): Promise<RecentCheckpoint[]> {
  return safe(
    async () => ((await get<RecentCheckpoint[]>('recent', db())) ?? []).filter((r) => r && typeof r.label === 'string'),
    [],
  );
}

/** Adds (or moves to the front) a checkpoint; one entry per role + digest. */
export async function rememberCheckpoint(entry: RecentCheckpoint): Promise<RecentCheckpoint[]> {
  const list = (await listRecent()).filter((r) => !(r.role === entry.role && r.digest === entry.digest));
  const next = [entry, ...list].slice(0, MAX_RECENT);
  // A handle that cannot be cloned into IndexedDB (some browsers) falls back to an entry without it.
  const ok = await safe(async () => (await set('recent', next, db()), true), false);
  if (!ok)
    await safe(
      () =>
        set(
          'recent',
          next.map(({ handle: _h, ...rest }) => rest),
          db(),
        ),
      undefined,
    );
  return next;
}

export async function forgetRecent(): Promise<void> {
  await safe(() => set('recent', [], db()), undefined);
}

export function loadSettings(): Promise<RunSettings | undefined> {
  return safe(() => get<RunSettings>('settings', db()), undefined);
}

export function saveSettings(s: RunSettings): Promise<void> {
  return safe(() => set('settings', s, db()), undefined);
}

/** Settings of another run form ('trace', 'generate'); what comes back is untrusted (an older version may have written it). */
export function loadFormSettings<T>(form: 'trace' | 'generate'): Promise<Partial<T> | undefined> {
  return safe(async () => {
    const v = await get<unknown>(`settings-${form}`, db());
    return typeof v === 'object' && v !== null ? (v as Partial<T>) : undefined;
  }, undefined);
}

export function saveFormSettings<T>(form: 'trace' | 'generate', s: T): Promise<void> {
  return safe(() => set(`settings-${form}`, s, db()), undefined);
}
