/**
 * Every GPU failure the user can hit becomes a GpuError with a `kind` the UI and CLI can switch on
 * and a message that says what happened and what to do about it.
 */
export type GpuErrorKind =
  | 'no-webgpu' // navigator.gpu missing (browser without WebGPU, or Node without Dawn)
  | 'no-adapter' // requestAdapter() gave null (no driver, blocked GPU, no software adapter)
  | 'device-failed' // requestDevice() rejected (limits or features the adapter cannot give)
  | 'device-lost' // the device went away during work (driver reset, tab backgrounded, OOM kill)
  | 'out-of-memory' // an allocation or submission ran out of GPU memory
  | 'validation' // a WebGPU validation error: a bug in Ringside, reported with the op that caused it
  | 'limits' // a buffer, binding or dispatch larger than the adapter (or a kernel) allows
  | 'unsupported'; // a checkpoint variant the GPU kernels do not run yet (a bit width, a dtype, a layout)

const HINTS: Record<GpuErrorKind, string> = {
  'no-webgpu':
    'Use Chrome/Edge 113+ or Safari 26+ on macOS. In Chrome check chrome://gpu ("WebGPU: Hardware accelerated"); ' +
    'in Node the npm package "webgpu" must be installed.',
  'no-adapter':
    'The browser exposes WebGPU but found no usable adapter. Check chrome://gpu, enable hardware acceleration, ' +
    'or on Linux provide a Vulkan driver (scripts/provision-webgpu.sh sets up Mesa lavapipe).',
  'device-failed': 'The adapter refused the requested limits or features; the message above names them.',
  'device-lost': 'Reload the page (or rerun the command). If it repeats, the model may be too large for this GPU.',
  'out-of-memory': 'Close other GPU-heavy tabs/apps, or use a smaller checkpoint or a shorter context.',
  validation: 'This is a bug in Ringside; please attach the JSON report.',
  // No generic sentence: a limit is met by the checkpoint (a weight row over the binding size), by the run's settings
  // (a context whose attention scratch is over it) or by a kernel's own cap, and only the raiser knows which; a
  // single "this checkpoint needs a larger buffer" was false for most of them. Each raiser's message says what is
  // over which limit and what to change, or passes that as its hint.
  limits: '',
  unsupported: "Ringside's GPU engine does not run this variant yet; convert the checkpoint to one it runs.",
};

export class GpuError extends Error {
  override readonly name = 'GpuError';
  /** `hint` replaces the kind's browser-oriented hint where the caller knows better (the CLI in Node). */
  constructor(
    readonly kind: GpuErrorKind,
    /** What happened, without the hint. */
    readonly detail: string,
    hint: string = HINTS[kind],
  ) {
    super(hint ? `${detail} ${hint}` : detail);
  }
}

export function isGpuError(e: unknown): e is GpuError {
  return e instanceof Error && (e as { name?: string }).name === 'GpuError';
}
