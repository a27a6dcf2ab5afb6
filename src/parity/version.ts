import pkg from '../../package.json';

/** The app version recorded in every report (one source: package.json). */
export const APP_VERSION: string = pkg.version;

/** Defined by vite.config.ts for the page and the tests; not defined when the command line runs under tsx. */
declare const __RINGSIDE_COMMIT__: string | undefined;

/** What src/cli/launch.mjs hands the command line (it reads git as vite.config.ts does). */
const envCommit = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env
  ?.RINGSIDE_COMMIT;

/**
 * The git commit the page was served or built from, or the command line run from ("+changes" after it when the tree
 * had uncommitted changes); undefined where it is not known (a copy outside git).
 */
export const APP_COMMIT: string | undefined =
  typeof __RINGSIDE_COMMIT__ === 'string' && __RINGSIDE_COMMIT__ !== ''
    ? __RINGSIDE_COMMIT__
    : envCommit
      ? envCommit
      : undefined;
