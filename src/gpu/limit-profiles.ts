/**
 * Browser limit profiles: a device capped to the limits and features a browser on a Mac grants, so that the
 * engine can be run here (Dawn on Linux, the page in Chromium) as it would plan and run there. Chosen with
 * RINGSIDE_LIMITS (Node: src/cli/node-gpu.ts) or the page's `?limits=` parameter (src/worker/engine.ts).
 *
 * The values are what each browser's own source computes for a Mac; where a value depends on the machine, the
 * adapter at hand stands in for it, and nothing is raised above what the adapter offers.
 *
 * - `safari`: WebKit, Source/WebGPU/WebGPU/HardwareCapabilities.mm (mac2 and apple7 families; maxBufferSize()):
 *   maxBufferSize = maxStorageBufferBindingSize = multipleOf4(max(min(L, 1 GiB), min(INT_MAX, L / 3))) with L
 *   Metal's maxBufferLength, so at most 2,147,483,644 (INT_MAX rounded down to a multiple of 4) and at most L / 3
 *   once L / 3 passes 1 GiB; maxStorageBuffersPerShaderStage = maxBindGroups (11) x 4 = 44; 32 KiB workgroup
 *   storage; 1024 invocations and workgroup sizes; 65535 workgroups per dimension (USHRT_MAX). Features: shader-f16
 *   always, timestamp-query where Metal offers the timestamp counter set (where the adapter offers it here), and no
 *   subgroups: baseFeatures() of the WebKit releases this profile describes lists none. Dawn reports
 *   maxBufferSize = min(maxBufferLength, 2^32 - 1) on Metal and other drivers their own figure: the adapter's
 *   maxBufferSize stands in for L, which on a Mac under Dawn understates a large maxBufferLength.
 * - `safari-subgroups`: `safari` plus subgroups. Newer WebKit sources add the subgroups feature in baseFeatures()
 *   for devices in MTLGPUFamilyMetal3 (every Apple silicon Mac); Safari releases before that do not offer it, so
 *   the plain profile keeps the kernels' paths without subgroups under test and this one the paths with them.
 * - `chrome-mac`: Dawn, src/dawn/native/metal/PhysicalDeviceMTL.mm (InitializeSupportedLimitsImpl) with Chrome's
 *   limit tiers (src/dawn/native/Limits.cpp, ApplyLimitTiers): Metal's 31 buffer arguments per function, less one
 *   for the buffer lengths, less 12 uniform buffers and 8 vertex buffers, leave 8 + 2 = 10 storage buffers per
 *   stage (the fused rmsnorm.wgsl `qkv_rows` and matmul_coop.wgsl `gate_up_sums` bind exactly 10); 32 KiB
 *   workgroup storage; 1024 invocations and workgroup sizes X and Y (Z is tiered to 64); maxBufferSize and
 *   maxStorageBufferBindingSize min(maxBufferLength, 2^32 - 1) tiered to 4 GiB - 4. Features: shader-f16;
 *   subgroups (Apple6+ and Mac2 families, every Apple silicon Mac); timestamp-query where Metal offers the
 *   timestamp counter set.
 */
export const LIMIT_PROFILES = ['safari', 'safari-subgroups', 'chrome-mac'] as const;
export type LimitProfileName = (typeof LIMIT_PROFILES)[number];

export interface LimitProfile {
  name: LimitProfileName;
  /** The browser in words, for messages: "Safari", "Chrome on a Mac". */
  browser: string;
  /** The optional features the browser offers where the adapter does; the others are not requested. */
  features: readonly GPUFeatureName[];
  /** The most the browser grants of each limit it caps, given the adapter's limits (the machine's stand-in). */
  caps(adapter: Readonly<Record<string, number>>): Record<string, number>;
}

const GiB = 2 ** 30;
/** INT_MAX in WebKit's maxBufferSize(). */
const INT_MAX = 2 ** 31 - 1;
const multipleOf4 = (n: number) => n - (n % 4);

/** WebKit's maxBufferSize() on a Mac for a Metal maxBufferLength of `L` bytes (also its binding size). */
export function webkitMaxBufferSize(L: number): number {
  return multipleOf4(Math.max(Math.min(L, GiB), Math.min(INT_MAX, Math.floor(L / 3))));
}

/** The workgroup limits both browsers grant on Apple silicon (Metal's 1024 threads, 32 KiB threadgroup memory). */
const METAL_WORKGROUPS = {
  maxComputeWorkgroupStorageSize: 32768,
  maxComputeInvocationsPerWorkgroup: 1024,
  maxComputeWorkgroupSizeX: 1024,
  maxComputeWorkgroupSizeY: 1024,
  maxComputeWorkgroupsPerDimension: 65535,
};

function safariCaps(adapter: Readonly<Record<string, number>>): Record<string, number> {
  const buffer = webkitMaxBufferSize(adapter.maxBufferSize);
  return {
    ...METAL_WORKGROUPS,
    maxComputeWorkgroupSizeZ: 1024,
    maxBufferSize: buffer,
    maxStorageBufferBindingSize: buffer,
    maxStorageBuffersPerShaderStage: 44,
  };
}

const PROFILES: Readonly<Record<LimitProfileName, LimitProfile>> = {
  safari: { name: 'safari', browser: 'Safari', features: ['shader-f16', 'timestamp-query'], caps: safariCaps },
  'safari-subgroups': {
    name: 'safari-subgroups',
    browser: 'Safari (with subgroups)',
    features: ['shader-f16', 'subgroups', 'timestamp-query'],
    caps: safariCaps,
  },
  'chrome-mac': {
    name: 'chrome-mac',
    browser: 'Chrome on a Mac',
    features: ['shader-f16', 'subgroups', 'timestamp-query'],
    caps: () => ({
      ...METAL_WORKGROUPS,
      maxComputeWorkgroupSizeZ: 64,
      maxBufferSize: 4 * GiB - 4,
      maxStorageBufferBindingSize: 4 * GiB - 4,
      maxStorageBuffersPerShaderStage: 10,
    }),
  },
};

export function limitProfile(name: LimitProfileName): LimitProfile {
  return PROFILES[name];
}

/**
 * The profile a setting names, or undefined for none (unset or empty). `where` says which setting it came from
 * ("RINGSIDE_LIMITS", "the page's ?limits= parameter"), for the message that refuses an unknown name.
 */
export function parseLimitProfile(value: string | null | undefined, where: string): LimitProfileName | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  if ((LIMIT_PROFILES as readonly string[]).includes(value)) return value as LimitProfileName;
  throw new Error(
    `"${value}" (${where}) is not a browser limit profile; use one of ${LIMIT_PROFILES.join(', ')} (or leave it unset for the adapter's own limits)`,
  );
}

/**
 * The limits a device under `profile` has: each of `device`'s numeric limits, lowered to the profile's cap where
 * it has one (computed from `adapter`, the machine's stand-in). Requesting the caps is not enough for the engine
 * to see them: a limit not requested comes at WebGPU's default, and an implementation may report a limit better
 * than requested; the planners read device.limits, so the device reports these (capDeviceLimits).
 */
export function cappedLimits(
  profile: LimitProfile,
  adapter: Readonly<Record<string, number>>,
  device: Readonly<Record<string, number>>,
): Record<string, number> {
  const caps = profile.caps(adapter);
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(device)) out[k] = k in caps ? Math.min(v, caps[k]) : v;
  return out;
}

/**
 * Makes `device.limits` report `limits` (an own property over the prototype's getter): kernels, memory plans and
 * the kernel class all read device.limits, so every one of them sees the profile's values.
 */
export function capDeviceLimits(device: GPUDevice, limits: Record<string, number>): void {
  Object.defineProperty(device, 'limits', { value: Object.freeze({ ...limits }), configurable: true });
}
