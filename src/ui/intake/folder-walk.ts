/**
 * Turns whatever the user gave (a dropped folder, files picked with a webkitdirectory input, a stored
 * directory handle) into the engine's FolderFiles: paths relative to the folder, without its own name.
 * Files are never read here; the engine slices them per tensor.
 */
import type { FolderFiles } from '../../worker/engine.ts';

export interface PickedFolder extends FolderFiles {
  files: { path: string; file: File }[];
  /** Present when the browser gave a directory handle (Chromium): stored so a reload can reopen it. */
  handle?: FileSystemDirectoryHandle;
}

/** Checkpoint folders are flat; a little depth allows a nested copy, the cap keeps a stray drop of ~ cheap. */
const MAX_DEPTH = 4;
const MAX_FILES = 5000;
/** Finder and editors leave these around; they are never part of a checkpoint. */
const skip = (name: string) => name.startsWith('.') || name === 'Thumbs.db';

/** From an <input type=file webkitdirectory> (webkitRelativePath = "folder/sub/file"). */
export function fromFileList(list: FileList | readonly File[]): PickedFolder {
  const all = Array.from(list);
  const rel = (f: File) => f.webkitRelativePath || f.name;
  const top = all.length && rel(all[0]).includes('/') ? rel(all[0]).split('/')[0] : '';
  const files = all
    .map((file) => ({
      path: top && rel(file).startsWith(`${top}/`) ? rel(file).slice(top.length + 1) : rel(file),
      file,
    }))
    .filter((f) => !f.path.split('/').some(skip))
    .slice(0, MAX_FILES);
  return { label: top || (all.length === 1 ? all[0].name : 'selected files'), files };
}

/** The parts of the File System Access API that lib.dom does not type here (async iteration, permissions). */
interface DirHandle extends FileSystemDirectoryHandle {
  values(): AsyncIterable<FileSystemFileHandle | FileSystemDirectoryHandle>;
  queryPermission?(o: { mode: 'read' }): Promise<PermissionState>;
  requestPermission?(o: { mode: 'read' }): Promise<PermissionState>;
}

export async function fromDirectoryHandle(handle: FileSystemDirectoryHandle): Promise<PickedFolder> {
  const files: PickedFolder['files'] = [];
  const walk = async (dir: DirHandle, prefix: string, depth: number) => {
    for await (const h of dir.values()) {
      if (files.length >= MAX_FILES || skip(h.name)) continue;
      if (h.kind === 'file') files.push({ path: prefix + h.name, file: await (h as FileSystemFileHandle).getFile() });
      else if (depth < MAX_DEPTH) await walk(h as DirHandle, `${prefix}${h.name}/`, depth + 1);
    }
  };
  await walk(handle as DirHandle, '', 0);
  return { label: handle.name, files, handle };
}

/** Asks for read access to a stored handle (needs a user gesture); false when refused. */
export async function ensureReadPermission(handle: FileSystemDirectoryHandle): Promise<boolean> {
  const h = handle as DirHandle;
  if (!h.queryPermission || !h.requestPermission) return true;
  if ((await h.queryPermission({ mode: 'read' })) === 'granted') return true;
  return (await h.requestPermission({ mode: 'read' })) === 'granted';
}

function readAllEntries(dir: FileSystemDirectoryEntry): Promise<FileSystemEntry[]> {
  const reader = dir.createReader();
  const out: FileSystemEntry[] = [];
  // readEntries returns at most ~100 entries per call: call until it returns none.
  return new Promise((resolve, reject) => {
    const next = () =>
      reader.readEntries((batch) => {
        if (batch.length === 0) return resolve(out);
        out.push(...batch);
        next();
      }, reject);
    next();
  });
}

const entryFile = (e: FileSystemFileEntry) => new Promise<File>((resolve, reject) => e.file(resolve, reject));

async function fromEntries(entries: FileSystemEntry[]): Promise<PickedFolder> {
  const files: PickedFolder['files'] = [];
  const walk = async (e: FileSystemEntry, prefix: string, depth: number) => {
    if (files.length >= MAX_FILES || skip(e.name)) return;
    if (e.isFile) files.push({ path: prefix + e.name, file: await entryFile(e as FileSystemFileEntry) });
    else if (e.isDirectory && depth < MAX_DEPTH)
      for (const c of await readAllEntries(e as FileSystemDirectoryEntry))
        await walk(c, `${prefix}${e.name}/`, depth + 1);
  };
  // One dropped folder: its contents, relative to it. Loose files: their names.
  if (entries.length === 1 && entries[0].isDirectory) {
    for (const c of await readAllEntries(entries[0] as FileSystemDirectoryEntry)) await walk(c, '', 1);
    return { label: entries[0].name, files };
  }
  for (const e of entries) await walk(e, '', 0);
  return { label: entries.length === 1 ? entries[0].name : 'dropped files', files };
}

type ItemWithHandle = DataTransferItem & { getAsFileSystemHandle?: () => Promise<FileSystemHandle | null> };

/**
 * Captures a drop. The DataTransfer is only readable during the event, so everything it offers (handles,
 * entries, files) is taken synchronously here; the walk happens afterwards.
 */
export function captureDrop(dt: DataTransfer): Promise<PickedFolder> {
  const items = Array.from(dt.items).filter((i) => i.kind === 'file') as ItemWithHandle[];
  const handles = items.length === 1 && items[0].getAsFileSystemHandle ? items[0].getAsFileSystemHandle() : undefined;
  const entries = items.map((i) => i.webkitGetAsEntry?.() ?? null).filter((e): e is FileSystemEntry => e !== null);
  const plain = Array.from(dt.files);
  return (async () => {
    const h = await handles?.catch(() => null);
    if (h && h.kind === 'directory') return fromDirectoryHandle(h as FileSystemDirectoryHandle);
    if (entries.length) return fromEntries(entries);
    return fromFileList(plain);
  })();
}
