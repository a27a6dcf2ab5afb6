import type { AdapterReport } from '../gpu/device.ts';
import { compilerHere } from './compiler-provenance.ts';
import { wgslFuzzRecord } from '../gpu/wgsl-fuzz/config.ts';
import type { Provenance } from './report.ts';
import { APP_COMMIT, APP_VERSION } from './version.ts';

/** The provenance block every report carries (docs/DESIGN.md "Reports"): who, where, with what settings. */
export function provenance(
  adapter: AdapterReport,
  platform: string,
  settings: Omit<Provenance, 'app' | 'createdAt' | 'adapter' | 'platform'>,
): Provenance {
  const wgslFuzz = wgslFuzzRecord();
  return {
    app: { name: 'ringside', version: APP_VERSION },
    ...(APP_COMMIT ? { commit: APP_COMMIT } : {}),
    createdAt: new Date().toISOString(),
    adapter,
    platform,
    compiler: compilerHere(adapter.backend),
    ...settings,
    // made under the compiler fuzzer (RINGSIDE_WGSL_FUZZ): its mode, seed and the sites it rewrote
    ...(wgslFuzz ? { wgslFuzz } : {}),
  };
}
