import { describe, expect, it } from 'vitest';
import { checkCoopTuning } from '../../src/gpu/coop-tuning.ts';
import { coopShape } from '../../src/model/coop-shape.ts';

/** A device that allows workgroups of 512 (the MLP's 4-bit linears take them by the rule). */
const LIMITS = {
  maxComputeInvocationsPerWorkgroup: 1024,
  maxComputeWorkgroupSizeX: 1024,
  maxComputeWorkgroupStorageSize: 32768,
};
const MLP_GATE = { outFeatures: 15360, inFeatures: 3840, bits: 4 };
const O_PROJ = { outFeatures: 3840, inFeatures: 4096, bits: 4 };

/** The coop matvec's shape: the rules, or a kernel cache's tuning, never a setting of the process. */
describe('coop tuning', () => {
  it('the rules without a tuning; the tuning where given, each field on its own', () => {
    expect(coopShape(LIMITS, MLP_GATE, 'main')).toEqual({ WG: 512, T: 16, R: 4 });
    expect(coopShape(LIMITS, MLP_GATE, 'gate_up')).toEqual({ WG: 512, T: 8, R: 2 });
    expect(coopShape(LIMITS, O_PROJ, 'main')).toEqual({ WG: 256, T: 16, R: 1 });
    expect(coopShape(LIMITS, O_PROJ, 'main', { threads: 8, features: 2 })).toEqual({ WG: 256, T: 8, R: 2 });
    expect(coopShape(LIMITS, MLP_GATE, 'main', { workgroup: 256 })).toEqual({ WG: 256, T: 16, R: 4 });
    // gate_up serves two features of each matrix: a tuning of 4 still gives it 2
    expect(coopShape(LIMITS, MLP_GATE, 'gate_up', { features: 4 }).R).toBe(2);
    // a device without 512 keeps 256 whatever the tuning asks
    const small = { ...LIMITS, maxComputeInvocationsPerWorkgroup: 256, maxComputeWorkgroupSizeX: 256 };
    expect(coopShape(small, O_PROJ, 'main', { workgroup: 512 }).WG).toBe(256);
    // one call's tuning leaves the next call's rules alone
    expect(coopShape(LIMITS, O_PROJ, 'main')).toEqual({ WG: 256, T: 16, R: 1 });
  });

  it('refuses shapes the kernel cannot run, naming the value', () => {
    expect(() => checkCoopTuning({ threads: 32 })).toThrow('coop threads per feature must be 8 or 16, not 32');
    expect(() => checkCoopTuning({ features: 3 })).toThrow('coop features per invocation must be 1, 2 or 4, not 3');
    expect(() => checkCoopTuning({ workgroup: 1024 })).toThrow('coop workgroups must be 256 or 512, not 1024');
    expect(() => checkCoopTuning({ threads: 8, features: 4, workgroup: 512 })).not.toThrow();
  });
});
