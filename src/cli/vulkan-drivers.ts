/**
 * Which Vulkan drivers Dawn can find in Node on Linux, read the way the Vulkan loader reads them: the
 * ICD manifests (JSON files naming a driver library) listed by VK_DRIVER_FILES or, older,
 * VK_ICD_FILENAMES, else those in the standard icd.d folders. The CLI checks this before it asks Dawn
 * for an adapter: without a driver it takes the lavapipe scripts/provision-webgpu.sh provisioned
 * (software-adapter.ts), and without that a machine gets one message that names what is missing and
 * the script, instead of Dawn's own loader errors (which Dawn prints to stderr itself;
 * --verbose / RINGSIDE_VERBOSE=1 lets Dawn try anyway and shows them).
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface VulkanDrivers {
  /** The variable that chose the manifests (VK_DRIVER_FILES or VK_ICD_FILENAMES) and its value; undefined: the standard folders. */
  variable?: { name: string; value: string };
  /** Folders searched when no variable chose the manifests. */
  searched: string[];
  /** Manifests whose driver library exists (or is a bare name the dynamic linker resolves). */
  usable: string[];
  /** Manifests that exist but cannot load, with why. */
  unusable: { manifest: string; why: string }[];
}

/** The standard ICD folders of the Vulkan loader on Linux (XDG config and data directories, /etc). */
export function standardIcdFolders(env: NodeJS.ProcessEnv = process.env): string[] {
  const split = (v: string | undefined, dflt: string) => (v?.length ? v : dflt).split(':').filter(Boolean);
  const home = env.HOME ?? os.homedir();
  const dirs = [
    ...split(env.XDG_CONFIG_DIRS, '/etc/xdg'),
    '/etc',
    env.XDG_DATA_HOME || path.join(home, '.local/share'),
    ...split(env.XDG_DATA_DIRS, '/usr/local/share:/usr/share'),
  ];
  return [...new Set(dirs.map((d) => path.join(d, 'vulkan/icd.d')))];
}

function manifestsIn(entry: string): string[] {
  try {
    if (statSync(entry).isDirectory())
      return readdirSync(entry)
        .filter((f) => f.endsWith('.json'))
        .sort()
        .map((f) => path.join(entry, f));
    return [entry];
  } catch {
    return [];
  }
}

/** Why a manifest cannot give a driver (undefined: it can, as far as files tell). */
function manifestProblem(manifest: string): string | undefined {
  let lib: unknown;
  try {
    lib = (JSON.parse(readFileSync(manifest, 'utf8')) as { ICD?: { library_path?: unknown } }).ICD?.library_path;
  } catch (e) {
    return `not a readable ICD manifest (${(e as Error).message})`;
  }
  if (typeof lib !== 'string' || lib === '') return 'no ICD.library_path in it';
  if (!lib.includes('/')) return undefined; // a bare name: the dynamic linker searches for it
  const file = path.resolve(path.dirname(manifest), lib);
  return existsSync(file) ? undefined : `its driver library ${file} does not exist`;
}

/** The Vulkan drivers the loader would consider, with the environment `env`. */
export function findVulkanDrivers(env: NodeJS.ProcessEnv = process.env): VulkanDrivers {
  const name = env.VK_DRIVER_FILES ? 'VK_DRIVER_FILES' : env.VK_ICD_FILENAMES ? 'VK_ICD_FILENAMES' : undefined;
  const variable = name ? { name, value: env[name]! } : undefined;
  const searched = variable ? [] : standardIcdFolders(env);
  const entries = variable ? variable.value.split(':').filter(Boolean) : searched;
  // VK_ADD_DRIVER_FILES adds manifests to whichever set is used.
  if (env.VK_ADD_DRIVER_FILES) entries.push(...env.VK_ADD_DRIVER_FILES.split(':').filter(Boolean));
  const usable: string[] = [];
  const unusable: VulkanDrivers['unusable'] = [];
  for (const m of entries.flatMap(manifestsIn)) {
    if (!existsSync(m)) continue;
    const why = manifestProblem(m);
    if (why) unusable.push({ manifest: m, why });
    else usable.push(m);
  }
  return { variable, searched, usable, unusable };
}

/** What to run or install (the same for every no-driver case). */
const REMEDY =
  "On Linux without a GPU, run `bash scripts/provision-webgpu.sh` once: it puts Mesa's lavapipe, a software Vulkan " +
  'driver, in .cache/lavapipe, where the CLI finds it by itself while VK_ICD_FILENAMES and VK_DRIVER_FILES are unset ' +
  '(`eval "$(bash scripts/provision-webgpu.sh)"` also points them at it in this shell, as the tests need). ' +
  'With a GPU, install its Vulkan driver (its ICD manifest goes to /usr/share/vulkan/icd.d).';

/** One message for "Dawn found no adapter" in Node on Linux: which driver is missing, and what to do. */
export function noVulkanDriverMessage(d: VulkanDrivers, dawnAsked: boolean): string {
  const bad = d.unusable.map((u) => `${u.manifest}: ${u.why}`).join('; ');
  const none = d.unusable.length ? `no usable ICD manifest (${bad})` : 'no ICD manifest that exists';
  const from = d.variable
    ? `${d.variable.name}=${d.variable.value}`
    : `the Vulkan ICD folders (${d.searched.join(', ')})`;
  let what: string;
  if (d.usable.length === 0) {
    what = d.variable
      ? `Dawn (npm webgpu) has no Vulkan driver to use: ${from} names ${none}.`
      : `Dawn (npm webgpu) has no Vulkan driver to use: VK_ICD_FILENAMES is unset and ${from} hold ${none}.`;
  } else {
    what =
      `Dawn (npm webgpu) found no usable adapter through the Vulkan driver(s) ${d.usable.join(', ')} (from ${from}): ` +
      "the driver failed to start or is too old for Dawn (Debian 12's own lavapipe is).";
  }
  const verbose = dawnAsked
    ? "Dawn's own messages are above."
    : 'Rerun with --verbose (or RINGSIDE_VERBOSE=1) to let Dawn try anyway and show its own messages.';
  return `No WebGPU adapter. ${what} ${REMEDY} ${verbose}`;
}
