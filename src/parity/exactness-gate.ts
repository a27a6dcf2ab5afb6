/**
 * The exactness self-test before a verdict (exactness-selftest.ts), run once per adapter and shader build: its
 * result is kept in memory for the life of the process or the page (the Worker), and where the caller gives a
 * store (the page: IndexedDB, src/worker/exactness-store.ts), across visits. The key names the adapter (vendor,
 * architecture, device, driver description), the platform (the browser and its version, or Node and Dawn: the
 * shader compiler comes with them), the kernel classes checked and the SHA-256 of every WGSL source of the build,
 * so a new driver, browser or shader runs the test again. A run with an injected fault is never cached.
 */
import type { GpuContext } from '../gpu/device.ts';
import type { KernelClass } from '../gpu/kernel-class.ts';
import type { KernelFault } from '../gpu/kernel-fault.ts';
import { shaderFiles } from '../gpu/shaders.ts';
import { formatWgslFuzz, wgslFuzzSpec } from '../gpu/wgsl-fuzz/config.ts';
import type { CancelToken, ProgressFn } from '../util/cancel.ts';
import {
  runExactnessSelfTest,
  selfTestKernelClasses,
  type ExactnessCheck,
  type ExactnessSelfTestResult,
} from './exactness-selftest.ts';
import { exactnessSelfTestProblems, type ExactnessSelfTestSummary } from './report.ts';

/** The self-test's line in a run's list of phases (the page). */
export const SELFTEST_PHASE = 'exactness self-test of this adapter';

/** Bumped when what the self-test checks changes, so that results of the old test are not reused. */
const SELFTEST_VERSION = 1;

/** A persistent store of summaries by key (the page's IndexedDB); failures to read or write are the store's to swallow. */
export interface ExactnessStore {
  get(key: string): Promise<unknown>;
  set(key: string, value: ExactnessSelfTestSummary): Promise<void>;
}

export interface ExactnessGateOptions {
  /** Whose shader compiler ran the test, for the warning ("this browser's shader compiler"). */
  compiler: string;
  fault?: KernelFault;
  /** Run the test even when a result is cached (the CLI's `selftest --exactness`). */
  fresh?: boolean;
  store?: ExactnessStore;
  onProgress?: ProgressFn;
  onCheck?: (c: ExactnessCheck) => void;
  cancel?: CancelToken;
}

export interface ExactnessGateResult {
  summary: ExactnessSelfTestSummary;
  /** The full result when the test ran now (absent when the summary came from a cache). */
  result?: ExactnessSelfTestResult;
}

const memory = new Map<string, ExactnessSelfTestSummary>();

let build: Promise<string> | undefined;
/** The first 16 hex digits of the SHA-256 of every WGSL file of the build (by name, in name order). */
export function shaderBuildHash(): Promise<string> {
  build ??= (async () => {
    const files = shaderFiles();
    const text = Object.keys(files)
      .sort()
      .map((name) => `${name}\u0000${files[name]}\u0000`)
      .join('');
    const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
    return [...new Uint8Array(digest)]
      .slice(0, 8)
      .map((b) => b.toString(16).padStart(2, '0'))
      .join('');
  })();
  return build;
}

/**
 * The cache key of an adapter, platform, set of kernel classes and shader build, and of the compiler fuzzer's
 * setting (src/gpu/wgsl-fuzz): its rewrites compile other code, as another compiler would.
 */
export function exactnessKey(ctx: GpuContext, classes: KernelClass[], shaderBuild: string): string {
  const a = ctx.report;
  const fuzz = wgslFuzzSpec();
  return JSON.stringify({
    v: SELFTEST_VERSION,
    adapter: [a.vendor, a.architecture, a.device, a.description],
    platform: a.platform,
    classes,
    shaderBuild,
    ...(fuzz ? { wgslFuzz: formatWgslFuzz(fuzz) } : {}),
  });
}

/** The warning a failed test puts in every report made after it. */
export function exactnessWarning(compiler: string, failure: string): string {
  const c = compiler.charAt(0).toUpperCase() + compiler.slice(1);
  return `${c} does not keep verify rows exact on this machine, so "exact" verdicts here are not a reference (the exactness self-test failed: ${failure}).`;
}

/** What a report records of a result (report.ts ExactnessSelfTestSummary). */
export function summarize(
  r: ExactnessSelfTestResult,
  shaderBuild: string,
  compiler: string,
  cached = false,
): ExactnessSelfTestSummary {
  const failed = r.checks.filter((c) => !c.ok).length;
  return {
    ok: r.ok,
    checks: r.checks.length,
    failed,
    cached,
    ms: Math.round(r.ms),
    kernelClasses: [...r.kernelClasses],
    shaderBuild,
    ...(r.kernel ? { kernel: r.kernel } : {}),
    ...(r.fault ? { fault: r.fault } : {}),
    ...(r.ok ? {} : { warning: exactnessWarning(compiler, r.failure ?? 'a verify block differs from its chain') }),
  };
}

/**
 * The self-test's summary for this adapter: from memory or the store when this adapter and build have one (and
 * no fault is injected, and `fresh` is not asked), else from a run now, which is then kept.
 */
export async function exactnessSelfTestFor(ctx: GpuContext, o: ExactnessGateOptions): Promise<ExactnessGateResult> {
  const classes = selfTestKernelClasses(ctx);
  const shaderBuild = await shaderBuildHash();
  const key = exactnessKey(ctx, classes, shaderBuild);
  const cacheable = o.fault === undefined;
  if (cacheable && !o.fresh) {
    const have = memory.get(key) ?? (await storedSummary(o.store, key));
    if (have) {
      memory.set(key, have);
      return { summary: { ...have, cached: true } };
    }
  }
  const result = await runExactnessSelfTest(ctx, {
    classes,
    fault: o.fault,
    onProgress: o.onProgress,
    onCheck: o.onCheck,
    cancel: o.cancel,
  });
  const summary = summarize(result, shaderBuild, o.compiler);
  if (cacheable) {
    memory.set(key, summary);
    await o.store?.set(key, summary);
  }
  return { summary, result };
}

/** A stored summary, if it is one (a store written by another version may hold anything). */
async function storedSummary(
  store: ExactnessStore | undefined,
  key: string,
): Promise<ExactnessSelfTestSummary | undefined> {
  const x = await store?.get(key);
  if (x === undefined || exactnessSelfTestProblems(x).length > 0) return undefined;
  return x as ExactnessSelfTestSummary;
}

/** Forgets the results kept in memory (tests). */
export function forgetExactnessResults(): void {
  memory.clear();
}
