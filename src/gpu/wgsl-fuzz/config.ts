/**
 * The compiler fuzzer's switch: `RINGSIDE_WGSL_FUZZ=MODE:SEED` in Node, `setWgslFuzz` in the page's worker
 * (the page passes its `?wgsl-fuzz=MODE:SEED` parameter: src/ui/common/engine-client.ts). While it is on, every
 * pipeline a KernelCache creates is compiled from a rewritten source (pipeline-source.ts) that does, at sites
 * chosen by the seed, what a relaxed-math compiler (Metal's, under Chrome and Safari on a Mac) may do:
 *   contract  a * b + c into fma
 *   reassoc   sums and products regrouped, x / y as x * (1 / y), compensation terms that are zero dropped
 *   all       both
 *   identity  no rewrite, the same machinery (copies per call path, text put back in place): the check that the
 *             transform itself changes no value
 * Under `exact` a verify row must still equal its chain step byte for byte: rows that run the same compiled
 * instructions get the same rewrites. Reports made meanwhile record the mode, the seed and the sites rewritten.
 * The parser (wgsl_reflect) is loaded only when the fuzzer is on (prepareWgslFuzz, awaited before a device is
 * handed out).
 */
import type { FuzzMode, ModuleFuzzer } from './pipeline-source.ts';

export type { FuzzMode };
export const WGSL_FUZZ_MODES: readonly FuzzMode[] = ['contract', 'reassoc', 'all', 'identity'];

export interface WgslFuzzSpec {
  mode: FuzzMode;
  seed: number;
  /** Only these shader files are rewritten (MODE:SEED:a.wgsl,b.wgsl): which kernel a divergence comes from. */
  only?: string[];
}

/** What a report records of the fuzzer (provenance.wgslFuzz). */
export interface WgslFuzzRecord extends WgslFuzzSpec {
  /** Sites rewritten over every pipeline created under this setting so far. */
  sites: number;
}

/** Parses MODE:SEED[:SHADER,...] (`where`: the option or variable, for the message). */
export function parseWgslFuzz(text: string, where = 'RINGSIDE_WGSL_FUZZ'): WgslFuzzSpec {
  const [mode, seed, only, ...rest] = text.split(':');
  const n = Number(seed);
  const files = only?.split(',');
  if (
    rest.length ||
    !WGSL_FUZZ_MODES.includes(mode as FuzzMode) ||
    !/^\d+$/.test(seed ?? '') ||
    n > 0xffffffff ||
    (files && !files.every((f) => f.endsWith('.wgsl')))
  ) {
    throw new Error(
      `${where} must be MODE:SEED or MODE:SEED:SHADER.wgsl,... with MODE one of ${WGSL_FUZZ_MODES.join(', ')} and SEED an integer 0..4294967295, not "${text}".`,
    );
  }
  return files ? { mode: mode as FuzzMode, seed: n, only: files } : { mode: mode as FuzzMode, seed: n };
}

/** MODE:SEED[:SHADER,...], the form parseWgslFuzz reads. */
export function formatWgslFuzz(s: WgslFuzzSpec): string {
  return `${s.mode}:${s.seed}${s.only ? `:${s.only.join(',')}` : ''}`;
}

function envSpec(): WgslFuzzSpec | undefined {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env
    ?.RINGSIDE_WGSL_FUZZ;
  return env ? parseWgslFuzz(env) : undefined;
}

let spec: WgslFuzzSpec | undefined = envSpec();
let sites = 0;
let fuzzerModule: typeof import('./pipeline-source.ts') | undefined;
const modules = new Map<string, ModuleFuzzer>();

/** Turns the fuzzer on (or off, undefined) for pipelines created from now on, and loads it. */
export async function setWgslFuzz(s: WgslFuzzSpec | undefined): Promise<void> {
  spec = s;
  sites = 0;
  await prepareWgslFuzz();
}

/** Loads the fuzzer where it is on. */
export async function prepareWgslFuzz(): Promise<void> {
  if (spec && !fuzzerModule) fuzzerModule = await import('./pipeline-source.ts');
}

export function wgslFuzzSpec(): WgslFuzzSpec | undefined {
  return spec;
}

/** The fuzzer's record for a report, undefined while it is off. */
export function wgslFuzzRecord(): WgslFuzzRecord | undefined {
  return spec ? { ...spec, sites } : undefined;
}

/**
 * The source pipeline (shader, entry, constants) is compiled from while the fuzzer is on; `text` is the shader's
 * source (includes expanded).
 */
export function fuzzedPipelineSource(
  shader: string,
  text: string,
  entry: string,
  constants: Record<string, number>,
): string {
  if (!spec || (spec.only && !spec.only.includes(shader))) return text;
  if (!fuzzerModule) throw new Error('RINGSIDE_WGSL_FUZZ is on but the fuzzer was not loaded (prepareWgslFuzz).');
  let m = modules.get(shader);
  if (!m || m.source !== text) modules.set(shader, (m = new fuzzerModule.ModuleFuzzer(shader, text)));
  const key = `${shader}#${entry}#${Object.keys(constants)
    .sort()
    .map((k) => `${k}=${constants[k]}`)
    .join(',')}`;
  const out = m.pipeline(spec.mode, spec.seed, key, entry);
  sites += out.sites;
  return out.code;
}
