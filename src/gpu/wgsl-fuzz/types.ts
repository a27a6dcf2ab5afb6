/**
 * The WGSL types of expressions, as far as the fuzzer needs them: it rewrites f32 and vecN<f32> arithmetic
 * only, so every expression whose type it cannot establish (a builtin it does not know, a matrix product) is
 * `null`, and a null operand makes its operation no site. Integer (index) arithmetic is never a site.
 */
import { W } from './parse.ts';

/** Scalar kinds; `af` and `ai` are WGSL's abstract float and int (literals and constant expressions). */
export type Scalar = 'f32' | 'f16' | 'i32' | 'u32' | 'bool' | 'af' | 'ai';
export type Ty =
  | { k: 'scalar'; s: Scalar }
  | { k: 'vec'; n: number; s: Scalar }
  | { k: 'mat'; c: number; r: number; s: Scalar }
  | { k: 'array'; el: Ty | null }
  | { k: 'struct'; name: string }
  | { k: 'ptr'; to: Ty | null }
  | { k: 'void' };

const scalar = (s: Scalar): Ty => ({ k: 'scalar', s });
const SCALARS = new Set(['f32', 'f16', 'i32', 'u32', 'bool']);

/** Whether t is f32 or vecN<f32>: the arithmetic a relaxed compiler may contract and reassociate. */
export function isFloat(t: Ty | null): boolean {
  return !!t && (t.k === 'scalar' || t.k === 'vec') && t.s === 'f32';
}
/** The WGSL spelling of an f32 or vecN<f32> type (for splats and zeros). */
export function floatTypeName(t: Ty): string {
  return t.k === 'vec' ? `vec${t.n}<f32>` : 'f32';
}

const concrete = (s: Scalar): Scalar => (s === 'af' ? 'f32' : s === 'ai' ? 'i32' : s);
/** The type a `let` or `var` without a type annotation takes from its initializer. */
export function concretize(t: Ty | null): Ty | null {
  if (!t) return null;
  if (t.k === 'scalar') return scalar(concrete(t.s));
  if (t.k === 'vec') return { k: 'vec', n: t.n, s: concrete(t.s) };
  return t;
}

/** The scalar two operands of an arithmetic operation convert to (abstract ones take the other's). */
function joinScalar(a: Scalar, b: Scalar): Scalar | null {
  if (a === b) return a;
  if (a === 'af' || a === 'ai') return b === 'af' || b === 'ai' ? 'af' : a === 'ai' && b === 'f32' ? 'f32' : b;
  if (b === 'af' || b === 'ai') return a;
  return null;
}
/** The one type of several arguments of a component-wise builtin (min, fma, select, ...). */
function joinAll(ts: (Ty | null)[]): Ty | null {
  let out: { n: number; s: Scalar } | undefined;
  for (const t of ts) {
    if (!t || (t.k !== 'scalar' && t.k !== 'vec')) return null;
    const n: number = t.k === 'vec' ? t.n : 0;
    if (!out) {
      out = { n, s: t.s };
      continue;
    }
    const s = joinScalar(out.s, t.s);
    if (!s || (out.n && n && out.n !== n)) return null;
    out = { n: out.n || n, s };
  }
  if (!out) return null;
  return out.n ? { k: 'vec', n: out.n, s: out.s } : scalar(out.s);
}

/** Builtins whose result has their arguments' (joined) type. */
const SAME_AS_ARGS = new Set(
  (
    'abs sign floor ceil round trunc fract sqrt inverseSqrt exp exp2 log log2 sin cos tan tanh sinh cosh asin acos ' +
    'atan atan2 pow min max clamp fma mix step smoothstep saturate degrees radians countOneBits reverseBits ' +
    'firstLeadingBit firstTrailingBit countLeadingZeros countTrailingZeros extractBits insertBits quantizeToF16 ' +
    'normalize cross reflect'
  ).split(' '),
);
/** Builtins whose result has their first argument's type. */
const FIRST_ARG = new Set(
  'ldexp subgroupBroadcast subgroupBroadcastFirst subgroupShuffle subgroupShuffleXor subgroupShuffleUp subgroupShuffleDown subgroupAdd subgroupMul subgroupMax subgroupMin subgroupExclusiveAdd subgroupInclusiveAdd quadBroadcast'.split(
    ' ',
  ),
);
const FIXED: Record<string, Ty> = {
  arrayLength: scalar('u32'),
  pack2x16float: scalar('u32'),
  pack4x8unorm: scalar('u32'),
  pack4x8snorm: scalar('u32'),
  pack2x16unorm: scalar('u32'),
  pack2x16snorm: scalar('u32'),
  pack4xU8: scalar('u32'),
  pack4xI8: scalar('u32'),
  dot4U8Packed: scalar('u32'),
  dot4I8Packed: scalar('i32'),
  unpack2x16float: { k: 'vec', n: 2, s: 'f32' },
  unpack2x16unorm: { k: 'vec', n: 2, s: 'f32' },
  unpack2x16snorm: { k: 'vec', n: 2, s: 'f32' },
  unpack4x8unorm: { k: 'vec', n: 4, s: 'f32' },
  unpack4x8snorm: { k: 'vec', n: 4, s: 'f32' },
  unpack4xU8: { k: 'vec', n: 4, s: 'u32' },
  unpack4xI8: { k: 'vec', n: 4, s: 'i32' },
  all: scalar('bool'),
  any: scalar('bool'),
  subgroupElect: scalar('bool'),
  subgroupAll: scalar('bool'),
  subgroupAny: scalar('bool'),
  workgroupBarrier: { k: 'void' },
  storageBarrier: { k: 'void' },
  textureBarrier: { k: 'void' },
};

/** What a name in scope is: its type, and whether its value can change after it is bound. */
export interface Binding {
  ty: Ty | null;
  kind: 'let' | 'var' | 'param' | 'const' | 'override' | 'global';
  /** The `let` statement that bound it (its initializer is what the name stands for). */
  decl?: W.Let;
}

/** The module's declarations: structs, aliases, functions and module-scope names. */
export class ModuleTypes {
  readonly structs = new Map<string, W.Struct>();
  readonly aliases = new Map<string, W.Type>();
  readonly functions = new Map<string, W.Function>();
  readonly globals = new Map<string, Binding>();

  constructor(ast: W.Statement[]) {
    for (const s of ast) {
      if (s instanceof W.Struct) this.structs.set(s.name, s);
      else if (s instanceof W.Alias) this.aliases.set(s.name, s.type);
      else if (s instanceof W.Function) this.functions.set(s.name, s);
    }
    // Module-scope names, in order (a constant's type may come from an earlier one's).
    const scope = new Scope(this);
    for (const s of ast) {
      if (s instanceof W.Var) this.globals.set(s.name, { ty: this.type(s.type), kind: 'global' });
      else if (s instanceof W.Override)
        this.globals.set(s.name, { ty: this.type(s.type) ?? concretize(scope.typeOf(s.value)), kind: 'override' });
      else if (s instanceof W.Const || s instanceof W.Let)
        this.globals.set(s.name, { ty: this.type(s.type) ?? scope.typeOf(s.value), kind: 'const' });
    }
  }

  /** A type annotation as a Ty (null where the fuzzer has no use for it). */
  type(t: W.Type | null | undefined): Ty | null {
    if (!t) return null;
    if (t instanceof W.Struct) return { k: 'struct', name: t.name };
    if (t instanceof W.ArrayType) return { k: 'array', el: this.type(t.format) };
    if (t instanceof W.PointerType) return { k: 'ptr', to: this.type(t.type) };
    const name = t.name;
    if (t instanceof W.TemplateType) {
      const el = t.format ? this.type(t.format) : null;
      const s = el && el.k === 'scalar' ? el.s : null;
      const vec = /^vec([234])$/.exec(name);
      if (vec) return s ? { k: 'vec', n: Number(vec[1]), s } : null;
      const mat = /^mat([234])x([234])$/.exec(name);
      if (mat) return s ? { k: 'mat', c: Number(mat[1]), r: Number(mat[2]), s } : null;
      if (name === 'array') return { k: 'array', el };
      if (name === 'ptr') return { k: 'ptr', to: el };
      if (name === 'atomic') return null;
    }
    if (SCALARS.has(name)) return scalar(name as Scalar);
    if (name === 'void') return { k: 'void' };
    // vec4f, vec2u, mat2x4f, ...: predeclared aliases
    const short = /^vec([234])([fiuh])$/.exec(name);
    if (short) return { k: 'vec', n: Number(short[1]), s: SHORT[short[2]] };
    const shortMat = /^mat([234])x([234])([fh])$/.exec(name);
    if (shortMat) return { k: 'mat', c: Number(shortMat[1]), r: Number(shortMat[2]), s: SHORT[shortMat[3]] };
    if (this.structs.has(name)) return { k: 'struct', name };
    const alias = this.aliases.get(name);
    if (alias) return this.type(alias);
    return null;
  }

  /** The type of member `m` of struct `name`. */
  member(name: string, m: string): Ty | null {
    const s = this.structs.get(name);
    const mem = s?.members.find((x) => x.name === m);
    return mem ? this.type(mem.type) : null;
  }
}
const SHORT: Record<string, Scalar> = { f: 'f32', i: 'i32', u: 'u32', h: 'f16' };

/** Names in scope while a function body is walked in order: blocks push and pop. */
export class Scope {
  private readonly frames: Map<string, Binding>[] = [];
  constructor(readonly mod: ModuleTypes) {}

  push(): void {
    this.frames.push(new Map());
  }
  pop(): void {
    this.frames.pop();
  }
  bind(name: string, b: Binding): void {
    this.frames[this.frames.length - 1].set(name, b);
  }
  lookup(name: string): Binding | undefined {
    for (let i = this.frames.length - 1; i >= 0; i--) {
      const b = this.frames[i].get(name);
      if (b) return b;
    }
    return this.mod.globals.get(name);
  }

  /** The type of an expression (with its postfix accesses applied), or null where unknown. */
  typeOf(e: W.Expression | null | undefined): Ty | null {
    if (!e) return null;
    return this.postfix(this.baseType(e), e.postfix);
  }

  /** The type of an expression before its postfix accesses (the operation's own result). */
  baseType(e: W.Expression): Ty | null {
    const m = this.mod;
    if (e instanceof W.LiteralExpr) return literalType(e);
    if (e instanceof W.VariableExpr) return this.lookup(e.name)?.ty ?? null;
    if (e instanceof W.ConstExpr) return this.lookup(e.name)?.ty ?? null;
    if (e instanceof W.BitcastExpr) return m.type(e.type);
    if (e instanceof W.CreateExpr) return this.constructed(e.type, e.args ?? []);
    if (e instanceof W.CallExpr) return this.call(e.name, e.args ?? []);
    if (e instanceof W.UnaryOperator) {
      const t = this.typeOf(e.right);
      if (e.operator === '*') return t && t.k === 'ptr' ? t.to : null;
      if (e.operator === '&') return { k: 'ptr', to: t };
      if (e.operator === '!') return t && t.k === 'vec' ? { k: 'vec', n: t.n, s: 'bool' } : scalar('bool');
      return t;
    }
    if (e instanceof W.BinaryOperator) return this.binary(e.operator, this.typeOf(e.left), this.typeOf(e.right));
    return null;
  }

  private binary(op: string, a: Ty | null, b: Ty | null): Ty | null {
    if (op === '&&' || op === '||') return scalar('bool');
    if (!a || !b) return null;
    if (['==', '!=', '<', '>', '<=', '>='].includes(op)) {
      const n = a.k === 'vec' ? a.n : b.k === 'vec' ? b.n : 0;
      return n ? { k: 'vec', n, s: 'bool' } : scalar('bool');
    }
    if (op === '<<' || op === '>>') return a;
    if (a.k === 'ptr' || b.k === 'ptr') return null;
    if ((a.k === 'scalar' || a.k === 'vec') && (b.k === 'scalar' || b.k === 'vec')) {
      if (a.k === 'vec' && b.k === 'vec' && a.n !== b.n) return null;
      return joinAll([a, b]);
    }
    return null; // matrices: not a site
  }

  private constructed(t: W.Type | null, args: W.Expression[]): Ty | null {
    if (!t) return null;
    const ty = this.mod.type(t);
    if (ty) return ty;
    // vec4(...) without a component type: the arguments' component type
    const vec = /^vec([234])$/.exec(t.name);
    if (vec) {
      const j = joinAll(args.map((a) => this.typeOf(a)).map((x) => (x && x.k === 'vec' ? scalar(x.s) : x)));
      return j && j.k === 'scalar' ? { k: 'vec', n: Number(vec[1]), s: concrete(j.s) } : null;
    }
    return null;
  }

  private call(name: string, args: W.Expression[]): Ty | null {
    const fn = this.mod.functions.get(name);
    if (fn) return fn.returnType ? this.mod.type(fn.returnType) : { k: 'void' };
    if (this.mod.structs.has(name)) return { k: 'struct', name };
    const ts = () => args.map((a) => this.typeOf(a));
    if (name in FIXED) return FIXED[name];
    if (SAME_AS_ARGS.has(name)) return joinAll(ts());
    if (FIRST_ARG.has(name)) return this.typeOf(args[0]);
    if (name === 'select') return joinAll(ts().slice(0, 2));
    if (name === 'dot' || name === 'length' || name === 'distance') {
      const t = this.typeOf(args[0]);
      return t && (t.k === 'vec' || t.k === 'scalar') ? scalar(t.s) : null;
    }
    if (name === 'workgroupUniformLoad') {
      const t = this.typeOf(args[0]);
      return t && t.k === 'ptr' ? t.to : null;
    }
    return null;
  }

  /** Applies member accesses, swizzles and indexing. */
  private postfix(t: Ty | null, p: W.Expression | null): Ty | null {
    for (; p && t; p = p.postfix) {
      if (t.k === 'ptr') t = t.to; // p.x on a pointer reads through it
      if (!t) return null;
      if (p instanceof W.ArrayIndex) {
        if (t.k === 'array') t = t.el;
        else if (t.k === 'vec') t = scalar(t.s);
        else if (t.k === 'mat') t = { k: 'vec', n: t.r, s: t.s };
        else return null;
      } else if (p instanceof W.StringExpr) {
        if (t.k === 'struct') t = this.mod.member(t.name, p.value);
        else if (t.k === 'vec') {
          const n = p.value.length;
          if (!/^([xyzw]{1,4}|[rgba]{1,4})$/.test(p.value)) return null;
          t = n === 1 ? scalar(t.s) : { k: 'vec', n, s: t.s };
        } else return null;
      } else return null;
    }
    return t;
  }
}

/** A literal's type from its spelling, as WGSL types it (the library types every float literal f32). */
export function literalType(e: W.LiteralExpr): Ty | null {
  const t = e.type?.name;
  if (t === 'bool') return scalar('bool');
  if (t === 'u32') return scalar('u32');
  if (t === 'i32') return scalar('i32');
  if (t === 'x32') return scalar('ai');
  if (t === 'f16') return scalar('f16');
  // The library types every float literal f32, `1.0` as `1.0f`: taken as abstract, which joins with f32 operands
  // alike, and only a product of two literals (a constant expression, no site) comes out abstract.
  if (t === 'f32') return scalar('af');
  return null;
}
