/** The command line as a test runs it: `npm run cli`, with its exit code and output as a result, not a throw. */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);
const REPO = process.cwd();

/**
 * `npm run cli -- args` typed in folder `cwd` (the repository by default; npm's --prefix finds the package from
 * elsewhere, as a user's shell would), with `env` added to the environment: exit code and stdout + stderr.
 */
export async function cliRun(
  args: string[],
  cwd = REPO,
  timeoutMs = 300_000,
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number; out: string }> {
  try {
    const r = await run('npm', ['--prefix', REPO, 'run', '-s', 'cli', '--', ...args], {
      cwd,
      timeout: timeoutMs,
      env: { ...process.env, ...env },
    });
    return { code: 0, out: r.stdout + r.stderr };
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string };
    return { code: x.code, out: x.stdout + x.stderr };
  }
}
