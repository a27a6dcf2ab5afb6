/**
 * The rewrites of one function body: at each site a relaxed compiler may transform, the fuzzer's decision
 * (a hash of the seed, the pipeline, the call path and the site) says whether it does. Sites, all in f32 or
 * vecN<f32> arithmetic (types.ts; integer and index arithmetic is never a site):
 *   contract  `a * b + c`, `c + a * b`, `a * b - c`, `c - a * b`, `x += a * b`, `x -= a * b` into a fused
 *             multiply-add (keyed by the product: a sum of two products fuses the first whose decision says so;
 *             computed by a helper, pipeline-source.ts fusedMultiplyAdd, not WGSL's fma());
 *   reassoc   a sum of three or more terms (through `+`, `-` and parentheses, which a compiler does not see)
 *             or a product of three or more factors rebuilt in another order and grouping, `x += a + b`
 *             taking x as a term;
 *   recip     `x / y` into `x * (1.0 / y)`, `x /= y` likewise (arcp; with the reassoc mode);
 *   drop      a compensation term that is algebraically zero replaced by zero (with the reassoc mode):
 *             `(X - t) + Y`, `Y + (X - t)` (Neumaier) or `(t - X) - Y` (Kahan) where `let t = X + Y` (or
 *             Y + X), seen through a function whose body is one `return` (ksum_value); X and Y are the same
 *             expressions (the same bindings), and either read only immutable names (let, parameters,
 *             constants) or the `let` and the use are in one block with only `let`s between them.
 * Not modelled: contraction or reassociation across a `let`, a call or a loop iteration (splitting an
 * accumulator), approximate builtins.
 * Each rewrite is exact algebra, written back into the source text in place: the text outside the rewritten
 * expressions is unchanged.
 */
import { childExpressions, type ParsedModule, W } from './parse.ts';
import { concretize, floatTypeName, isFloat, type ModuleTypes, Scope, type Ty } from './types.ts';
import { CompensationFinder } from './compensation.ts';
import { originalAssignTree, shuffledTree, treeKey, treeNode, type Term, type Tree } from './sum-tree.ts';

export type SiteKind = 'contract' | 'reassoc' | 'recip' | 'drop';

export interface RewriteOptions {
  contract: boolean;
  /** Reassociation, reciprocals and dropped compensation terms. */
  reassoc: boolean;
  /** Decision for a site: a 32-bit hash; odd rewrites. `offset` is the site's offset within the function. */
  decide(kind: SiteKind, offset: number): number;
  /** The name a call to user function `callee` at `offset` within the function takes (a clone's), if renamed. */
  callName(callee: string, offset: number): string | undefined;
  /** The function that computes a fused multiply-add of type `ty` (f32 or vecN<f32>; pipeline-source.ts). */
  fmaName(ty: Ty): string;
}

interface Edit {
  start: number;
  end: number;
  text: string;
}

/** Rewrites one function; `sites` counts the rewrites made, `candidates` every site seen (rewritten or not). */
export class FunctionRewriter {
  sites = 0;
  candidates = 0;
  private readonly edits: Edit[] = [];
  private readonly scope: Scope;
  private readonly comp: CompensationFinder;
  /** The block and statement index being walked (for the compensation pattern's adjacency). */
  private block: W.Statement[] = [];
  private index = 0;

  constructor(
    private readonly mod: ParsedModule,
    types: ModuleTypes,
    private readonly fn: W.Function,
    private readonly opts: RewriteOptions,
  ) {
    this.scope = new Scope(types);
    this.comp = new CompensationFinder(mod, this.scope, () => ({ block: this.block, index: this.index }));
  }

  /** The function's text from its `fn` keyword to its closing brace, rewritten, named `name`. */
  run(name: string): string {
    const fnTok = this.tokenAt(this.fn.start, (t) => t.lexeme === 'fn');
    const nameTok = this.tokenAt(fnTok.end, (t) => t.lexeme === this.fn.name);
    if (name !== this.fn.name) this.edits.push({ start: nameTok.start, end: nameTok.end, text: name });
    this.scope.push();
    for (const a of this.fn.args) this.scope.bind(a.name, { ty: this.scope.mod.type(a.type), kind: 'param' });
    this.statements(this.fn.body);
    this.scope.pop();
    return this.apply(fnTok.start, this.fn.end);
  }

  private apply(start: number, end: number): string {
    const src = this.mod.source;
    const edits = [...this.edits].sort((a, b) => a.start - b.start);
    let out = '';
    let at = start;
    for (const e of edits) {
      if (e.start < at) throw new Error(`overlapping rewrites in ${this.fn.name} at offset ${e.start}`);
      out += src.slice(at, e.start) + e.text;
      at = e.end;
    }
    return out + src.slice(at, end);
  }

  /** The first token at or after `offset` that `pred` accepts. */
  private tokenAt(offset: number, pred: (t: W.Token) => boolean): W.Token {
    const toks = this.mod.tokens;
    let lo = 0;
    let hi = toks.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (toks[mid].start < offset) lo = mid + 1;
      else hi = mid;
    }
    for (let i = lo; i < toks.length; i++) if (pred(toks[i])) return toks[i];
    throw new Error(`no token found after offset ${offset} in ${this.fn.name}`);
  }

  private rel(offset: number): number {
    return offset - this.fn.start;
  }

  // ---- statements ----

  private statements(list: W.Statement[]): void {
    const outer = this.block;
    const outerIndex = this.index;
    this.block = list;
    for (let i = 0; i < list.length; i++) {
      this.index = i;
      this.statement(list[i]);
    }
    this.block = outer;
    this.index = outerIndex;
  }

  private scoped(list: W.Statement[] | null | undefined): void {
    if (!list) return;
    this.scope.push();
    this.statements(list);
    this.scope.pop();
  }

  /** Rewrites the expression root e where it stands (an edit when its text changes). */
  private root(e: W.Expression | null | undefined): void {
    if (!e) return;
    const [s, t] = this.mod.range(e);
    if (s >= t) return; // the library's stand-in value of a bare `return;`
    const text = this.emit(e);
    if (text !== this.mod.source.slice(s, t)) this.edits.push({ start: s, end: t, text });
  }

  private statement(st: W.Statement): void {
    if (Array.isArray(st)) {
      this.scoped(st as W.Statement[]);
    } else if (st instanceof W.Let || st instanceof W.Var || st instanceof W.Const) {
      // a const is evaluated by the compiler, not the GPU (and a call of a helper is no constant expression)
      if (!(st instanceof W.Const)) this.root(st.value);
      const ty = this.scope.mod.type(st.type) ?? concretize(this.scope.typeOf(st.value));
      const kind = st instanceof W.Var ? 'var' : st instanceof W.Let ? 'let' : 'const';
      if (st instanceof W.Let && st.value) this.comp.noteSum(st);
      this.scope.bind(st.name, { ty, kind, decl: st instanceof W.Let ? st : undefined });
    } else if (st instanceof W.Assign) {
      this.assign(st);
    } else if (st instanceof W.Call) {
      const name = this.opts.callName(st.name, this.rel(st.start));
      if (name) {
        const tok = this.tokenAt(st.start, (t) => t.lexeme === st.name);
        this.edits.push({ start: tok.start, end: tok.end, text: name });
      }
      for (const a of st.args ?? []) this.root(a);
    } else if (st instanceof W.Return) {
      this.root(st.value);
    } else if (st instanceof W.If) {
      this.root(st.condition);
      this.scoped(st.body);
      for (const e of st.elseif ?? []) {
        this.root(e.condition);
        this.scoped(e.body);
      }
      this.scoped(st.else);
    } else if (st instanceof W.For) {
      this.scope.push();
      if (st.init) this.statement(st.init);
      this.root(st.condition);
      if (st.increment) this.statement(st.increment);
      this.scoped(st.body);
      this.scope.pop();
    } else if (st instanceof W.While) {
      this.root(st.condition);
      this.scoped(st.body);
    } else if (st instanceof W.Loop) {
      this.scope.push();
      this.statements(st.body);
      if (st.continuing) this.statements(st.continuing.body);
      this.scope.pop();
    } else if (st instanceof W.Switch) {
      this.root(st.condition);
      for (const c of st.cases) this.scoped(c.body);
    } else if (st instanceof W.Break) {
      this.root((st as W.Break & { condition?: W.Expression }).condition);
    } else if (st instanceof W.Increment) {
      this.root(st.variable);
    }
  }

  /** `x op= v`: contraction (`+=`, `-=` of a product), reassociation with x as a term, or a reciprocal. */
  private assign(st: W.Assign): void {
    const op = st.operator as string;
    const ty = this.scope.typeOf(st.variable);
    if (op !== '=' && isFloat(ty) && ty && this.duplicable(st.variable)) {
      const [ls] = this.mod.range(st.variable);
      const [, ve] = this.mod.range(st.value);
      const lv = this.emit(st.variable);
      const at = this.rel(ls);
      let text: string | undefined;
      if ((op === '+=' || op === '-=') && this.isProduct(st.value)) {
        const p = st.value as W.BinaryOperator;
        this.candidates++;
        if (this.opts.contract && this.yes('contract', this.rel(this.mod.range(p)[0]))) {
          this.sites++;
          const a = op === '-=' ? `-(${this.emit(p.left)})` : this.emit(p.left);
          text = `${lv} = ${this.fma(a, p.left, this.emit(p.right), p.right, lv, st.variable, ty)}`;
        }
      }
      if (!text && (op === '+=' || op === '-=')) {
        const terms: Term[] = [{ neg: false, node: st.variable }, ...this.flatten(st.value, ty, '+', op === '-=')];
        if (terms.length >= 3) {
          this.candidates++;
          if (this.opts.reassoc) {
            const h = this.opts.decide('reassoc', at);
            const tree = h & 1 ? shuffledTree(terms, '+', h) : undefined;
            // the original grouping: x op (v's own tree)
            if (tree && treeKey(tree) !== treeKey(originalAssignTree(terms))) {
              this.sites++;
              text = `${lv} = ${this.print(tree, ty, lv, st.variable)}`;
            }
          }
        }
      }
      if (!text && (op === '*=' || op === '/=')) {
        if (op === '/=') {
          this.candidates++;
          if (this.opts.reassoc && this.yes('recip', at)) {
            this.sites++;
            text = `${lv} = ${lv} * (1.0 / (${this.emit(st.value)}))`;
          }
        }
      }
      if (text) {
        this.edits.push({ start: ls, end: ve, text });
        return;
      }
    }
    this.root(st.variable);
    this.root(st.value);
  }

  /** Whether an lvalue can be written twice (`x = x + ...`): names, members, indices without calls. */
  private duplicable(e: W.Expression): boolean {
    let base: W.Expression = e;
    if (e instanceof W.UnaryOperator && e.operator === '*' && e.right instanceof W.VariableExpr) base = e.right;
    else if (!(e instanceof W.VariableExpr)) return false;
    const callFree = (x: W.Expression): boolean =>
      !(x instanceof W.CallExpr) && childExpressions(x).every(callFree) && !(x instanceof W.CreateExpr);
    for (let p = base.postfix ?? e.postfix; p; p = p.postfix)
      if (p instanceof W.ArrayIndex && !callFree(p.index)) return false;
    return true;
  }

  // ---- expressions ----

  private yes(kind: SiteKind, offset: number): boolean {
    return (this.opts.decide(kind, offset) & 1) === 1;
  }

  /** The float type of a +, -, *, / node that can be a site (no postfix access on it), else null. */
  private siteType(e: W.Expression): Ty | null {
    if (!(e instanceof W.BinaryOperator) || e.postfix) return null;
    if (!['+', '-', '*', '/'].includes(e.operator)) return null;
    const ty = this.scope.baseType(e);
    return isFloat(ty) ? ty : null;
  }

  private isProduct(e: W.Expression): boolean {
    return e instanceof W.BinaryOperator && e.operator === '*' && !!this.siteType(e);
  }

  /** The text of e with its sites rewritten. */
  emit(e: W.Expression): string {
    const ty = this.siteType(e);
    if (ty) {
      const b = e as W.BinaryOperator;
      const zero = this.compensation(b, ty);
      if (zero !== undefined) return zero;
      if (b.operator === '+' || b.operator === '-') return this.sum(b, ty);
      if (b.operator === '*') return this.product(b, ty);
      return this.division(b);
    }
    return this.splice(e, (c) => this.emit(c));
  }

  /** e's source text with its children's texts (and a renamed callee) put in. */
  private splice(e: W.Expression, child: (c: W.Expression) => string): string {
    const [s, t] = this.mod.range(e);
    const src = this.mod.source;
    const parts: Edit[] = [];
    if (e instanceof W.CallExpr) {
      const name = this.opts.callName(e.name, this.rel(s));
      if (name) {
        const tok = this.tokenAt(s, (k) => k.lexeme === e.name);
        parts.push({ start: tok.start, end: tok.end, text: name });
      }
    }
    for (const c of childExpressions(e)) {
      const [cs, ct] = this.mod.range(c);
      parts.push({ start: cs, end: ct, text: child(c) });
    }
    parts.sort((a, b) => a.start - b.start);
    let out = '';
    let at = s;
    for (const p of parts) {
      out += src.slice(at, p.start) + p.text;
      at = p.end;
    }
    return out + src.slice(at, t);
  }

  /** The terms of a sum (op '+') or factors of a product (op '*') through nodes of the same float type. */
  private flatten(e: W.Expression, ty: Ty, op: '+' | '*', neg: boolean): Term[] {
    const b = e as W.BinaryOperator;
    const member =
      this.siteType(e) &&
      floatTypeName(this.scope.baseType(e)!) === floatTypeName(ty) &&
      (op === '+' ? b.operator === '+' || b.operator === '-' : b.operator === '*') &&
      this.comp.compensationOf(b) === undefined;
    if (!member) return [{ neg, node: e }];
    return [
      ...this.flatten(b.left, ty, op, neg),
      ...this.flatten(b.right, ty, op, op === '+' && b.operator === '-' ? !neg : neg),
    ];
  }

  private sum(e: W.BinaryOperator, ty: Ty): string {
    const terms = this.flatten(e, ty, '+', false);
    if (terms.length >= 3) {
      this.candidates++;
      if (this.opts.reassoc) {
        const h = this.opts.decide('reassoc', this.rel(this.mod.range(e)[0]));
        if (h & 1) {
          const tree = shuffledTree(terms, '+', h);
          if (treeKey(tree) !== treeKey(this.originalTree(e, ty, '+'))) {
            this.sites++;
            return this.print(tree, ty);
          }
        }
      }
    }
    return this.sumNode(e, ty);
  }

  /** One +/- node without reassociation: contraction here, its chain's other nodes likewise. */
  private sumNode(e: W.BinaryOperator, ty: Ty): string {
    const fused = this.contractAt(e.left, e.right, e.operator === '-', ty);
    if (fused !== undefined) return fused;
    return this.splice(e, (c) => {
      const ct = this.siteType(c);
      const cb = c as W.BinaryOperator;
      if (ct && (cb.operator === '+' || cb.operator === '-') && floatTypeName(ct) === floatTypeName(ty))
        return this.compensation(cb, ct) ?? this.sumNode(cb, ct);
      return this.emit(c);
    });
  }

  /**
   * l + r (or l - r) as an fma where an operand is a product whose decision says so (the left one first), else
   * undefined. `l` and `r` are AST nodes, or pre-printed texts (reassociated trees) with the node they stand for.
   */
  private contractAt(l: W.Expression, r: W.Expression, minus: boolean, ty: Ty): string | undefined {
    for (const [p, other, pNeg, otherNeg] of [
      [l, r, false, minus],
      [r, l, minus, false],
    ] as [W.Expression, W.Expression, boolean, boolean][]) {
      if (!this.isProduct(p)) continue;
      this.candidates++;
      if (!this.opts.contract || !this.yes('contract', this.rel(this.mod.range(p)[0]))) continue;
      this.sites++;
      const pb = p as W.BinaryOperator;
      const a = pNeg ? `-(${this.emit(pb.left)})` : this.emit(pb.left);
      const c = otherNeg ? `-(${this.emit(other)})` : this.emit(other);
      return this.fma(a, pb.left, this.emit(pb.right), pb.right, c, other, ty);
    }
    return undefined;
  }

  /**
   * fma(a, b, c) of result type ty. fma takes one type: with a vector result an operand not known to be that
   * vector (a scalar, or a subtree of mixed terms) is passed through the vector's constructor (a splat, or the
   * vector itself).
   */
  private fma(
    a: string,
    an: W.Expression | null,
    b: string,
    bn: W.Expression | null,
    c: string,
    cn: W.Expression | null,
    ty: Ty,
  ): string {
    const fit = (text: string, n: W.Expression | null) => {
      if (ty.k !== 'vec') return text;
      const t = n ? this.scope.typeOf(n) : null;
      return t && t.k === 'vec' && t.n === ty.n && t.s === 'f32' ? text : `${floatTypeName(ty)}(${text})`;
    };
    return `${this.opts.fmaName(ty)}(${fit(a, an)}, ${fit(b, bn)}, ${fit(c, cn)})`;
  }

  private product(e: W.BinaryOperator, ty: Ty): string {
    const factors = this.flatten(e, ty, '*', false);
    if (factors.length >= 3) {
      this.candidates++;
      if (this.opts.reassoc) {
        const h = this.opts.decide('reassoc', this.rel(this.mod.range(e)[0]));
        if (h & 1) {
          const tree = shuffledTree(factors, '*', h);
          if (treeKey(tree) !== treeKey(this.originalTree(e, ty, '*'))) {
            this.sites++;
            return this.print(tree, ty);
          }
        }
      }
    }
    return this.splice(e, (c) => this.emit(c));
  }

  private division(e: W.BinaryOperator): string {
    // 1 / y is the reciprocal itself
    const one = e.left instanceof W.LiteralExpr && Number(this.text(e.left)) === 1;
    if (!one) {
      this.candidates++;
      if (this.opts.reassoc && this.yes('recip', this.rel(this.mod.range(e)[0]))) {
        this.sites++;
        return `((${this.emit(e.left)}) * (1.0 / (${this.emit(e.right)})))`;
      }
    }
    return this.splice(e, (c) => this.emit(c));
  }

  private text(e: W.Expression): string {
    const [s, t] = this.mod.range(e);
    return this.mod.source.slice(s, t);
  }

  /** The tree of a chain as written (for telling a shuffled tree apart from it). */
  private originalTree(e: W.Expression, ty: Ty, op: '+' | '*', neg = false): Tree {
    const b = e as W.BinaryOperator;
    const member =
      this.siteType(e) &&
      floatTypeName(this.scope.baseType(e)!) === floatTypeName(ty) &&
      (op === '+' ? b.operator === '+' || b.operator === '-' : b.operator === '*') &&
      this.comp.compensationOf(b) === undefined;
    if (!member) return { t: 'term', term: { neg, node: e } };
    const rneg = op === '+' && b.operator === '-' ? !neg : neg;
    return { t: 'op', op, l: this.originalTree(b.left, ty, op, neg), r: this.originalTree(b.right, ty, op, rneg) };
  }

  /**
   * A tree's text: terms as their own rewritten text (a negated term as -(x)), each operation parenthesised,
   * `+` nodes contracted where a product operand's decision says so. `lvText` stands for `lvNode` (x of x += ...).
   */
  private print(tree: Tree, ty: Ty, lvText?: string, lvNode?: W.Expression): string {
    const termText = (t: Term) => {
      const body = t.node === lvNode && lvText !== undefined ? lvText : this.emit(t.node);
      return t.neg ? `-(${body})` : `(${body})`;
    };
    const go = (n: Tree): string => {
      if (n.t === 'term') return termText(n.term);
      if (n.op === '+') {
        for (const [p, other] of [
          [n.l, n.r],
          [n.r, n.l],
        ] as [Tree, Tree][]) {
          if (p.t !== 'term' || !this.isProduct(p.term.node)) continue;
          this.candidates++;
          if (!this.opts.contract || !this.yes('contract', this.rel(this.mod.range(p.term.node)[0]))) continue;
          this.sites++;
          const pb = p.term.node as W.BinaryOperator;
          const a = p.term.neg ? `-(${this.emit(pb.left)})` : this.emit(pb.left);
          return this.fma(a, pb.left, this.emit(pb.right), pb.right, go(other), treeNode(other) ?? null, ty);
        }
      }
      return `(${go(n.l)} ${n.op} ${go(n.r)})`;
    };
    return go(tree);
  }

  // ---- compensation terms ----

  /** Zero of e's type where e is a compensation term whose decision drops it, else undefined. */
  private compensation(e: W.BinaryOperator, ty: Ty): string | undefined {
    if (this.comp.compensationOf(e) === undefined) return undefined;
    this.candidates++;
    if (!this.opts.reassoc || !this.yes('drop', this.rel(this.mod.range(e)[0]))) return undefined;
    this.sites++;
    return `${floatTypeName(ty)}(0.0)`;
  }
}
