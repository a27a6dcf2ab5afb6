/**
 * The router comparison of a Gemma 4 MoE target: the two router conventions must differ where the report says they
 * do, and agree on the chosen experts (docs/GEMMA4-FAMILY.md section 6). Two questions, each answered with
 * everything else held identical:
 * - softmax order: MLX's (top-k of the scores, softmax over the k) against transformers' (softmax over all E, top-k,
 *   renormalise), with the same router scalar convention. Equal in exact arithmetic: the report shows that the
 *   chosen experts agree and which routing weights differ in their f32 bytes, and by how much.
 * - router scalar: MLX's weight vector bf16(router.scale x H^-0.5) against transformers' (norm(h1) x scale) x root,
 *   with the same softmax order. A real difference: the scores move, and where a row's k-th and (k+1)-th scores are
 *   close the chosen experts flip; the report lists each flip with both top-k gaps.
 * Each layer's router must see the same h1 under both conventions, or the differences of earlier layers would
 * show up as differences of later ones: one free-running forward under the base convention records every layer's
 * output, and the compared forwards are teacher-forced on those rows (StepOptions.layerInputs), so layer i's
 * attention and h1 are the same bytes in each (the report checks that the scores of the order comparison are).
 * The free-running consequence (logits of the whole prompt under each convention) is reported beside.
 * CPU twin: src/reference/gemma4/moe/router-compare.ts.
 */
import type { TargetDescription } from '../format/model-description.ts';
import type { GpuContext } from '../gpu/device.ts';
import type { GpuWeights } from '../model/gpu-weights.ts';
import type { GpuRouterOrder, GpuRouterScale } from '../model/gemma4/moe/moe-ops.ts';
import { isMoeTarget, type MoETargetModel } from '../model/gemma4/moe/moe-target.ts';
import { buildTarget } from '../model/build-target.ts';

/** A router convention: the softmax order and how router.scale meets H^-0.5. */
export interface RouterConvention {
  order: GpuRouterOrder;
  scale: GpuRouterScale;
}

export interface RouterCompareOptions {
  tokens: number[];
  precision: 'f32' | 'bf16';
  /** The base convention (default MLX's: order 'mlx', scale 'mlx-bf16'); each comparison flips one half of it. */
  base?: RouterConvention;
  /** Prefill chunk (default: the whole prompt, up to 512 rows). */
  prefillChunk?: number;
  /** At most this many differing weight slots listed per layer (default 32); the counts cover all. */
  listLimit?: number;
}

/** One routing weight that differs between the two softmax orders (matched by expert id). */
export interface WeightDifference {
  row: number;
  expert: number;
  /** The f32 weight under MLX's order and under transformers' order. */
  mlx: number;
  transformers: number;
}

export interface OrderLayer {
  layer: number;
  rows: number;
  /** Rows whose chosen expert sets are equal (expected: every row). */
  setsAgree: number;
  /** Rows whose chosen experts are also in the same slot order (both list them by descending score). */
  slotsAgree: number;
  /** Rows whose chosen experts differ, with both sets (ascending ids). */
  setDifferences: { row: number; mlx: number[]; transformers: number[] }[];
  /** Slots (same row and expert) whose f32 weights differ in their bytes, and the rows holding them. */
  slotsDiffer: number;
  rowsDiffer: number;
  /** Largest |w_mlx - w_transformers| over those slots (0 if none). */
  maxWeightDiff: number;
  /** The first listLimit differing slots, row-major. */
  differences: WeightDifference[];
}

/** A row whose chosen experts differ between the two scalar conventions. */
export interface ScaleFlip {
  row: number;
  /** Chosen experts (ascending ids) under the base scale and the other. */
  base: number[];
  other: number[];
  /** Each run's gap between the row's k-th and (k+1)-th router score: how close the cut was. */
  gapBase: number;
  gapOther: number;
}

export interface ScaleLayer {
  layer: number;
  rows: number;
  /** Largest |score_base - score_other| of router.proj's outputs. */
  maxScoreDiff: number;
  setsAgree: number;
  flips: ScaleFlip[];
}

export interface LogitsConsequence {
  /** Free-running prompt logits of the convention against the base run's. */
  maxAbsDiff: number;
  /** Rows whose argmax differs. */
  argmaxRowsDiffer: number;
}

export interface RouterReport {
  kind: 'router-comparison';
  summary: string;
  target?: { label: string; digest?: string };
  precision: 'f32' | 'bf16';
  prompt: number[];
  experts: number;
  topK: number;
  base: RouterConvention;
  order: {
    /** The scalar convention held fixed. */
    scale: GpuRouterScale;
    /** Every layer's router.proj scores are the same bytes in both runs (the inputs were identical). */
    scoresIdentical: boolean;
    layers: OrderLayer[];
    totals: { rows: number; setsAgree: number; slotsDiffer: number; rowsDiffer: number; maxWeightDiff: number };
    logits: LogitsConsequence;
  };
  scale: {
    /** The softmax order held fixed; `other` is the scalar convention compared with the base's. */
    order: GpuRouterOrder;
    other: GpuRouterScale;
    layers: ScaleLayer[];
    totals: { rows: number; setsAgree: number; flips: number; maxScoreDiff: number };
    logits: LogitsConsequence;
  };
  timings: { totalMs: number };
}

/** The captures of one forward that the comparison reads, per layer. */
interface RouterRun {
  scores: Float32Array[];
  ids: Uint32Array[];
  weights: Float32Array[];
  logits: Float32Array;
}

const MLX_BASE: RouterConvention = { order: 'mlx', scale: 'mlx-bf16' };

export async function compareRouters(
  ctx: GpuContext,
  weights: GpuWeights<TargetDescription>,
  opts: RouterCompareOptions,
  target?: { label: string; digest?: string },
): Promise<RouterReport> {
  const t0 = performance.now();
  const d = weights.desc;
  if (!isMoeTarget(d))
    throw new Error(`${target?.label ?? d.modelType}: not a mixture-of-experts target (no router to compare)`);
  const moe = d.config.moe!;
  const T = opts.tokens.length;
  if (T < 1) throw new Error('router comparison: the prompt is empty');
  const bad = opts.tokens.find((t) => !Number.isInteger(t) || t < 0 || t >= d.vocab);
  if (bad !== undefined) throw new Error(`token ${bad} is outside the vocabulary (${d.vocab})`);
  const base = opts.base ?? MLX_BASE;
  const L = d.layers.length;
  const H = d.hidden;
  const chunk = Math.min(opts.prefillChunk ?? Math.min(T, 512), T);
  const modelOpts = { maxContext: T, maxBlock: 1, prefillChunk: chunk, precision: opts.precision };

  const routerCaps = new Set<string>();
  for (let i = 0; i < L; i++) for (const s of ['router', 'router_ids', 'router_weights']) routerCaps.add(`${s}.${i}`);
  const run = async (c: RouterConvention, captures: Set<string>, inputs?: Float32Array[]) => {
    const model = buildTarget(ctx, weights, { ...modelOpts, router: c.order, routerScale: c.scale }) as MoETargetModel;
    try {
      return await model.prefill(opts.tokens, {
        logits: 'all',
        captures,
        layerInputs: inputs && ((layer, p, M) => (layer === 0 ? undefined : inputs[layer].slice(p * H, (p + M) * H))),
      });
    } finally {
      model.destroy();
    }
  };
  const routerRun = (r: Awaited<ReturnType<typeof run>>): RouterRun => {
    const cap = (n: string) => {
      const v = r.captures.get(n);
      if (!v) throw new Error(`the MoE target did not return capture ${n}`);
      return v;
    };
    return {
      scores: Array.from({ length: L }, (_, i) => cap(`router.${i}`)),
      ids: Array.from({ length: L }, (_, i) => {
        const c = cap(`router_ids.${i}`);
        return new Uint32Array(c.buffer, c.byteOffset, c.length);
      }),
      weights: Array.from({ length: L }, (_, i) => cap(`router_weights.${i}`)),
      logits: r.logits!,
    };
  };

  // The base run, free: its layer outputs become the forced inputs of every compared run (layer i's input is
  // layer i-1's output), and its logits the yardstick of the free-running consequences.
  const layerCaps = new Set(Array.from({ length: L - 1 }, (_, i) => `layer.${i}`));
  const free = await run(base, layerCaps);
  const inputs: Float32Array[] = [];
  for (let i = 1; i < L; i++) inputs[i] = free.captures.get(`layer.${i - 1}`)!;
  const otherOrder: RouterConvention = { order: base.order === 'mlx' ? 'transformers' : 'mlx', scale: base.scale };
  const otherScale: RouterConvention = {
    order: base.order,
    scale: base.scale === 'mlx-bf16' ? 'transformers' : 'mlx-bf16',
  };
  const forcedBase = routerRun(await run(base, routerCaps, inputs));
  const forcedOrder = routerRun(await run(otherOrder, routerCaps, inputs));
  const forcedScale = routerRun(await run(otherScale, routerCaps, inputs));
  const freeOrder = (await run(otherOrder, new Set())).logits!;
  const freeScale = (await run(otherScale, new Set())).logits!;
  const baseLogits = free.logits!;

  const [mlxRun, tfRun] = base.order === 'mlx' ? [forcedBase, forcedOrder] : [forcedOrder, forcedBase];
  const k = moe.topK;
  const E = moe.numExperts;
  const limit = opts.listLimit ?? 32;
  const orderLayers = Array.from({ length: L }, (_, i) => compareOrders(i, T, k, mlxRun, tfRun, limit));
  const scoresIdentical = forcedBase.scores.every((s, i) => sameBytes(s, forcedOrder.scores[i]));
  const scaleLayers = Array.from({ length: L }, (_, i) => compareScales(i, T, k, E, forcedBase, forcedScale));
  const orderTotals = {
    rows: L * T,
    setsAgree: sum(orderLayers.map((l) => l.setsAgree)),
    slotsDiffer: sum(orderLayers.map((l) => l.slotsDiffer)),
    rowsDiffer: sum(orderLayers.map((l) => l.rowsDiffer)),
    maxWeightDiff: Math.max(0, ...orderLayers.map((l) => l.maxWeightDiff)),
  };
  const scaleTotals = {
    rows: L * T,
    setsAgree: sum(scaleLayers.map((l) => l.setsAgree)),
    flips: sum(scaleLayers.map((l) => l.flips.length)),
    maxScoreDiff: Math.max(0, ...scaleLayers.map((l) => l.maxScoreDiff)),
  };
  const V = d.vocab;
  const orderAgree = orderTotals.setsAgree === orderTotals.rows;
  const summary = [
    `softmax order (mlx vs transformers, scale ${base.scale}): ${orderAgree ? 'the chosen experts agree on every row' : `the chosen experts differ on ${orderTotals.rows - orderTotals.setsAgree} of ${orderTotals.rows} rows`}; weights differ in the bytes of ${orderTotals.slotsDiffer} of ${orderTotals.rows * k} slots (${orderTotals.rowsDiffer} rows), by at most ${orderTotals.maxWeightDiff.toExponential(2)}`,
    `router scalar (${base.scale} vs ${otherScale.scale}, order ${base.order}): scores move by up to ${scaleTotals.maxScoreDiff.toExponential(2)}; the chosen experts flip on ${scaleTotals.flips} of ${scaleTotals.rows} rows`,
  ].join('\n');
  return {
    kind: 'router-comparison',
    summary,
    ...(target ? { target } : {}),
    precision: opts.precision,
    prompt: [...opts.tokens],
    experts: E,
    topK: k,
    base,
    order: {
      scale: base.scale,
      scoresIdentical,
      layers: orderLayers,
      totals: orderTotals,
      logits: consequence(baseLogits, freeOrder, V),
    },
    scale: {
      order: base.order,
      other: otherScale.scale,
      layers: scaleLayers,
      totals: scaleTotals,
      logits: consequence(baseLogits, freeScale, V),
    },
    timings: { totalMs: performance.now() - t0 },
  };
}

/** Layer i of the softmax-order comparison: expert sets per row, weights matched by expert id, byte for byte. */
function compareOrders(i: number, T: number, k: number, a: RouterRun, b: RouterRun, limit: number): OrderLayer {
  const out: OrderLayer = {
    layer: i,
    rows: T,
    setsAgree: 0,
    slotsAgree: 0,
    setDifferences: [],
    slotsDiffer: 0,
    rowsDiffer: 0,
    maxWeightDiff: 0,
    differences: [],
  };
  const bitsA = f32Bits(a.weights[i]);
  const bitsB = f32Bits(b.weights[i]);
  for (let t = 0; t < T; t++) {
    const ia = [...a.ids[i].subarray(t * k, (t + 1) * k)];
    const ib = [...b.ids[i].subarray(t * k, (t + 1) * k)];
    const sa = ascending(ia);
    const sb = ascending(ib);
    if (sa.join() !== sb.join()) {
      out.setDifferences.push({ row: t, mlx: sa, transformers: sb });
      continue;
    }
    out.setsAgree++;
    if (ia.join() === ib.join()) out.slotsAgree++;
    let rowDiffers = false;
    ia.forEach((e, ja) => {
      const jb = ib.indexOf(e);
      if (bitsA[t * k + ja] === bitsB[t * k + jb]) return;
      rowDiffers = true;
      out.slotsDiffer++;
      const wa = a.weights[i][t * k + ja];
      const wb = b.weights[i][t * k + jb];
      out.maxWeightDiff = Math.max(out.maxWeightDiff, Math.abs(wa - wb));
      if (out.differences.length < limit) out.differences.push({ row: t, expert: e, mlx: wa, transformers: wb });
    });
    if (rowDiffers) out.rowsDiffer++;
  }
  return out;
}

/** Layer i of the scalar comparison: how far the scores move, and the rows whose chosen experts flip. */
function compareScales(i: number, T: number, k: number, E: number, a: RouterRun, b: RouterRun): ScaleLayer {
  const out: ScaleLayer = { layer: i, rows: T, maxScoreDiff: 0, setsAgree: 0, flips: [] };
  const sa = a.scores[i];
  const sb = b.scores[i];
  for (let j = 0; j < sa.length; j++) out.maxScoreDiff = Math.max(out.maxScoreDiff, Math.abs(sa[j] - sb[j]));
  for (let t = 0; t < T; t++) {
    const ea = ascending([...a.ids[i].subarray(t * k, (t + 1) * k)]);
    const eb = ascending([...b.ids[i].subarray(t * k, (t + 1) * k)]);
    if (ea.join() === eb.join()) {
      out.setsAgree++;
      continue;
    }
    out.flips.push({
      row: t,
      base: ea,
      other: eb,
      gapBase: topKGap(sa.subarray(t * E, (t + 1) * E), k),
      gapOther: topKGap(sb.subarray(t * E, (t + 1) * E), k),
    });
  }
  return out;
}

/** The k-th largest score minus the (k+1)-th (0 when k covers every expert). */
export function topKGap(scores: ArrayLike<number>, k: number): number {
  if (k >= scores.length) return 0;
  const s = Array.from(scores).sort((x, y) => y - x);
  return s[k - 1] - s[k];
}

function consequence(base: Float32Array, other: Float32Array, V: number): LogitsConsequence {
  let maxAbsDiff = 0;
  for (let j = 0; j < base.length; j++) maxAbsDiff = Math.max(maxAbsDiff, Math.abs(base[j] - other[j]));
  let argmaxRowsDiffer = 0;
  for (let t = 0; t < base.length / V; t++) if (argmax(base, t * V, V) !== argmax(other, t * V, V)) argmaxRowsDiffer++;
  return { maxAbsDiff, argmaxRowsDiffer };
}

function argmax(v: Float32Array, off: number, n: number): number {
  let best = 0;
  for (let j = 1; j < n; j++) if (v[off + j] > v[off + best]) best = j;
  return best;
}

function f32Bits(v: Float32Array): Uint32Array {
  return new Uint32Array(v.buffer, v.byteOffset, v.length);
}

function sameBytes(a: Float32Array, b: Float32Array): boolean {
  if (a.length !== b.length) return false;
  const x = f32Bits(a);
  const y = f32Bits(b);
  for (let j = 0; j < x.length; j++) if (x[j] !== y[j]) return false;
  return true;
}

const ascending = (ids: number[]) => [...ids].sort((x, y) => x - y);
const sum = (v: number[]) => v.reduce((a, b) => a + b, 0);

/** The report as lines for a terminal: the summary, then one line per layer and one per flip. */
export function routerReportText(r: RouterReport): string[] {
  const lines = [r.summary, `order comparison (scale ${r.order.scale}), per layer:`];
  for (const l of r.order.layers) {
    lines.push(
      `  layer ${l.layer}: experts agree on ${l.setsAgree}/${l.rows} rows (same slot order ${l.slotsAgree}); weights differ in ${l.slotsDiffer} slots of ${l.rowsDiffer} rows${l.slotsDiffer ? `, max ${l.maxWeightDiff.toExponential(2)}` : ''}`,
    );
    for (const s of l.setDifferences)
      lines.push(`    row ${s.row}: mlx [${s.mlx.join(', ')}], transformers [${s.transformers.join(', ')}]`);
  }
  if (!r.order.scoresIdentical)
    lines.push('  warning: the router scores of the two runs differ in bytes: their inputs were not identical');
  lines.push(
    `  free-running prompt logits: max abs diff ${r.order.logits.maxAbsDiff.toExponential(2)}, argmax differs on ${r.order.logits.argmaxRowsDiffer} rows`,
  );
  lines.push(`scalar comparison (${r.base.scale} vs ${r.scale.other}, order ${r.scale.order}), per layer:`);
  for (const l of r.scale.layers) {
    lines.push(
      `  layer ${l.layer}: scores move by up to ${l.maxScoreDiff.toExponential(2)}; experts agree on ${l.setsAgree}/${l.rows} rows`,
    );
    for (const f of l.flips)
      lines.push(
        `    row ${f.row}: [${f.base.join(', ')}] -> [${f.other.join(', ')}] (top-${r.topK} gap ${f.gapBase.toExponential(2)} under ${r.base.scale}, ${f.gapOther.toExponential(2)} under ${r.scale.other})`,
      );
  }
  lines.push(
    `  free-running prompt logits: max abs diff ${r.scale.logits.maxAbsDiff.toExponential(2)}, argmax differs on ${r.scale.logits.argmaxRowsDiffer} rows`,
  );
  return lines;
}
