/**
 * WGSL parsed with wgsl_reflect's parser, with the source range of every expression. The library records
 * ranges (character offsets) for statements only; the fuzzer rewrites expressions in place in the source
 * text, so this parser subclass records each expression's range from the tokens it consumed: the text
 * outside a rewritten expression stays byte for byte what it was, and no printer of WGSL is needed.
 */
import * as W from 'wgsl_reflect/wgsl_reflect.module.js';

export type Node = W.Node;
export type Expression = W.Expression;
export type Statement = W.Statement;

/** A module's declarations, its source text, and the range of every expression node. */
export interface ParsedModule {
  source: string;
  ast: W.Statement[];
  /** Source range [start, end) of an expression, parentheses and member / index accesses included. */
  range(e: W.Expression): [number, number];
  /** The tokens of the source, in order (names are found by token, never by pattern). */
  tokens: W.Token[];
}

type Range = [number, number];

/** The levels of the expression grammar that return a node whose range is the tokens they consumed. */
const LEVELS = [
  '_short_circuit_or_expression',
  '_short_circuit_and_expr',
  '_inclusive_or_expression',
  '_exclusive_or_expression',
  '_and_expression',
  '_equality_expression',
  '_relational_expression',
  '_shift_expression',
  '_additive_expression',
  '_multiplicative_expression',
  '_unary_expression',
] as const;

class RangedParser extends W.WgslParser {
  readonly ranges = new WeakMap<W.Node, Range>();

  consumed(t0: number): Range {
    return [this._tokens[t0].start, this._tokens[this._current - 1].end];
  }

  // A primary expression and its postfix accesses: `(a + b).x` is one node (the sum) whose range holds the
  // parentheses and the access. Overrides the library's two-line method to take the range around both.
  override _singular_expression(): W.Expression {
    const t0 = this._current;
    const e = this._primary_expression();
    const p = this._postfix_expression();
    if (p) e.postfix = p;
    this.ranges.set(e, this.consumed(t0));
    return e;
  }
}

// Every binary level returns its top node (or the node of the level below, whose range is the same tokens);
// the nodes it builds inside a chain (`a + b` of `a + b + c`) get theirs from their operands (fillRanges).
for (const level of LEVELS) {
  const inner = (W.WgslParser.prototype as unknown as Record<string, () => W.Expression>)[level];
  (RangedParser.prototype as unknown as Record<string, () => W.Expression>)[level] = function (this: RangedParser) {
    const t0 = this._current;
    const e = inner.call(this);
    // A parenthesised node keeps the range its primary expression gave it (with the parentheses).
    if (!this.ranges.has(e) || !e.hasParen) this.ranges.set(e, this.consumed(t0));
    return e;
  };
}

/**
 * Parses a module. Identifiers that wgsl_reflect 1.6.0 scans as keywords although WGSL does not reserve them
 * (`block`, a keyword of an old WGSL draft) are retyped as identifiers first.
 */
export function parseWgsl(source: string): ParsedModule {
  const tokens = new W.WgslScanner(source).scanTokens();
  for (const t of tokens)
    if (t.type === W.TokenTypes.keywords.block) (t as { type: W.TokenType }).type = W.TokenTypes.tokens.ident;
  const parser = new RangedParser();
  const ast = parser.parse(tokens);
  const ranges = parser.ranges;
  const range = (e: W.Expression): Range => {
    const r = ranges.get(e) ?? fillRange(e, ranges);
    if (!r) throw new Error(`no source range for a ${e.astNodeType} expression at line ${e.line}`);
    return r;
  };
  return { source, ast, range, tokens };
}

/** The range of a node built inside a chain of one binary level: from its left operand to its right one. */
function fillRange(e: W.Expression, ranges: WeakMap<W.Node, Range>): Range | undefined {
  if (!(e instanceof W.BinaryOperator) || e.hasParen || e.postfix) return undefined;
  const l = ranges.get(e.left) ?? fillRange(e.left, ranges);
  const r = ranges.get(e.right) ?? fillRange(e.right, ranges);
  if (!l || !r) return undefined;
  const out: Range = [l[0], r[1]];
  ranges.set(e, out);
  return out;
}

/** The expressions directly inside `e` (operands, arguments, index expressions of its postfix accesses). */
export function childExpressions(e: W.Expression): W.Expression[] {
  const out: W.Expression[] = [];
  if (e instanceof W.BinaryOperator) out.push(e.left, e.right);
  else if (e instanceof W.UnaryOperator) out.push(e.right);
  else if (e instanceof W.CallExpr || e instanceof W.CreateExpr) out.push(...(e.args ?? []));
  else if (e instanceof W.BitcastExpr) out.push(e.value);
  for (let p = e.postfix; p; p = p.postfix) if (p instanceof W.ArrayIndex) out.push(p.index);
  return out;
}

export { W };
