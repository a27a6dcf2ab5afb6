/**
 * Where the command line keeps the exactness self-test's results between processes (src/parity/exactness-gate.ts
 * keys them by adapter, platform, kernel classes and shader build): one JSON file in the user's cache folder
 * (RINGSIDE_CACHE_DIR, else $XDG_CACHE_HOME/ringside, else ~/.cache/ringside). Why: every probe, trace, generate
 * and compare is a process of its own, and on a software adapter the test's pipelines compile for seconds (the
 * GPU kernel class's for a minute of CPU time on llvmpipe); a driver, Node, Dawn or shader change is a new key.
 * The file is written whole through a rename, so a reader never sees half of it; a file that cannot be read or
 * parsed is treated as empty and a failed write is ignored: the test then runs again.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ExactnessStore } from '../parity/exactness-gate.ts';
import type { ExactnessSelfTestSummary } from '../parity/report.ts';

/** Results kept at most (the newest): one per adapter, kernel class set and build a machine has seen. */
const MAX_ENTRIES = 32;

export function exactnessCacheFile(env: NodeJS.ProcessEnv = process.env): string {
  const dir =
    env.RINGSIDE_CACHE_DIR ||
    (env.XDG_CACHE_HOME ? path.join(env.XDG_CACHE_HOME, 'ringside') : path.join(os.homedir(), '.cache', 'ringside'));
  return path.join(dir, 'exactness-selftest.json');
}

type Entries = [string, ExactnessSelfTestSummary][];

function readEntries(file: string): Entries {
  try {
    const x = JSON.parse(readFileSync(file, 'utf8'));
    return Array.isArray(x) ? x.filter((e): e is Entries[number] => Array.isArray(e) && typeof e[0] === 'string') : [];
  } catch {
    return [];
  }
}

export function fileExactnessStore(file = exactnessCacheFile()): ExactnessStore {
  return {
    async get(key) {
      return readEntries(file).find(([k]) => k === key)?.[1];
    },
    async set(key, value) {
      const entries = readEntries(file).filter(([k]) => k !== key);
      entries.push([key, value]);
      try {
        mkdirSync(path.dirname(file), { recursive: true });
        const tmp = `${file}.${process.pid}.tmp`;
        writeFileSync(tmp, JSON.stringify(entries.slice(-MAX_ENTRIES)));
        renameSync(tmp, file);
      } catch {
        // not kept: the next process runs the test again
      }
    },
  };
}
