/**
 * The fuzzed source of one pipeline (a shader module's entry point with its override constants).
 *
 * A compiler compiles each pipeline on its own and inlines every function into the entry point, so one helper
 * called from two places becomes two copies that it may optimize differently (the surroundings differ). The
 * fuzzer does the same: every function on the entry point's call graph that holds a site (or calls one that
 * does) gets a copy per call path (`name_fzN`, appended to the module), and a site's decision hashes the seed,
 * the pipeline (shader, entry point, constants), the call path and the site's place in its function. The
 * entry point itself is rewritten in place; the rest of the module is left as it was.
 */
import { type ParsedModule, parseWgsl, type W } from './parse.ts';
import { FunctionRewriter, type SiteKind } from './rewrite.ts';
import { floatTypeName, ModuleTypes, type Ty } from './types.ts';

export type FuzzMode = 'contract' | 'reassoc' | 'all' | 'identity';

export interface PipelineFuzz {
  code: string;
  /** Sites rewritten in this pipeline's source. */
  sites: number;
  /** Function copies made for call paths. */
  copies: number;
}

/** One module's parse, shared by its pipelines. */
export class ModuleFuzzer {
  private readonly mod: ParsedModule;
  private readonly types: ModuleTypes;
  private readonly withSites = new Map<string, boolean>();

  constructor(
    readonly label: string,
    readonly source: string,
  ) {
    try {
      this.mod = parseWgsl(source);
    } catch (e) {
      throw new Error(`RINGSIDE_WGSL_FUZZ: cannot parse ${label}: ${(e as Error).message}`);
    }
    this.types = new ModuleTypes(this.mod.ast);
  }

  /** Whether a function, or one it calls, holds a site of any kind (rewritten or not). */
  private hasSites(name: string, seen = new Set<string>()): boolean {
    const known = this.withSites.get(name);
    if (known !== undefined) return known;
    const fn = this.types.functions.get(name);
    if (!fn || seen.has(name)) return false;
    seen.add(name);
    const callees: string[] = [];
    const survey = new FunctionRewriter(this.mod, this.types, fn, {
      contract: true,
      reassoc: true,
      decide: () => 0,
      fmaName: () => 'fma',
      callName: (callee) => {
        if (this.types.functions.has(callee)) callees.push(callee);
        return undefined;
      },
    });
    survey.run(fn.name);
    const has = survey.candidates > 0 || callees.some((c) => this.hasSites(c, seen));
    this.withSites.set(name, has);
    return has;
  }

  /**
   * The module's source for pipeline `key` (entry point `entry`) under `mode` and `seed`. An entry point this
   * module does not have is left to the pipeline's creation to refuse.
   */
  pipeline(mode: FuzzMode, seed: number, key: string, entry: string): PipelineFuzz {
    const root = this.types.functions.get(entry);
    if (!root) return { code: this.mod.source, sites: 0, copies: 0 };
    const taken = new Set([...this.types.functions.keys(), ...this.types.structs.keys(), ...this.types.globals.keys()]);
    const copies: string[] = [];
    const names = new Map<string, string>();
    const fmas = new Map<string, string>(); // type -> helper name
    let sites = 0;
    const fmaName = (ty: Ty) => {
      const t = floatTypeName(ty);
      let name = fmas.get(t);
      if (!name) {
        let n = 0;
        do name = `fz_fma_${ty.k === 'vec' ? `vec${ty.n}` : 'f32'}${n ? `_${n}` : ''}`;
        while (taken.has(name) && ++n);
        taken.add(name);
        fmas.set(t, name);
      }
      return name;
    };
    const rewrite = (fn: W.Function, path: string, name: string): string => {
      const r = new FunctionRewriter(this.mod, this.types, fn, {
        contract: mode === 'contract' || mode === 'all',
        reassoc: mode === 'reassoc' || mode === 'all',
        decide: (kind: SiteKind, offset: number) => hash32(`${seed}|${key}|${path}|${kind}|${offset}`),
        fmaName,
        callName: (callee, offset) => {
          const f = this.types.functions.get(callee);
          if (!f || !this.hasSites(callee)) return undefined;
          const sub = `${path}/${fn.name}@${offset}`;
          const id = `${callee}|${sub}`;
          let copy = names.get(id);
          if (!copy) {
            let n = names.size;
            do copy = `${callee}_fz${n++}`;
            while (taken.has(copy));
            taken.add(copy);
            names.set(id, copy);
            copies.push(rewrite(f, sub, copy));
          }
          return copy;
        },
      });
      const text = r.run(name);
      sites += r.sites;
      return text;
    };
    const entryText = rewrite(root, entry, entry);
    const src = this.mod.source;
    const fnTok = this.mod.tokens.find((t) => t.start >= root.start && t.lexeme === 'fn')!;
    const helpers = [...fmas].map(([t, name]) => fusedMultiplyAdd(name, t));
    const code = `${src.slice(0, fnTok.start)}${entryText}${src.slice(root.end)}\n${[...copies, ...helpers].join('\n\n')}\n`;
    return { code, sites, copies: copies.length };
  }
}

/** FNV-1a over the key's UTF-16 units, then murmur3's finalizer (a decision per site, well mixed). */
export function hash32(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * A fused multiply-add of type `t` (f32 or vecN<f32>): a * b + c with one rounding, as a contracting compiler gives
 * it. WGSL's fma() does not guarantee that: on lavapipe and SwiftShader fma(a, b, c) rounds the product first
 * (measured: (1 + 2^-12)^2 - (1 + 2^-11) gives 0 there, 2^-24 fused). So the product is taken exactly as p + e
 * (Dekker, operands split by Veltkamp's 2^12 + 1: exact for f32 away from overflow), p + c as s + err (Knuth's
 * two-sum), and the errors are added last: the fused value, to within a rounding of err + e.
 */
function fusedMultiplyAdd(name: string, t: string): string {
  return `fn ${name}(a: ${t}, b: ${t}, c: ${t}) -> ${t} {
  let p = a * b;
  let ta = 4097.0 * a;
  let ah = ta - (ta - a);
  let al = a - ah;
  let tb = 4097.0 * b;
  let bh = tb - (tb - b);
  let bl = b - bh;
  let e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
  let s = p + c;
  let v = s - p;
  let err = (p - (s - v)) + (c - v);
  return s + (err + e);
}`;
}
