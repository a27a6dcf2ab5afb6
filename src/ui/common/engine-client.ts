/** UI-side handle on the engine Worker (comlink proxy). */
import * as Comlink from 'comlink';
import type { Engine } from '../../worker/engine.ts';

export type EngineProxy = Comlink.Remote<Engine>;

export function startEngineWorker(): { engine: EngineProxy; worker: Worker } {
  const worker = new Worker(new URL('../../worker/engine-worker.ts', import.meta.url), {
    type: 'module',
    name: 'ringside-engine',
  });
  const engine = Comlink.wrap<Engine>(worker);
  // The compiler fuzzer for page tests (?wgsl-fuzz=MODE:SEED, src/gpu/wgsl-fuzz/config.ts): sent before any other
  // call, so the Worker compiles every pipeline under it. A malformed value makes the engine refuse the device with
  // the parameter's message (Engine.gpu), which the adapter panel shows.
  const fuzz = typeof location !== 'undefined' ? new URLSearchParams(location.search).get('wgsl-fuzz') : null;
  if (fuzz) engine.setWgslFuzz(fuzz).catch(() => {});
  return { engine, worker };
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
