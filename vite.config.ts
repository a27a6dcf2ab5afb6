import { execFileSync } from 'node:child_process';
import { defineConfig } from 'vitest/config';

/** The commit the reports name (src/parity/version.ts APP_COMMIT): HEAD, "+changes" with uncommitted edits; '' outside git. */
function gitCommit(): string {
  try {
    const git = (...args: string[]) =>
      execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    const head = git('rev-parse', '--short=12', 'HEAD').trim();
    return git('status', '--porcelain', '--untracked-files=no').trim() ? `${head}+changes` : head;
  } catch {
    return '';
  }
}

// One config for the app (vite) and the tests (vitest).
// - The page and its Worker are ES modules; WGSL files are imported with `?raw`.
// - Tests run in Node. GPU tests use Dawn (npm `webgpu`) on the adapter that scripts/test.sh
//   provisions; browser tests drive Debian's Chromium with playwright-core against a vite server.
export default defineConfig({
  server: { host: '127.0.0.1' },
  define: { __RINGSIDE_COMMIT__: JSON.stringify(gitCommit()) },
  worker: { format: 'es' },
  // Pre-bundle the Worker's dependencies too, so `npm start` does not discover them mid-run.
  optimizeDeps: { entries: ['index.html', 'src/worker/engine-worker.ts'] },
  build: { target: 'es2022', outDir: 'dist' },
  test: {
    include: ['test/**/*.test.ts'],
    environment: 'node',
    // A hang guard, not a timing: the first test of a file that builds a model compiles the engine's pipelines,
    // minutes on llvmpipe with a cold shader cache (the GPU kernel class's matmul_coop.wgsl in particular).
    testTimeout: 300_000,
    hookTimeout: 180_000,
    // GPU work on a 2-core CPU adapter: run files one at a time so timings and memory stay sane.
    fileParallelism: false,
    pool: 'forks',
  },
});
