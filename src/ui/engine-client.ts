/** UI-side handle on the engine Worker (comlink proxy). */
import * as Comlink from 'comlink';
import type { Engine } from '../worker/engine.ts';

export type EngineProxy = Comlink.Remote<Engine>;

export function startEngineWorker(): { engine: EngineProxy; worker: Worker } {
  const worker = new Worker(new URL('../worker/engine-worker.ts', import.meta.url), { type: 'module', name: 'ringside-engine' });
  return { engine: Comlink.wrap<Engine>(worker), worker };
}

export { Comlink };
