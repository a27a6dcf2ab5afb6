/**
 * What src/cli/launch.mjs holds back from the CLI's stderr without --verbose: Dawn's warnings, as Dawn prints them
 * (the text below is Dawn's own output on lavapipe, and on a machine whose Vulkan ICD failed to load), and nothing
 * else: the CLI's lines and Dawn's uncaptured validation errors pass whole and in order, however the pipe cuts them.
 */
import { describe, expect, it } from 'vitest';
import { createChatterFilter } from '../../src/cli/stderr-filter.mjs';

const DAWN_LIMITS =
  'Warning: maxDynamicUniformBuffersPerPipelineLayout artificially reduced from 1000000 to 16 to fit dynamic offset allocation limit.\n' +
  'Warning: maxDynamicStorageBuffersPerPipelineLayout artificially reduced from 1000000 to 16 to fit dynamic offset allocation limit.\n';
const DAWN_LOADER =
  "Warning: loader_scanned_icd_add: Attempt to retrieve either 'vkGetInstanceProcAddr' or 'vk_icdGetInstanceProcAddr' from ICD /lib/x86_64-linux-gnu/libz.so.1 failed.\n" +
  'Warning: vkCreateInstance: Found no drivers!\n' +
  'Warning: vkCreateInstance failed with VK_ERROR_INCOMPATIBLE_DRIVER\n' +
  '    at CheckVkSuccessImpl (/home/runner/work/node-webgpu/node-webgpu/third_party/dawn/src/dawn/native/vulkan/VulkanError.cpp:106)\n' +
  '\n';
const CLI =
  '[probe] draw 0 of draws 0–3 (prompt 8 tokens): prefill\n[probe] draw 0 of draws 0–3 (prompt 8 tokens): chain\n';
const VALIDATION =
  'validation:\nBuffer size (1024000002048) exceeds the max buffer size limit (4294967295).\n' +
  ' - While calling [Device].CreateBuffer([BufferDescriptor ""k.5""]).\n';

function filtered(text: string, chunk: number): string {
  let out = '';
  const f = createChatterFilter((t) => {
    out += t;
  });
  for (let i = 0; i < text.length; i += chunk) f.push(text.slice(i, i + chunk));
  f.end();
  return out;
}

describe("the CLI's stderr without --verbose", () => {
  it("drops Dawn's warnings with their source lines, keeps everything else in order", () => {
    const text = `${DAWN_LOADER}${DAWN_LIMITS}${CLI}${VALIDATION}error: the end`;
    for (const chunk of [1, 7, 64, text.length])
      expect(filtered(text, chunk), `chunks of ${chunk}`).toBe(`${CLI}${VALIDATION}error: the end`);
  });

  it('a blank line that does not close a warning passes', () => {
    expect(filtered(`${CLI}\n${CLI}`, 5)).toBe(`${CLI}\n${CLI}`);
  });
});
