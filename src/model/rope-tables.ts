import type { RopeSpec } from '../format/config.ts';
import { uploadBuffer } from '../gpu/buffers.ts';
import type { RopeTable } from './ops.ts';
import { ropeCosSin, ropeFrequencies, type RopePrecision } from '../numerics/rope-angles.ts';

/**
 * cos/sin tables for rotate-half RoPE, computed once per (theta, head dim, partial factor) on the
 * CPU by src/numerics/rope-angles.ts (float32 steps, as transformers and MLX compute them; the CPU
 * reference uses the same module) and uploaded:
 * both arms read the very same numbers for a position. Zero-frequency pairs of proportional RoPE
 * are the identity, so the kernel skips them. `precision`: the angles' arithmetic, as the family's
 * reference computes them (Gemma 4: float32 steps; Qwen3.5: float64, rounded once to f32).
 */
export function ropeTable(
  device: GPUDevice,
  spec: RopeSpec,
  d: number,
  positions: number,
  precision: RopePrecision = 'f32',
): RopeTable {
  const half = d / 2;
  const freq = ropeFrequencies(d, spec, precision);
  const rotPairs = freq.rotatingPairs;
  const cos = new Float32Array(positions * half);
  const sin = new Float32Array(positions * half);
  for (let p = 0; p < positions; p++) {
    const t = ropeCosSin(freq, p);
    cos.set(t.cos, p * half);
    sin.set(t.sin, p * half);
  }
  return {
    cos: uploadBuffer(device, cos, `rope.cos.${spec.theta}.${d}`),
    sin: uploadBuffer(device, sin, `rope.sin.${spec.theta}.${d}`),
    half,
    rotPairs,
  };
}

/** One table per distinct (theta, d, partial) among the layers. */
export class RopeTables {
  private readonly tables = new Map<string, RopeTable>();
  constructor(
    private readonly device: GPUDevice,
    readonly positions: number,
  ) {}
  get(rope: RopeSpec, d: number): RopeTable {
    const key = `${rope.theta}/${d}/${rope.partialRotary}`;
    let t = this.tables.get(key);
    if (!t) {
      t = ropeTable(this.device, rope, d, this.positions);
      this.tables.set(key, t);
    }
    return t;
  }
  destroy(): void {
    for (const t of this.tables.values()) {
      t.cos.destroy();
      t.sin.destroy();
    }
  }
}
