import { describe, expect, it } from 'vitest';
import {
  cappedLimits,
  LIMIT_PROFILES,
  limitProfile,
  parseLimitProfile,
  webkitMaxBufferSize,
} from '../../src/gpu/limit-profiles.ts';
import { validateReport } from '../../src/parity/report.ts';
import { normalizeProvenance } from '../../src/ui/report/report-model.ts';
import { equalReport } from '../e2e/sample-report.ts';

const GiB = 2 ** 30;
// lavapipe's limits (Mesa 25, as Dawn reports them): the stand-in machine of the GPU passes
const lavapipe = {
  maxBufferSize: 4294967295,
  maxStorageBufferBindingSize: 134217728,
  maxStorageBuffersPerShaderStage: 16,
  maxComputeWorkgroupStorageSize: 32768,
  maxComputeInvocationsPerWorkgroup: 1024,
  maxComputeWorkgroupSizeZ: 64,
  minStorageBufferOffsetAlignment: 256,
};

describe('browser limit profiles', () => {
  it("Safari's buffer size is WebKit's maxBufferSize(): max(min(L, 1 GiB), min(INT_MAX, L / 3)), a multiple of 4", () => {
    // a Mac with a 64 GiB maxBufferLength: INT_MAX rounded down to a multiple of 4
    expect(webkitMaxBufferSize(64 * GiB)).toBe(2_147_483_644);
    // lavapipe's 4 GiB - 1 as the stand-in: a third of it, rounded down to a multiple of 4
    expect(webkitMaxBufferSize(4294967295)).toBe(1_431_655_764);
    // L / 3 under 1 GiB: min(L, 1 GiB) wins
    expect(webkitMaxBufferSize(2 * GiB)).toBe(GiB);
    expect(webkitMaxBufferSize(512 * 2 ** 20)).toBe(512 * 2 ** 20);
  });

  it('each profile caps what it names, never above the adapter, and leaves the other limits alone', () => {
    const safari = cappedLimits(limitProfile('safari'), lavapipe, lavapipe);
    expect(safari).toEqual({
      ...lavapipe,
      maxBufferSize: 1_431_655_764,
      // 44 storage buffers per stage, but lavapipe offers 16
      maxStorageBuffersPerShaderStage: 16,
    });
    const chrome = cappedLimits(limitProfile('chrome-mac'), lavapipe, lavapipe);
    expect(chrome).toEqual({ ...lavapipe, maxBufferSize: 4 * GiB - 4, maxStorageBuffersPerShaderStage: 10 });
    // a GPU that offers more than either browser (an H200 through Dawn's Vulkan backend)
    const big = {
      maxBufferSize: 2 ** 40,
      maxStorageBufferBindingSize: 2 ** 32 - 4,
      maxStorageBuffersPerShaderStage: 96,
      maxComputeWorkgroupStorageSize: 49152,
      maxComputeInvocationsPerWorkgroup: 1024,
      maxComputeWorkgroupSizeZ: 64,
    };
    expect(cappedLimits(limitProfile('safari'), big, big)).toEqual({
      maxBufferSize: 2_147_483_644,
      maxStorageBufferBindingSize: 2_147_483_644,
      maxStorageBuffersPerShaderStage: 44,
      maxComputeWorkgroupStorageSize: 32768,
      maxComputeInvocationsPerWorkgroup: 1024,
      maxComputeWorkgroupSizeZ: 64,
    });
    expect(cappedLimits(limitProfile('chrome-mac'), big, big)).toMatchObject({
      maxBufferSize: 4294967292,
      maxStorageBufferBindingSize: 4294967292,
      maxStorageBuffersPerShaderStage: 10,
      maxComputeWorkgroupStorageSize: 32768,
    });
  });

  it('features: Safari without subgroups, safari-subgroups and Chrome with them; shader-f16 and timestamps in all', () => {
    expect(limitProfile('safari').features).toEqual(['shader-f16', 'timestamp-query']);
    expect(limitProfile('safari-subgroups').features).toEqual(['shader-f16', 'subgroups', 'timestamp-query']);
    expect(limitProfile('chrome-mac').features).toEqual(['shader-f16', 'subgroups', 'timestamp-query']);
  });

  it('a setting names a profile or none; an unknown name is refused, naming the setting and the choices', () => {
    expect(parseLimitProfile(undefined, 'RINGSIDE_LIMITS')).toBeUndefined();
    expect(parseLimitProfile('', 'RINGSIDE_LIMITS')).toBeUndefined();
    for (const p of LIMIT_PROFILES) expect(parseLimitProfile(p, 'RINGSIDE_LIMITS')).toBe(p);
    expect(() => parseLimitProfile('Safari', 'RINGSIDE_LIMITS')).toThrow(
      '"Safari" (RINGSIDE_LIMITS) is not a browser limit profile; use one of safari, safari-subgroups, chrome-mac',
    );
    expect(() => parseLimitProfile('firefox', "the page's ?limits= parameter")).toThrow(
      /"firefox" \(the page's \?limits= parameter\) is not a browser limit profile/,
    );
  });

  it("a report names its profile in provenance.adapter.limitProfile; validation accepts the profiles' names only", () => {
    const r = structuredClone(equalReport()) as any;
    expect(validateReport(r)).toEqual([]);
    for (const p of LIMIT_PROFILES) {
      r.provenance.adapter.limitProfile = p;
      expect(validateReport(r)).toEqual([]);
      expect(normalizeProvenance(r.provenance).adapter.limitProfile).toBe(p);
    }
    r.provenance.adapter.limitProfile = 'firefox';
    expect(validateReport(r)).toEqual([
      'provenance.adapter.limitProfile must be one of safari, safari-subgroups, chrome-mac (found "firefox")',
    ]);
    delete r.provenance.adapter.limitProfile;
    expect(normalizeProvenance(r.provenance).adapter).not.toHaveProperty('limitProfile');
  });
});
