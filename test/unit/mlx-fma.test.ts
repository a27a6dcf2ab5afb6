/**
 * fmaF32 (src/reference/mlx-orders.ts), the CPU's a * b + c rounded once that the +fma MLX policies' kernels
 * are compared with, against exact integer arithmetic: a, b and c as integers times powers of two, the sum
 * formed exactly with BigInt and rounded to float32 by hand (ties to even, subnormals included).
 */
import { describe, expect, it } from 'vitest';
import { fmaF32 } from '../../src/reference/mlx-orders.ts';

/** A finite float64 as [m, e] with value m 2^e (m a BigInt). */
function exact(x: number): [bigint, number] {
  const u = new BigUint64Array(new Float64Array([x]).buffer)[0];
  const e = Number((u >> 52n) & 0x7ffn);
  const frac = u & ((1n << 52n) - 1n);
  const m = e === 0 ? frac : frac | (1n << 52n);
  return [u >> 63n ? -m : m, e === 0 ? -1074 : e - 1075];
}

/** a b + c rounded to float32, nearest, ties to even (the sign of an exact zero is left aside). */
function fmaExact(a: number, b: number, c: number): number {
  const [ma, ea] = exact(a);
  const [mb, eb] = exact(b);
  const [mc, ec] = exact(c);
  const e0 = Math.min(ea + eb, ec);
  let m = ((ma * mb) << BigInt(ea + eb - e0)) + (mc << BigInt(ec - e0));
  if (m === 0n) return 0;
  const negative = m < 0n;
  if (negative) m = -m;
  const lead = m.toString(2).length - 1 + e0; // exponent of the leading bit
  const ulp = Math.max(lead, -126) - 23; // float32 spacing there (subnormals: 2^-149)
  let q: bigint;
  if (ulp <= e0) q = m << BigInt(e0 - ulp);
  else {
    const sh = BigInt(ulp - e0);
    q = m >> sh;
    const rest = m - (q << sh);
    const half = 1n << (sh - 1n);
    if (rest > half || (rest === half && (q & 1n) === 1n)) q += 1n;
  }
  const v = Number(q) * 2 ** ulp;
  return Math.fround(negative ? -v : v);
}

describe('fmaF32 == a * b + c rounded once', () => {
  it('on random, cancelling and halfway triples', () => {
    let s = 0x9e3779b9;
    const next = () => {
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      return s / 2 ** 32;
    };
    const f = Math.fround;
    const anyF32 = () => f((next() < 0.5 ? -1 : 1) * (1 + next()) * 2 ** Math.floor(next() * 60 - 30));
    let checked = 0;
    let twice = 0;
    const check = (a: number, b: number, c: number) => {
      const got = fmaF32(a, b, c);
      const want = fmaExact(a, b, c);
      if (got !== want) expect.fail(`fmaF32(${a}, ${b}, ${c}) = ${got}, exact ${want}`);
      if (want !== f(f(a * b) + c)) twice++;
      checked++;
    };
    for (let i = 0; i < 40000; i++) {
      const [a, b, c] = [anyF32(), anyF32(), anyF32()];
      check(a, b, c);
      check(a, b, f(-a * b)); // the product's own rounding error
      check(a, b, f(-a * b * (1 + (next() - 0.5) * 1e-6)));
      // a b within a few units of 2^-48 |a b| of half an ulp of c, and exactly half
      const half = Math.abs(c) * 2 ** -24;
      const near = f(half * (1 + (Math.floor(next() * 5) - 2) * 2 ** -23));
      const one = f((1 + (Math.floor(next() * 5) - 2) * 2 ** -23) * (next() < 0.5 ? 1 : -1));
      check(near, one, c);
      check(near, f(one * 2), c);
      check(f(half), next() < 0.5 ? 1 : -1, c);
      check(f(Math.floor(next() * 16) * 2 ** (4 * Math.floor(next() * 4))), a, c); // a masked code times x
      check(f(2 ** -140 * (1 + next())), f(1 + next()), f(2 ** -135 * (next() - 0.5))); // subnormal results
    }
    console.log(`fmaF32: ${checked} triples exact; ${twice} differ from two roundings`);
    expect(twice).toBeGreaterThan(checked / 10);
  });
});
