/**
 * The software adapter the CLI falls back to on Linux: Mesa's lavapipe, where scripts/provision-webgpu.sh leaves it
 * (.cache/lavapipe under the repository, an ICD manifest lvp_icd.json beside the driver). With it the CLI runs on a
 * machine without a GPU in any shell, without the script's `eval` first.
 *
 * How it is taken: the Vulkan loader reads VK_ICD_FILENAMES at each vkCreateInstance, and Dawn creates its Vulkan
 * instance when it is first asked for an adapter, so setting the variable in this process before that suffices (a
 * second Dawn instance made after a failed request reads it too). The one thing that must be set before Node starts
 * is LD_LIBRARY_PATH, for libraries the driver needs that the script copied beside it when the system lacked them:
 * src/cli/launch.mjs, which starts the CLI, appends that folder.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { findVulkanDrivers } from './vulkan-drivers.ts';

export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Where scripts/provision-webgpu.sh puts lavapipe, relative to the repository. */
export const LAVAPIPE_FOLDER = '.cache/lavapipe';

/** The manifest of the provisioned lavapipe, when it is there and names a driver library that exists. */
export function cachedLavapipe(root = REPO_ROOT): string | undefined {
  const icd = path.join(root, LAVAPIPE_FOLDER, 'lvp_icd.json');
  if (!existsSync(icd)) return undefined;
  return findVulkanDrivers({ VK_ICD_FILENAMES: icd }).usable[0];
}

/**
 * Points the Vulkan loader of this process at `icd` for every Vulkan instance created from now on. Called only where
 * no variable chose the drivers; VK_DRIVER_FILES is removed because the loader lets it win over VK_ICD_FILENAMES
 * even when it is set to nothing.
 */
export function useLavapipe(icd: string): void {
  delete process.env.VK_DRIVER_FILES;
  process.env.VK_ICD_FILENAMES = icd;
}

/** The line that says which adapter the CLI took by itself, and why. */
export function softwareAdapterLine(adapter: string, icd: string, why: string): string {
  return `adapter: ${adapter} (lavapipe, the software driver scripts/provision-webgpu.sh put in ${path.dirname(icd)}: ${why})`;
}
