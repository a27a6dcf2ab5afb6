/**
 * The compensation terms of compensated sums: what each `let t = X + Y` sums, and whether an expression is
 * (X - t) + Y, Y + (X - t) or (t - X) - Y of such a `let` (and so algebraically zero).
 */
import { type ParsedModule, W } from './parse.ts';
import type { Binding, Scope } from './types.ts';

/** What `let t = X + Y` binds, for the compensation pattern: the canonical forms of X and Y. */
interface SumOf {
  x: string;
  y: string;
  pure: boolean;
  block: W.Statement[];
  index: number;
}

/** Where a function's walk stands: the block and the statement index in it. */
export interface WalkPosition {
  block: W.Statement[];
  index: number;
}

/** Finds a function's compensation terms, reading its scope and the walk's position as they are when asked. */
export class CompensationFinder {
  private readonly sums = new WeakMap<W.Let, SumOf>();
  private readonly ids = new WeakMap<Binding, number>();

  constructor(
    private readonly mod: ParsedModule,
    private readonly scope: Scope,
    private readonly walk: () => WalkPosition,
  ) {}

  /** The `let` whose compensation e is ((X - t) + Y, Y + (X - t), (t - X) - Y), or undefined. */
  compensationOf(e: W.BinaryOperator): W.Let | undefined {
    const diff = (x: W.Expression) =>
      x instanceof W.BinaryOperator && x.operator === '-' && !x.postfix ? x : undefined;
    const tOf = (x: W.Expression): SumOf | undefined => {
      if (!(x instanceof W.VariableExpr) || x.postfix) return undefined;
      const b = this.scope.lookup(x.name);
      return b?.kind === 'let' && b.decl ? this.sums.get(b.decl) : undefined;
    };
    const letOf = (x: W.Expression) => this.scope.lookup((x as W.VariableExpr).name)!.decl!;
    const matches = (sum: SumOf, x: W.Expression, y: W.Expression) => {
      const cx = this.canon(x);
      const cy = this.canon(y);
      if (!cx || !cy) return false;
      if (!((cx.key === sum.x && cy.key === sum.y) || (cx.key === sum.y && cy.key === sum.x))) return false;
      if (sum.pure && cx.pure && cy.pure) return true;
      // memory or var reads: only where nothing between the let and here can have changed them
      const here = this.walk();
      if (sum.block !== here.block) return false;
      for (let i = sum.index + 1; i < here.index; i++) {
        const s = here.block[i];
        if (!(s instanceof W.Let || s instanceof W.Const)) return false;
      }
      return true;
    };
    if (e.operator === '+') {
      for (const [d, y] of [
        [diff(e.left), e.right],
        [diff(e.right), e.left],
      ] as [W.BinaryOperator | undefined, W.Expression][]) {
        const sum = d && tOf(d.right);
        if (d && sum && matches(sum, d.left, y)) return letOf(d.right);
      }
    } else if (e.operator === '-') {
      const d = diff(e.left);
      const sum = d && tOf(d.left);
      if (d && sum && matches(sum, d.right, e.right)) return letOf(d.left);
    }
    return undefined;
  }

  /** Records what `let t = X + Y` sums, its initializer seen through a function that only returns a sum. */
  noteSum(st: W.Let): void {
    let value = st.value!;
    let env: Map<string, W.Expression> | undefined;
    if (value instanceof W.CallExpr && !value.postfix) {
      const f = this.scope.mod.functions.get(value.name);
      const body = f?.body.filter((s) => !Array.isArray(s) || s.length > 0);
      if (f && body?.length === 1 && body[0] instanceof W.Return && body[0].value) {
        env = new Map(f.args.map((a, i) => [a.name, (value as W.CallExpr).args![i]]));
        value = body[0].value;
      }
    }
    if (!(value instanceof W.BinaryOperator) || value.operator !== '+' || value.postfix) return;
    const x = this.canon(value.left, env);
    const y = this.canon(value.right, env);
    if (!x || !y) return;
    const here = this.walk();
    this.sums.set(st, { x: x.key, y: y.key, pure: x.pure && y.pure, block: here.block, index: here.index });
  }

  /**
   * A structural key of an expression (names as the bindings they resolve to here; `env` maps a callee's
   * parameters to argument expressions of this scope) and whether it reads only immutable values. Undefined
   * for expressions with calls (a call may have effects or differ between evaluations).
   */
  private canon(e: W.Expression, env?: Map<string, W.Expression>): { key: string; pure: boolean } | undefined {
    let pure = true;
    const go = (x: W.Expression, env?: Map<string, W.Expression>): string | undefined => {
      let head: string | undefined;
      if (x instanceof W.VariableExpr || x instanceof W.ConstExpr) {
        const sub = env?.get(x.name);
        if (sub) head = go(sub);
        else {
          const b = this.scope.lookup(x.name);
          if (!b) return undefined;
          if (b.kind === 'var' || b.kind === 'global') pure = false;
          head = `${x.name}#${this.bindingId(b)}`;
        }
      } else if (x instanceof W.LiteralExpr) head = this.text(x);
      else if (x instanceof W.BinaryOperator) {
        const l = go(x.left, env);
        const r = go(x.right, env);
        if (l === undefined || r === undefined) return undefined;
        head = `(${l}${x.operator}${r})`;
      } else if (x instanceof W.UnaryOperator) {
        if (x.operator === '*') pure = false;
        const r = go(x.right, env);
        if (r === undefined) return undefined;
        head = `${x.operator}(${r})`;
      } else return undefined;
      for (let p = x.postfix; p; p = p.postfix) {
        if (p instanceof W.StringExpr) head += `.${p.value}`;
        else if (p instanceof W.ArrayIndex) {
          const i = go(p.index, env);
          if (i === undefined) return undefined;
          head += `[${i}]`;
        } else return undefined;
      }
      return head;
    };
    const key = go(e, env);
    return key === undefined ? undefined : { key, pure };
  }

  private bindingId(b: Binding): number {
    let id = this.ids.get(b);
    if (id === undefined) this.ids.set(b, (id = nextBindingId++));
    return id;
  }

  private text(e: W.Expression): string {
    const [s, t] = this.mod.range(e);
    return this.mod.source.slice(s, t);
  }
}
let nextBindingId = 1;
