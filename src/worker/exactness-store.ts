/**
 * Where the page keeps the exactness self-test's results between visits (src/parity/exactness-gate.ts): IndexedDB
 * through idb-keyval, in a database of its own (idb-keyval creates a store only with its database, so it cannot
 * share src/ui/common/recent.ts's). A failure to read or write (private mode, quota, no IndexedDB) costs only a
 * run of the test: it is ignored, as remembering is a convenience.
 */
import { createStore, get, set, type UseStore } from 'idb-keyval';
import type { ExactnessStore } from '../parity/exactness-gate.ts';

let store: UseStore | undefined;

export function indexedDbExactnessStore(): ExactnessStore | undefined {
  if (typeof indexedDB === 'undefined') return undefined;
  const db = () => (store ??= createStore('ringside-exactness', 'results'));
  return {
    async get(key) {
      try {
        return await get(key, db());
      } catch {
        return undefined;
      }
    },
    async set(key, value) {
      try {
        await set(key, value, db());
      } catch {
        // not remembered: the next visit runs the test again
      }
    },
  };
}
