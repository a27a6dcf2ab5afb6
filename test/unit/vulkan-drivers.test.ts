/**
 * How the CLI finds Vulkan drivers in Node on Linux before asking Dawn (src/cli/vulkan-drivers.ts), and
 * the message without one: the driver and scripts/provision-webgpu.sh, never the browser's chrome://gpu.
 * test/gpu/errors.test.ts runs the CLI itself with a bad VK_ICD_FILENAMES.
 */
import { describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { findVulkanDrivers, noVulkanDriverMessage, standardIcdFolders } from '../../src/cli/vulkan-drivers.ts';

function icd(dir: string, name: string, libraryPath: string): string {
  mkdirSync(dir, { recursive: true });
  const f = path.join(dir, name);
  writeFileSync(
    f,
    JSON.stringify({ file_format_version: '1.0.0', ICD: { library_path: libraryPath, api_version: '1.3.0' } }),
  );
  return f;
}

describe('Vulkan drivers as the loader finds them', () => {
  const root = mkdtempSync(path.join(tmpdir(), 'ringside-icd-'));
  const lib = path.join(root, 'libvulkan_lvp.so');
  writeFileSync(lib, '');
  const good = icd(root, 'lvp_icd.json', lib);
  const relative = icd(path.join(root, 'rel'), 'rel_icd.json', './libmissing.so');
  const bare = icd(path.join(root, 'bare'), 'bare_icd.json', 'libvulkan_radeon.so');

  it('VK_ICD_FILENAMES: the files and folders it lists, manifests checked for their library', () => {
    const d = findVulkanDrivers({ VK_ICD_FILENAMES: `${good}:${path.join(root, 'rel')}:/nonexistent.json` });
    expect(d.variable).toEqual({
      name: 'VK_ICD_FILENAMES',
      value: `${good}:${path.join(root, 'rel')}:/nonexistent.json`,
    });
    expect(d.usable).toEqual([good]);
    expect(d.unusable).toEqual([
      { manifest: relative, why: `its driver library ${path.join(root, 'rel', 'libmissing.so')} does not exist` },
    ]);
    // a bare library name is the dynamic linker's to find: counted as usable
    expect(findVulkanDrivers({ VK_ICD_FILENAMES: bare }).usable).toEqual([bare]);
  });

  it('VK_DRIVER_FILES wins over VK_ICD_FILENAMES; VK_ADD_DRIVER_FILES adds', () => {
    expect(findVulkanDrivers({ VK_DRIVER_FILES: '/nonexistent.json', VK_ICD_FILENAMES: good }).usable).toEqual([]);
    expect(findVulkanDrivers({ VK_ICD_FILENAMES: '/nonexistent.json', VK_ADD_DRIVER_FILES: good }).usable).toEqual([
      good,
    ]);
  });

  it('unset: the standard icd.d folders of the XDG config and data directories and /etc', () => {
    const env = { HOME: '/home/u', XDG_DATA_DIRS: root };
    expect(standardIcdFolders(env)).toEqual([
      '/etc/xdg/vulkan/icd.d',
      '/etc/vulkan/icd.d',
      '/home/u/.local/share/vulkan/icd.d',
      path.join(root, 'vulkan/icd.d'),
    ]);
    expect(findVulkanDrivers(env).usable).toEqual([]);
    const placed = icd(path.join(root, 'vulkan/icd.d'), 'lvp_icd.json', lib);
    expect(findVulkanDrivers(env).usable).toEqual([placed]);
  });

  it('the message names the variable, the driver, the provisioning script and --verbose; not the browser', () => {
    const none = noVulkanDriverMessage(findVulkanDrivers({ VK_ICD_FILENAMES: '/nonexistent.json' }), false);
    expect(none).toMatch(
      /^No WebGPU adapter\. Dawn \(npm webgpu\) has no Vulkan driver to use: VK_ICD_FILENAMES=\/nonexistent\.json names no ICD manifest that exists\./,
    );
    expect(none).toMatch(
      /run `bash scripts\/provision-webgpu\.sh` once: .* in \.cache\/lavapipe, where the CLI finds it/,
    );
    expect(none).toMatch(/lavapipe/);
    expect(none).toMatch(/Rerun with --verbose \(or RINGSIDE_VERBOSE=1\)/);
    const broken = noVulkanDriverMessage(findVulkanDrivers({ VK_ICD_FILENAMES: relative }), true);
    expect(broken).toMatch(
      /names no usable ICD manifest \(.*rel_icd\.json: its driver library .*libmissing\.so does not exist\)/,
    );
    expect(broken).toMatch(/Dawn's own messages are above\.$/);
    const failed = noVulkanDriverMessage(findVulkanDrivers({ VK_ICD_FILENAMES: good }), true);
    expect(failed).toMatch(
      /found no usable adapter through the Vulkan driver\(s\) .*lvp_icd\.json \(from VK_ICD_FILENAMES=/,
    );
    for (const m of [none, broken, failed]) expect(m).not.toMatch(/chrome:\/\/gpu|browser/i);
  });
});
