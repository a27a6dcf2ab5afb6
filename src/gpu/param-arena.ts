/**
 * A uniform buffer of parameter blocks (SLOTS_PER_ARENA of them, recorder.ts) and the host copy its blocks are
 * packed into. Both are kept for the device's lifetime (KernelCache.freeArenas): a fresh 64 KiB ArrayBuffer per
 * recorder was external memory V8 had to account and collect, and on lavapipe that garbage collection took about
 * a fifth of the host's time in chained decode (a profile of scripts/record-microbench.ts, 2026-12-02). Its own
 * module because both the kernel cache (which keeps the free ones) and the recorder (which packs them) name it.
 */
export interface ParamArena {
  buffer: GPUBuffer;
  data: ArrayBuffer;
  view: DataView;
  /** Blocks packed since a Recorder took it (reset when one takes it). */
  used: number;
}
