/** UI-side handle on the engine Worker (comlink proxy). */
import * as Comlink from 'comlink';
import type { Engine } from '../../worker/engine.ts';

export type EngineProxy = Comlink.Remote<Engine>;

export function startEngineWorker(): { engine: EngineProxy; worker: Worker } {
  const worker = new Worker(new URL('../../worker/engine-worker.ts', import.meta.url), {
    type: 'module',
    name: 'ringside-engine',
  });
  return { engine: Comlink.wrap<Engine>(worker), worker };
}

export { Comlink };

/**
 * A progress callback for one engine call, proxied to the Worker, that goes quiet once the call has settled.
 * Why: comlink delivers each proxied callback over its own MessagePort, so a last progress message can
 * arrive after the call's result and would overwrite the finished state (seen: "Measuring… 31 s" left
 * on screen after the benchmark had finished). Call close() when the awaited call returns or throws.
 */
export function settledProgress<P>(onProgress: (p: P) => void): {
  callback: ((p: P) => void) & Comlink.ProxyMarked;
  close(): void;
} {
  let open = true;
  return {
    callback: Comlink.proxy((p: P) => {
      if (open) onProgress(p);
    }),
    close() {
      open = false;
    },
  };
}
