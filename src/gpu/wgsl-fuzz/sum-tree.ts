/**
 * The trees of a reassociated sum or product: the terms' grouping as written, a grouping drawn from a site's hash,
 * and a key that tells two groupings apart.
 */
import type { W } from './parse.ts';

export interface Term {
  neg: boolean;
  node: W.Expression;
}
export type Tree = { t: 'term'; term: Term } | { t: 'op'; op: '+' | '*'; l: Tree; r: Tree };

/** The node a tree stands for when it is one term (for its type), else undefined. */
export function treeNode(t: Tree): W.Expression | undefined {
  return t.t === 'term' && !t.term.neg ? t.term.node : undefined;
}

/** x op (terms 1..n as written): the grouping of `x += a + b + ...`, left to right. */
export function originalAssignTree(terms: Term[]): Tree {
  let rest: Tree = { t: 'term', term: terms[1] };
  for (let i = 2; i < terms.length; i++) rest = { t: 'op', op: '+', l: rest, r: { t: 'term', term: terms[i] } };
  return { t: 'op', op: '+', l: { t: 'term', term: terms[0] }, r: rest };
}

const termIds = new WeakMap<W.Expression, number>();
let nextTermId = 1;
export function treeKey(t: Tree): string {
  if (t.t === 'term') {
    let id = termIds.get(t.term.node);
    if (id === undefined) termIds.set(t.term.node, (id = nextTermId++));
    return `${t.term.neg ? '-' : ''}${id}`;
  }
  return `(${treeKey(t.l)}${t.op}${treeKey(t.r)})`;
}

/** The terms in an order and grouping drawn from the site's hash (mulberry32 seeded with it). */
export function shuffledTree(terms: Term[], op: '+' | '*', h: number): Tree {
  let s = h >>> 0;
  const rand = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 15), z | 1);
    z ^= z + Math.imul(z ^ (z >>> 7), z | 61);
    return ((z ^ (z >>> 14)) >>> 0) / 4294967296;
  };
  const order = [...terms];
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  const build = (lo: number, hi: number): Tree => {
    if (hi - lo === 1) return { t: 'term', term: order[lo] };
    const cut = lo + 1 + Math.floor(rand() * (hi - lo - 1));
    return { t: 'op', op, l: build(lo, cut), r: build(cut, hi) };
  };
  return build(0, order.length);
}
