/**
 * Which exact affine kernel the engine runs (src/model/ops.ts affineKernel / engineKernels, what the
 * bench reports): by kernel class, phase and linear, never by M. The GPU tests run the kernels.
 */
import { describe, expect, it } from 'vitest';
import { affineKernel, engineKernels, type LinearShape } from '../../src/model/ops.ts';

const lin = (bits: number, groupSize: number, inFeatures = 3840): LinearShape => ({
  kind: 'affine',
  bits,
  groupSize,
  inFeatures,
});

describe("the engine's affine kernels", () => {
  it('per kernel class: coop on GPUs and lanes on software adapters for steps, tile for prefill', () => {
    expect(engineKernels('gpu')).toEqual({ step: 'coop', prefill: 'tile' });
    expect(engineKernels('software')).toEqual({ step: 'lanes', prefill: 'tile' });
  });

  it('per linear: what a kernel cannot run falls back to affine (coop to lanes where lanes fits)', () => {
    expect(affineKernel('gpu', lin(8, 32), 3840, false)).toBe('coop');
    expect(affineKernel('gpu', lin(4, 128), 3840, false)).toBe('lanes'); // coop holds groups of 32 or 64
    expect(affineKernel('gpu', lin(2, 64), 3840, false)).toBe('affine');
    expect(affineKernel('software', lin(4, 64), 3842, false)).toBe('affine'); // x rows not vec4-aligned
    expect(affineKernel('software', lin(3, 64), 3840, true)).toBe('affine');
    expect(affineKernel('gpu', { kind: 'dense' }, 3840, false)).toBe('affine');
  });

  it('a kernel asked for runs where the linear fits it, else affine', () => {
    expect(affineKernel('software', lin(4, 64), 3840, false, 'coop')).toBe('coop');
    expect(affineKernel('gpu', lin(4, 128), 3840, false, 'coop')).toBe('affine');
    expect(affineKernel('gpu', lin(4, 64), 3840, true, 'lanes')).toBe('lanes');
    expect(affineKernel('gpu', lin(8, 64), 3840, false, 'affine')).toBe('affine');
  });
});
