/**
 * Overrides of matmul_coop.wgsl's dispatch shape, for tuning (`bench --coop-threads N --coop-features R`) and for
 * tests that run the kernel's other shapes: a KernelCache built with them (KernelCacheOptions.coop) gives every
 * coop linear it dispatches this shape instead of src/model/coop-shape.ts's rules. An option of the cache, not a
 * setting of the process, so that one engine's tuning never reaches another's dispatches.
 */
export interface CoopTuning {
  /** Invocations per output feature: 8 or 16 (T). */
  threads?: number;
  /** Output features per invocation of `main`: 1, 2 or 4 (R; the fused `gate_up` takes at most 2). */
  features?: number;
  /** Invocations per workgroup: 256 or 512, where the device allows 512 (WG). */
  workgroup?: number;
}

/** Refuses a tuning the kernel cannot run, naming the value. */
export function checkCoopTuning(t: CoopTuning): void {
  // matmul_coop.wgsl stages a whole round of T groups of 4 rows' x in 16 KiB: T * 64 <= 1024.
  if (t.threads !== undefined && t.threads !== 8 && t.threads !== 16)
    throw new Error(`coop threads per feature must be 8 or 16, not ${t.threads}`);
  if (t.features !== undefined && t.features !== 1 && t.features !== 2 && t.features !== 4)
    throw new Error(`coop features per invocation must be 1, 2 or 4, not ${t.features}`);
  if (t.workgroup !== undefined && t.workgroup !== 256 && t.workgroup !== 512)
    throw new Error(`coop workgroups must be 256 or 512, not ${t.workgroup}`);
}
