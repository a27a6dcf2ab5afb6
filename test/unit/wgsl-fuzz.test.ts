import { readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseWgslFuzz } from '../../src/gpu/wgsl-fuzz/config.ts';
import { childExpressions, parseWgsl, W } from '../../src/gpu/wgsl-fuzz/parse.ts';
import { type FuzzMode, ModuleFuzzer } from '../../src/gpu/wgsl-fuzz/pipeline-source.ts';
import { shaderSource } from '../../src/gpu/shaders.ts';

/** The fuzzed source of `entry` for seeds 0..n-1 (module text as given). */
function sources(text: string, mode: FuzzMode, n = 48, entry = 'main'): { code: string; sites: number }[] {
  const m = new ModuleFuzzer('test.wgsl', text);
  return Array.from({ length: n }, (_, seed) => m.pipeline(mode, seed, `test.wgsl#${entry}`, entry));
}
const entry = (body: string) => `@compute @workgroup_size(1) fn main() { ${body} }`;

describe('RINGSIDE_WGSL_FUZZ values', () => {
  it('MODE:SEED and MODE:SEED:SHADER,... parse; anything else is refused, naming the variable', () => {
    expect(parseWgslFuzz('all:3')).toEqual({ mode: 'all', seed: 3 });
    expect(parseWgslFuzz('contract:0:attention.wgsl,rmsnorm.wgsl')).toEqual({
      mode: 'contract',
      seed: 0,
      only: ['attention.wgsl', 'rmsnorm.wgsl'],
    });
    for (const bad of [
      'all',
      'fast:1',
      'all:-1',
      'all:1.5',
      'all:x',
      'all:4294967296',
      'all:1:rmsnorm',
      'all:1:a.wgsl:2',
    ])
      expect(() => parseWgslFuzz(bad), bad).toThrow(/RINGSIDE_WGSL_FUZZ must be MODE:SEED/);
  });
});

describe('WGSL parsing with expression ranges', () => {
  it("every expression of every shader has a range that holds its operands, and a binary node's operator between them", () => {
    let binaries = 0;
    for (const f of readdirSync(new URL('../../shaders/', import.meta.url)).filter((n) => n.endsWith('.wgsl'))) {
      const mod = parseWgsl(shaderSource(f));
      const check = (e: W.Expression) => {
        const [s, t] = mod.range(e);
        // a bare `return;` gets an empty constructor from the library, where no token was consumed
        if (s >= t) {
          expect(e instanceof W.CreateExpr && !e.args?.length, f).toBe(true);
          return;
        }
        let at = s;
        for (const c of childExpressions(e)) {
          const [cs, ct] = mod.range(c);
          expect(cs >= at && ct <= t, `${f}: ${mod.source.slice(s, t)}`).toBe(true);
          at = ct;
        }
        if (e instanceof W.BinaryOperator) {
          binaries++;
          const between = mod.source.slice(mod.range(e.left)[1], mod.range(e.right)[0]);
          expect(between.replace(/\/\/[^\n]*/g, '').replace(/[\s()]/g, ''), `${f}: ${mod.source.slice(s, t)}`).toBe(
            e.operator,
          );
        }
        childExpressions(e).forEach(check);
      };
      const walk = (n: unknown): void => {
        if (!n || typeof n !== 'object') return;
        if (Array.isArray(n)) n.forEach(walk);
        else if (n instanceof W.Expression) check(n);
        else if (n instanceof W.Statement && !(n instanceof W.Type))
          for (const [k, v] of Object.entries(n)) if (k !== 'calls') walk(v);
      };
      walk(mod.ast.filter((s) => s instanceof W.Function));
    }
    expect(binaries).toBeGreaterThan(3000);
  });
});

describe('fuzzer rewrites', () => {
  const u32Math = entry(`
    var a = 3u; var b = 5u; var c = 7u; let i = vec4<u32>(a, b, c, 1u);
    let x = a * b + c; let y = c - a * b; let z = a + b + c + x; let q = a / b; let v = i * a + i;
    var k = 2i; let j = k * k + k - k / 2i;`);
  for (const mode of ['contract', 'reassoc', 'all'] as const) {
    it(`${mode}: integer arithmetic is never a site (48 seeds)`, () => {
      for (const r of sources(u32Math, mode)) {
        expect(r.sites).toBe(0);
        expect(r.code.trim()).toBe(u32Math.trim());
      }
    });
  }

  const f32Math = `fn f(a: f32, b: f32, c: f32, v: vec4<f32>) -> vec4<f32> {
    let s = a * b + c;
    let t = a * b - c;
    let u = a + b + c + s;
    return v * a + v + vec4<f32>(s / t, u, 0.0, 1.0);
  }
  ${entry('let r = f(1.0, 2.0, 3.0, vec4<f32>(1.0));')}`;

  // f's copy for main's call (the original f stays in the module, unused)
  const copyOfF = (r: { code: string }) => r.code.slice(r.code.indexOf('fn f_fz0('));

  it('contract: products fused into fma (a scalar of a vector fma splatted), nothing regrouped', () => {
    const all = sources(f32Math, 'contract');
    const codes = all.map(copyOfF);
    expect(codes.some((c) => c.includes('fz_fma_f32(a, b, c)'))).toBe(true);
    expect(codes.some((c) => c.includes('fz_fma_f32(a, b, -(c))'))).toBe(true);
    expect(codes.some((c) => c.includes('fz_fma_vec4(v, vec4<f32>(a), v)'))).toBe(true);
    for (const c of codes) {
      expect(c).not.toMatch(/1\.0 \/ \(/);
      expect(c).toContain('let u = a + b + c + s;');
    }
    expect(all.some((r) => r.sites === 0)).toBe(true);
  });

  it('reassoc: sums regrouped, divisions as reciprocals, no fma', () => {
    const codes = sources(f32Math, 'reassoc').map(copyOfF);
    expect(codes.some((c) => c.includes('(s) * (1.0 / (t))'))).toBe(true);
    expect(codes.some((c) => !c.includes('let u = a + b + c + s;'))).toBe(true);
    for (const c of codes) expect(c).not.toContain('fz_fma');
  });

  it("a rewritten operand keeps its place (z / (x / y)); a const's value is the compiler's, never rewritten", () => {
    const text = `fn f(x: f32, y: f32, z: f32) -> f32 {
        const a: f32 = 2.0;
        const k = a * a + a * a + a;
        let q = z / (x / y);
        return q + k;
      }
      ${entry('let r = f(1.0, 2.0, 3.0);')}`;
    const codes = sources(text, 'all').map(copyOfF);
    expect(codes.some((c) => c.includes('let q = z / ((x) * (1.0 / (y)));'))).toBe(true);
    for (const c of codes) {
      expect(c).not.toMatch(/z \/ \(x\) \*/);
      expect(c).toContain('const k = a * a + a * a + a;');
    }
  });

  it('the same seed gives the same source; the seed and the pipeline change the decisions', () => {
    const m = new ModuleFuzzer('test.wgsl', f32Math);
    const a = m.pipeline('all', 5, 'k1', 'main').code;
    expect(m.pipeline('all', 5, 'k1', 'main').code).toBe(a);
    const others = [1, 2, 3, 4, 6, 7].map((s) => m.pipeline('all', s, 'k1', 'main').code);
    expect(others.some((c) => c !== a)).toBe(true);
    const keys = ['k2', 'k3', 'k4', 'k5', 'k6'].map((k) => m.pipeline('all', 5, k, 'main').code);
    expect(keys.some((c) => c !== a)).toBe(true);
  });

  it('identity: no rewrite, but each call path its own copy of a function with sites', () => {
    const text = `fn g(a: f32, b: f32) -> f32 { return a * b + a; }
      fn h(a: f32) -> u32 { return u32(a); }
      ${entry('let x = g(1.0, 2.0) + g(3.0, 4.0); let y = h(x);')}`;
    for (const r of sources(text, 'identity', 4)) {
      expect(r.sites).toBe(0);
      expect(r.code).toContain('let x = g_fz0(1.0, 2.0) + g_fz1(3.0, 4.0); let y = h(x);');
      expect(r.code).toContain('fn g_fz0(a: f32, b: f32) -> f32 { return a * b + a; }');
      expect(r.code).toContain('fn g_fz1(a: f32, b: f32) -> f32 { return a * b + a; }');
    }
  });

  const neumaier = (between: string) => `fn add(s: vec2<f32>, v: f32) -> vec2<f32> {
      let t = s.x + v;
      ${between}
      let c = select((v - t) + s.x, (s.x - t) + v, abs(s.x) >= abs(v));
      return vec2<f32>(t, s.y + c);
    }
    fn value(s: vec2<f32>) -> f32 { return s.x + s.y; }
    fn score(acc0: vec2<f32>) -> vec2<f32> {
      var acc = acc0;
      let t = value(acc);
      return vec2<f32>(t, (acc.x - t) + acc.y);
    }
    ${entry('let r = add(vec2<f32>(1.0, 0.0), 2.0) + score(vec2<f32>(1.0, 2.0));')}`;

  it('reassoc: Neumaier compensation terms dropped (also through a one-return function), never in contract', () => {
    const codes = sources(neumaier(''), 'reassoc').map((r) => r.code);
    expect(codes.some((c) => c.includes('select(f32(0.0), f32(0.0), abs(s.x) >= abs(v))'))).toBe(true);
    expect(codes.some((c) => c.includes('return vec2<f32>(t, f32(0.0));'))).toBe(true);
    for (const c of sources(neumaier(''), 'contract').map((r) => r.code)) expect(c).not.toContain('f32(0.0)');
  });

  it('a term that is not zero is kept: another value, or an operand changed since the sum', () => {
    const other = neumaier('').replace('(v - t) + s.x', '(s.y - t) + s.x');
    for (const c of sources(other, 'reassoc').map((r) => r.code)) expect(c).toContain('(s.y - t) + s.x');
    const changed = `fn k(a0: f32, b: f32) -> f32 {
        var a = a0;
        let t = a + b;
        a = 2.0;
        return (a - t) + b;
      }
      ${entry('let r = k(1.0, 2.0);')}`;
    for (const c of sources(changed, 'reassoc').map((r) => r.code)) expect(c).toContain('return (a - t) + b;');
  });
});
