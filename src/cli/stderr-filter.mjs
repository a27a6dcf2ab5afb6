// Holds back Dawn's routine messages from the CLI's stderr (src/cli/launch.mjs pipes the CLI's stderr through it
// unless --verbose). Dawn (npm webgpu) writes its log to the process's stderr itself, with fprintf, where Node cannot
// intercept it, so only the parent process that reads the pipe can.
//
// What is held back: Dawn's warnings, printed as a line "Warning: ..." followed, when it carries a source location,
// by indented "    at ..." lines and one blank line. On every adapter that Dawn clamps (lavapipe, SwiftShader)
// they begin each command with "Warning: maxDynamicUniformBuffersPerPipelineLayout artificially reduced from 1000000
// to 16 to fit dynamic offset allocation limit." and its storage-buffer twin; when a Vulkan driver fails they are
// the loader's "Warning: vkCreateInstance: Found no drivers!". None of them changes what a command computes, and
// when a command fails for want of an adapter the CLI's own message says what is missing and that --verbose shows
// Dawn's words. Everything else passes: the CLI's lines, and Dawn's uncaptured validation errors ("validation: ..."),
// which mean a bug.

/** True for the first line of a Dawn warning. */
export function isDawnWarning(line) {
  return line.startsWith('Warning: ');
}

/**
 * A line filter over a text stream: `push` chunks as they come, `end` once; lines that are not Dawn's warnings go to
 * `write` whole (with their newline), in order.
 */
export function createChatterFilter(write) {
  let pending = '';
  let inWarning = false;
  const line = (text) => {
    const bare = text.replace(/\r?\n$/, '');
    if (isDawnWarning(bare)) {
      inWarning = true;
      return;
    }
    if (inWarning && /^\s+at /.test(bare)) return;
    if (inWarning && bare === '') {
      inWarning = false; // the blank line that closes a warning with a location
      return;
    }
    inWarning = false;
    write(text);
  };
  return {
    push(chunk) {
      pending += chunk;
      for (let i = pending.indexOf('\n'); i >= 0; i = pending.indexOf('\n')) {
        line(pending.slice(0, i + 1));
        pending = pending.slice(i + 1);
      }
    },
    end() {
      if (pending) line(pending);
      pending = '';
    },
  };
}
