/**
 * Where `probe` and `trace` write their JSON report when --report is absent: reports/<command>-YYYYMMDD-HHMMSS.json
 * under the folder the command was typed in (relative, as every path the CLI takes). A report is the evidence of a
 * run, to keep and to open in the page: a name stamped with the run's local start time never replaces an earlier
 * one, and one reports/ folder keeps them together (the repository ignores it).
 */
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';

export const REPORTS_FOLDER = 'reports';

const two = (n: number) => String(n).padStart(2, '0');

/** reports/<command>-YYYYMMDD-HHMMSS.json for `now`, with -2, -3, ... when a file of that name exists already. */
export function defaultReportPath(command: string, now = new Date(), cwd = process.cwd()): string {
  const stamp = `${now.getFullYear()}${two(now.getMonth() + 1)}${two(now.getDate())}-${two(now.getHours())}${two(now.getMinutes())}${two(now.getSeconds())}`;
  for (let i = 1; ; i++) {
    const file = path.join(REPORTS_FOLDER, `${command}-${stamp}${i > 1 ? `-${i}` : ''}.json`);
    if (!existsSync(path.resolve(cwd, file))) return file;
  }
}

/** Makes the folder of `file` when it is the default reports/ folder (a --report path's folder must exist already). */
export function ensureReportFolder(file: string, cwd = process.cwd()): void {
  if (path.dirname(file) === REPORTS_FOLDER) mkdirSync(path.resolve(cwd, REPORTS_FOLDER), { recursive: true });
}
