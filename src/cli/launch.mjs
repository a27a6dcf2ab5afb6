// The entry of `npm run cli`: starts the CLI (src/cli/main.ts) in a child Node with the TypeScript loader and the
// WGSL import hooks, for two things only a parent process can do:
//  - hold back Dawn's routine warnings (stderr-filter.mjs), which Dawn writes to stderr itself, unless --verbose
//    or RINGSIDE_VERBOSE=1;
//  - on Linux, give the child the LD_LIBRARY_PATH that the lavapipe provisioned by scripts/provision-webgpu.sh needs
//    (libraries the script copied beside the driver when the system lacked them), which the dynamic linker reads
//    only when a process starts. The CLI then takes that driver by itself when no other is configured
//    (software-adapter.ts), so no shell needs the script's `eval`.
// Plain JavaScript, so that the parent starts in a fraction of the time the TypeScript loader takes.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { constants } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createChatterFilter } from './stderr-filter.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const args = process.argv.slice(2);
const verbose = args.includes('--verbose') || process.env.RINGSIDE_VERBOSE === '1';

const env = { ...process.env };
const lavapipe = path.join(root, '.cache/lavapipe');
if (process.platform === 'linux' && existsSync(lavapipe)) {
  // appended: the system's own libraries keep precedence; the folder only adds what the system lacks
  const dirs = (env.LD_LIBRARY_PATH ?? '').split(':').filter(Boolean);
  if (!dirs.includes(lavapipe)) env.LD_LIBRARY_PATH = [...dirs, lavapipe].join(':');
}

// The commit the reports name (src/parity/version.ts APP_COMMIT), read as vite.config.ts reads it for the page.
try {
  const git = (...a) =>
    execFileSync('git', ['-C', root, ...a], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  const head = git('rev-parse', '--short=12', 'HEAD');
  env.RINGSIDE_COMMIT = git('status', '--porcelain', '--untracked-files=no') ? `${head}+changes` : head;
} catch {
  // not a git checkout: the reports name no commit
}

const child = spawn(
  process.execPath,
  [
    ...process.execArgv,
    '--import',
    import.meta.resolve('tsx'),
    '--import',
    pathToFileURL(path.join(root, 'scripts/wgsl-hooks.mjs')).href,
    path.join(here, 'main.ts'),
    ...args,
  ],
  { env, stdio: ['inherit', 'inherit', verbose ? 'inherit' : 'pipe'] },
);

if (child.stderr) {
  const filter = createChatterFilter((text) => process.stderr.write(text));
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk) => filter.push(chunk));
  child.stderr.on('end', () => filter.end());
}

// A signal sent to this process alone (a timeout, a supervisor) goes on to the CLI, which decides how to stop; a
// Ctrl-C reaches both, as the terminal signals the whole process group.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal));

child.on('error', (e) => {
  process.stderr.write(`error: could not start the CLI (${e.message})\n`);
  process.exit(1);
});
// 'close' comes after the child's stderr has ended, so every line is written by then
child.on('close', (code, signal) => process.exit(code ?? 128 + (constants.signals[signal] ?? 0)));
