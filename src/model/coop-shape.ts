/**
 * The shape of matmul_coop.wgsl's dispatches (workgroup size, threads and features per output feature): the rules,
 * and a kernel cache's tuning overrides where it has them (src/gpu/coop-tuning.ts).
 */
import type { CoopTuning } from '../gpu/coop-tuning.ts';

/** The device limits coopWorkgroup reads. */
type CoopLimits = Pick<
  GPUSupportedLimits,
  'maxComputeInvocationsPerWorkgroup' | 'maxComputeWorkgroupSizeX' | 'maxComputeWorkgroupStorageSize'
>;
/** What the coop rules read of a linear. */
export interface CoopLinear {
  outFeatures: number;
  inFeatures: number;
  bits: number;
}

/**
 * matmul_coop.wgsl's workgroup (WG invocations, T of them per output feature), a function of the linear's
 * shape and the device's limits, never of M: 512 for the MLP's 4-bit linears (gate/up: 12288 to 65535
 * outputs, `main` and the fused `gate_up` alike; down: 12288 inputs or more) where the device allows 512
 * invocations and the 32 KiB of workgroup memory they take (4 * WG vec4s of partials), 256 otherwise. Which
 * workgroup computes a feature changes none of its arithmetic (T and R do not change). Measured on an H200
 * (12B, cold weights, `scripts/coop-microbench.ts`; docs/PERFORMANCE.md, matvec; the NVIDIA driver gives this
 * kernel 128 registers at both sizes, so 16 warps share an SM either way): 512 makes the 4-bit gate/up
 * projection and the fused gate_up 1-8% faster at M = 1, 4 and 8, and the down projection's blocks 8% (the same
 * bytes). Kept at 256: the LM head and the 8-bit gate/up, where 512 made single rows 7-9% slower. 1024
 * invocations (64 registers, spilling) were slower everywhere.
 */
export function coopWorkgroup(limits: CoopLimits, d: CoopLinear, tuning: CoopTuning = {}): number {
  const fits =
    limits.maxComputeInvocationsPerWorkgroup >= 512 &&
    limits.maxComputeWorkgroupSizeX >= 512 &&
    limits.maxComputeWorkgroupStorageSize >= 512 * 64;
  if (tuning.workgroup) return fits ? tuning.workgroup : 256;
  const gateUp = d.outFeatures >= 12288 && d.outFeatures < 65536;
  const down = d.inFeatures >= 12288 && d.outFeatures < 12288;
  return fits && d.bits === 4 && (gateUp || down) ? 512 : 256;
}
/**
 * Invocations per output feature of matmul_coop.wgsl, a function of the linear's shape and entry only, never
 * of M (so every row count runs the same pipeline): 16, and 8 for the fused `gate_up` of wide MLPs (12288
 * outputs or more). Chosen on the H200 (microbenchmarks of the 4-bit LM head and MLP shapes at M = 1, 4, 8;
 * T = 8, 16, 32, 64; docs/PERFORMANCE.md, matvec): 16 was the fastest or within 5% at M = 1 for both the
 * 3840- and the 15360-wide inputs (8 made the 4-bit gate/up projection 16% slower, down 53%); for the fused
 * gate_up of the 12B's MLP 8 measured the same at M = 1 and 6-7% faster for blocks of 4 and 8, and it gives a
 * workgroup 64 consecutive features, a whole quantization group of the down projection, whose x sums
 * `gate_up_sums` then computes (gateUp). At least 8 (the kernel's final totals need SLOTS * ROWS = 8 of them).
 */
export function coopThreads(outFeatures = 0, entry: 'main' | 'gate_up' = 'main', tuning: CoopTuning = {}): number {
  if (tuning.threads) return tuning.threads;
  return entry === 'gate_up' && outFeatures >= 12288 ? 8 : 16;
}

/**
 * Output features per invocation of `main` in matmul_coop.wgsl, a function of the linear's shape only
 * (which invocation computes a feature changes none of its arithmetic): 4 (every x load serves four
 * features: delivering x bounds the kernel on an H200) for linears of at least 12288 outputs (the MLP's
 * gate/up, the LM head), 2 from 6144 (a layer's stacked q, k and v), 1 for narrower ones, where fewer
 * workgroups would leave a GPU's cores idle. Measured on an H200 (12B shapes, cold weights; docs/PERFORMANCE.md,
 * matvec): at M = 1, R = 4 against 2 makes the LM head 16% faster, the 8-bit gate/up projection 19%, the
 * 4-bit one 5% (at M = 4 and 8 within 2%); the stacked q, k, v of a sliding layer (8192 x 3840) is fastest
 * with R = 2 at M = 1 and 4, and the down projection (3840 x 15360) with R = 1, also against workgroups of
 * 128. The fused `gate_up` entry serves two features of each matrix (four slots too) and takes at most 2.
 */
export function coopFeatures(outFeatures: number, entry: 'main' | 'gate_up' = 'main', tuning: CoopTuning = {}): number {
  const r = tuning.features ?? (outFeatures >= 12288 ? 4 : outFeatures >= 6144 ? 2 : 1);
  return entry === 'gate_up' ? Math.min(r, 2) : r;
}

/**
 * matmul_coop.wgsl's workgroup size, invocations per output feature and output features per invocation for a
 * linear on this device (coopWorkgroup, coopThreads, coopFeatures): what coopDispatch runs, what gate_up_sums'
 * workgroups span (downSumsFused) and what scripts/coop-microbench.ts times by default.
 */
export function coopShape(
  limits: CoopLimits,
  d: CoopLinear,
  entry: 'main' | 'gate_up',
  tuning: CoopTuning = {},
): { WG: number; T: number; R: number } {
  return {
    WG: coopWorkgroup(limits, d, tuning),
    T: coopThreads(d.outFeatures, entry, tuning),
    R: coopFeatures(d.outFeatures, entry, tuning),
  };
}
