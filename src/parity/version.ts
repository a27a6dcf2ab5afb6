import pkg from '../../package.json';

/** The app version recorded in every report (one source: package.json). */
export const APP_VERSION: string = pkg.version;
