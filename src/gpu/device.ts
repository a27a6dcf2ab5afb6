import { GpuError } from './errors.ts';
import { prepareWgslFuzz } from './wgsl-fuzz/config.ts';
import { cappedLimits, capDeviceLimits, limitProfile, type LimitProfileName } from './limit-profiles.ts';

/**
 * Adapter + device acquisition. Asks for the adapter's *real* limits (the WebGPU defaults of
 * 256 MiB buffers / 128 MiB bindings are far too small for a 262144-row embedding) and for the
 * optional features Ringside can use, and records everything a report needs for provenance. Under a browser limit
 * profile (src/gpu/limit-profiles.ts) it asks for no more than that browser grants, and the device reports the
 * profile's limits to the engine.
 */

/** Limits Ringside raises to the adapter's maximum. */
const RAISED_LIMITS = [
  'maxBufferSize',
  'maxStorageBufferBindingSize',
  'maxComputeWorkgroupStorageSize',
  'maxComputeInvocationsPerWorkgroup',
  'maxComputeWorkgroupSizeX',
  'maxComputeWorkgroupSizeY',
  'maxComputeWorkgroupsPerDimension',
  'maxStorageBuffersPerShaderStage',
] as const;

/** Optional features used when present; every kernel has a path without them. */
const OPTIONAL_FEATURES = ['shader-f16', 'subgroups', 'timestamp-query'] as const;
export type OptionalFeature = (typeof OPTIONAL_FEATURES)[number];

export interface AdapterReport {
  vendor: string;
  architecture: string;
  device: string;
  description: string;
  /** All numeric limits of the device we got (after raising). */
  limits: Record<string, number>;
  /** Features enabled on the device (subset of the adapter's). */
  features: string[];
  /** Every feature the adapter offers, for the report. */
  adapterFeatures: string[];
  subgroupMinSize?: number;
  subgroupMaxSize?: number;
  isFallbackAdapter: boolean;
  platform: string;
  /** The backend ("metal", "vulkan", "d3d12"), where the browser reports it (Chrome's WebGPU developer features). */
  backend?: string;
  /** The browser limit profile the device was capped to (limits and features); absent: the adapter's own. */
  limitProfile?: LimitProfileName;
}

export interface GpuContext {
  device: GPUDevice;
  report: AdapterReport;
  has(feature: OptionalFeature): boolean;
  /** Resolves when the device is lost, with the typed error. */
  lost: Promise<GpuError>;
  destroy(): void;
}

/** Copies the numeric fields of a GPUSupportedLimits (its fields are prototype getters). */
export function limitsToRecord(limits: GPUSupportedLimits): Record<string, number> {
  const out: Record<string, number> = {};
  for (const key in limits) {
    const v = (limits as unknown as Record<string, unknown>)[key];
    if (typeof v === 'number') out[key] = v;
  }
  return out;
}

function adapterInfoFields(adapter: GPUAdapter) {
  // adapter.info fields are getters: JSON.stringify(adapter.info) gives {}; copy them one by one.
  const info = (adapter as { info?: GPUAdapterInfo }).info;
  const s = (v: unknown) => (typeof v === 'string' ? v : '');
  const n = (v: unknown) => (typeof v === 'number' ? v : undefined);
  const raw = info as unknown as Record<string, unknown> | undefined;
  return {
    vendor: s(raw?.vendor),
    architecture: s(raw?.architecture),
    device: s(raw?.device),
    description: s(raw?.description),
    subgroupMinSize: n(raw?.subgroupMinSize),
    subgroupMaxSize: n(raw?.subgroupMaxSize),
    isFallbackAdapter: raw?.isFallbackAdapter === true,
    backend: s(raw?.backend) || undefined,
  };
}

export interface DeviceOptions {
  powerPreference?: GPUPowerPreference;
  /** Leave optional features off (tests of fallback paths). */
  disableFeatures?: OptionalFeature[];
  platform?: string;
  /** Cap the device to a browser's limits and features (RINGSIDE_LIMITS, the page's ?limits=). */
  limits?: LimitProfileName;
}

export async function createGpuContext(gpu: GPU | undefined, opts: DeviceOptions = {}): Promise<GpuContext> {
  // The compiler fuzzer's parser, where RINGSIDE_WGSL_FUZZ turns it on: pipelines are created synchronously.
  await prepareWgslFuzz();
  if (!gpu || typeof gpu.requestAdapter !== 'function') {
    throw new GpuError('no-webgpu', 'WebGPU is not available in this environment (navigator.gpu is missing).');
  }
  let adapter: GPUAdapter | null;
  try {
    adapter = await gpu.requestAdapter({ powerPreference: opts.powerPreference ?? 'high-performance' });
  } catch (e) {
    throw new GpuError('no-adapter', `requestAdapter() failed: ${(e as Error).message}.`);
  }
  if (!adapter) throw new GpuError('no-adapter', 'No WebGPU adapter was found (requestAdapter() returned null).');

  const adapterLimits = limitsToRecord(adapter.limits);
  const profile = opts.limits !== undefined ? limitProfile(opts.limits) : undefined;
  const caps = profile?.caps(adapterLimits) ?? {};
  const requiredLimits: Record<string, number> = {};
  for (const name of RAISED_LIMITS) {
    const v = adapterLimits[name];
    if (typeof v === 'number') requiredLimits[name] = name in caps ? Math.min(v, caps[name]) : v;
  }
  const disabled = new Set(opts.disableFeatures ?? []);
  const requiredFeatures = OPTIONAL_FEATURES.filter(
    (f) => adapter.features.has(f) && !disabled.has(f) && (!profile || profile.features.includes(f)),
  );

  let device: GPUDevice;
  try {
    device = await adapter.requestDevice({ requiredLimits, requiredFeatures: requiredFeatures as GPUFeatureName[] });
  } catch (e) {
    throw new GpuError(
      'device-failed',
      `requestDevice() failed with features [${requiredFeatures.join(', ')}]${profile ? ` under the ${profile.name} limit profile` : ''}: ${(e as Error).message}.`,
    );
  }

  if (profile) capDeviceLimits(device, cappedLimits(profile, adapterLimits, limitsToRecord(device.limits)));
  const info = adapterInfoFields(adapter);
  const report: AdapterReport = {
    vendor: info.vendor,
    architecture: info.architecture,
    device: info.device,
    description: info.description,
    limits: limitsToRecord(device.limits),
    features: [...device.features].sort(),
    adapterFeatures: [...adapter.features].sort(),
    subgroupMinSize: info.subgroupMinSize,
    subgroupMaxSize: info.subgroupMaxSize,
    isFallbackAdapter: info.isFallbackAdapter,
    ...(info.backend ? { backend: info.backend } : {}),
    platform: opts.platform ?? (typeof navigator !== 'undefined' ? navigator.userAgent : 'unknown'),
    ...(profile ? { limitProfile: profile.name } : {}),
  };
  let destroyed = false;
  const lost = device.lost.then(
    (l) =>
      new GpuError(
        'device-lost',
        destroyed
          ? 'The GPU device was released.'
          : `The GPU device was lost (${l.reason}): ${l.message || 'no message'}.`,
      ),
  );
  return {
    device,
    report,
    has: (f) => device.features.has(f),
    lost,
    destroy() {
      destroyed = true;
      device.destroy();
    },
  };
}

/**
 * Runs `fn` inside out-of-memory and validation error scopes and turns a captured error into a
 * GpuError naming `what` (e.g. "uploading layers.3.mlp.down_proj.weight (48 MB)").
 */
export async function withErrorScopes<T>(device: GPUDevice, what: string, fn: () => T | Promise<T>): Promise<T> {
  device.pushErrorScope('out-of-memory');
  device.pushErrorScope('validation');
  // The scopes are popped whatever fn does; a captured GPU error explains more than fn's own failure
  // (usually a consequence of it), so it takes precedence.
  let outcome: { value: T } | { error: unknown };
  try {
    outcome = { value: await fn() };
  } catch (error) {
    outcome = { error };
  }
  const validation = await device.popErrorScope();
  const oom = await device.popErrorScope();
  if (oom) throw new GpuError('out-of-memory', `Out of GPU memory while ${what}: ${oom.message}.`);
  if (validation) throw new GpuError('validation', `WebGPU validation error while ${what}: ${validation.message}.`);
  if ('error' in outcome) throw outcome.error;
  return outcome.value;
}
