import pkg from '../../package.json';

/** The app version recorded in every report (one source: package.json). */
export const APP_VERSION: string = pkg.version;

/** Defined by vite.config.ts for the page and the tests; not defined when the command line runs under tsx. */
declare const __RINGSIDE_COMMIT__: string | undefined;

/**
 * The git commit the page was served or built from ("+changes" after it when the tree had uncommitted changes), as
 * vite.config.ts reads it; undefined where it is not known (the command line, a copy outside git).
 */
export const APP_COMMIT: string | undefined =
  typeof __RINGSIDE_COMMIT__ === 'string' && __RINGSIDE_COMMIT__ !== '' ? __RINGSIDE_COMMIT__ : undefined;
