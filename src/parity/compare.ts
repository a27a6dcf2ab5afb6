import type { RowDiff } from './report.ts';

/**
 * Compares two rows of values in the precision's storage format: f32 rows compare all 4 bytes of
 * each entry; bf16 rows (f32 values already rounded to bf16) compare the 2 bytes a bf16 tensor
 * would store (the upper halves). ULP distances are measured in that same format.
 */
export type Storage = 'f32' | 'bf16';

/** Monotonic integer key of an f32 bit pattern (so that ULP distance is a subtraction). */
function orderedBits(u: number): number {
  return u & 0x80000000 ? -(u & 0x7fffffff) : u;
}

export function compareRows(a: Float32Array, b: Float32Array, storage: Storage, position: number): RowDiff {
  if (a.length !== b.length) throw new Error(`rows of different widths (${a.length} vs ${b.length})`);
  const ua = new Uint32Array(a.buffer, a.byteOffset, a.length);
  const ub = new Uint32Array(b.buffer, b.byteOffset, b.length);
  const bytesPer = storage === 'f32' ? 4 : 2;
  const shift = storage === 'f32' ? 0 : 16;
  let bytesDiffering = 0;
  let maxAbs = 0;
  let maxUlp = 0;
  let num = 0;
  let den = 0;
  for (let i = 0; i < a.length; i++) {
    const x = ua[i] >>> shift;
    const y = ub[i] >>> shift;
    if (x !== y) {
      for (let k = 0; k < bytesPer; k++) if (((x >>> (8 * k)) & 0xff) !== ((y >>> (8 * k)) & 0xff)) bytesDiffering++;
      const ulp = Math.abs(orderedBits(x << shift) - orderedBits(y << shift)) / 2 ** shift;
      if (ulp > maxUlp) maxUlp = ulp;
    }
    const d = Math.abs(a[i] - b[i]);
    if (d > maxAbs || Number.isNaN(d)) maxAbs = Number.isNaN(d) ? Infinity : d;
    num += (a[i] - b[i]) ** 2;
    den += a[i] * a[i];
  }
  return { position, bytesDiffering, bytesTotal: a.length * bytesPer, maxAbs, maxUlp, nmse: den > 0 ? num / den : num };
}
