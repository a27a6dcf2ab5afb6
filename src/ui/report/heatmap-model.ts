/**
 * The data behind the localization heatmap, separate from drawing so it can be unit-tested in Node and
 * reused by the PNG export: columns are layers (then one "head" column for final_norm and logits), rows
 * are stages in execution order, each cell aggregates the StageDiff rows of one position (or all).
 */
import {
  FINAL_STAGES,
  LAYER_STAGES,
  LINEAR_STAGES,
  MOE_STAGES,
  PLE_STAGES,
  type FirstDivergence,
  type LayerKind,
  type RowDiff,
  type Stage,
  type StageDiff,
} from '../../parity/report.ts';

export type Metric = 'bytes' | 'ulp';
/** A block position, or 'all' (bytes summed, maxima taken over positions). */
export type PositionPick = number | 'all';

export const HEAT_STAGES: readonly Stage[] = [...LAYER_STAGES, ...FINAL_STAGES];
/**
 * Rows of a report with Qwen3.5 Gated DeltaNet layers: the attention stages, then the linear layers' own
 * (projections, conv, recurrence, gated norm, out_proj output; MLP and layer output are shared), then the final
 * stages. A report without them keeps HEAT_STAGES.
 */
export const HYBRID_HEAT_STAGES: readonly Stage[] = [
  ...LAYER_STAGES.slice(0, 4),
  ...LINEAR_STAGES.filter((s) => !(LAYER_STAGES as readonly string[]).includes(s)),
  ...LAYER_STAGES.slice(4),
  ...FINAL_STAGES,
];

/**
 * Rows of a report with Gemma 4 MoE layers (26B-A4B): the attention stages and the dense MLP, then the router's scores
 * and the experts' weighted sum (execution order, MoETargetModel.stageOrder), then the layer output and the final
 * stages.
 */
export const MOE_HEAT_STAGES: readonly Stage[] = [
  ...LAYER_STAGES.slice(0, 5),
  ...MOE_STAGES,
  ...LAYER_STAGES.slice(5),
  ...FINAL_STAGES,
];

/**
 * Rows of a report with Gemma 4 E-series per-layer inputs (E2B / E4B): the attention stages and the MLP, then the
 * per-layer input's contribution (execution order, ETargetModel.stageOrder), then the layer output and the final stages.
 */
export const PLE_HEAT_STAGES: readonly Stage[] = [
  ...LAYER_STAGES.slice(0, 5),
  ...PLE_STAGES,
  ...LAYER_STAGES.slice(5),
  ...FINAL_STAGES,
];

/**
 * The heatmap's rows for a report's stages: MoE rows when it has router / experts stages, E-series rows when it has
 * per-layer input stages, linear rows for Qwen3.5.
 */
export function heatStagesOf(stages: readonly Pick<StageDiff, 'stage' | 'layerKind'>[]): readonly Stage[] {
  const has = (own: readonly string[]) => stages.some((s) => own.includes(s.stage));
  if (stages.some((s) => s.layerKind === 'linear')) return HYBRID_HEAT_STAGES;
  if (has(MOE_STAGES)) return MOE_HEAT_STAGES;
  if (has(PLE_STAGES)) return PLE_HEAT_STAGES;
  return HEAT_STAGES;
}

export interface HeatColumn {
  /** Layer index, or null for the head column (final_norm, logits). */
  layer: number | null;
  kind: LayerKind | null;
  label: string;
  /**
   * A Gemma 4 KV-shared layer (E2B / E4B): it has no k / v projections and attends to an earlier layer's K/V, so its
   * k and v rows are empty by construction rather than uncaptured.
   */
  kvShared?: boolean;
}

export interface HeatCell {
  col: number;
  row: number;
  stage: Stage;
  layer: number | null;
  diff: RowDiff;
  /** 0 = equal; otherwise in (0, 1], the colour scale position. */
  level: number;
  first: boolean;
}

export interface HeatGrid {
  columns: HeatColumn[];
  stages: readonly Stage[];
  cells: HeatCell[];
  /** cell lookup by col * stages.length + row */
  at: (col: number, row: number) => HeatCell | undefined;
  metric: Metric;
  /** What the full colour scale means, e.g. max log10 ULP in the grid. */
  scaleMax: number;
  positions: number[];
}

/** Aggregates one stage's rows for a position pick; undefined when the position has no row. */
export function pickRows(rows: RowDiff[], pick: PositionPick): RowDiff | undefined {
  const sel = pick === 'all' ? rows : rows.filter((r) => r.position === pick);
  if (sel.length === 0) return undefined;
  const sum = (k: keyof RowDiff) => sel.reduce((a, r) => a + (Number.isFinite(r[k]) ? r[k] : 0), 0);
  const max = (k: keyof RowDiff) => sel.reduce((a, r) => (Number.isFinite(r[k]) ? Math.max(a, r[k]) : a), 0);
  return {
    position: pick === 'all' ? NaN : pick,
    bytesDiffering: sum('bytesDiffering'),
    bytesTotal: sum('bytesTotal'),
    maxAbs: max('maxAbs'),
    maxUlp: max('maxUlp'),
    nmse: max('nmse'),
  };
}

/** log10 of ULPs, with 1 ULP mapping to a small visible value rather than 0 (0 means equal). */
export function ulpLevel(maxUlp: number): number {
  return maxUlp > 0 ? Math.log10(maxUlp) + 0.3 : 0;
}

/**
 * Share of bytes differing on a square-root scale with a floor: any difference, even one byte, gets at
 * least the palette's pale amber, while 15% and 40% (typical of a difference born at layer 0 and of one
 * that has spread) still look different. A log scale painted everything past 5% the same red.
 */
export function bytesLevel(differing: number, total: number): number {
  if (!(total > 0) || !(differing > 0)) return 0;
  return 0.15 + 0.85 * Math.sqrt(Math.min(1, differing / total));
}

/** Legend swatches for a metric: [level, label]. */
export function legendStops(grid: Pick<HeatGrid, 'metric' | 'scaleMax'>): [number, string][] {
  if (grid.metric === 'bytes')
    return [
      [bytesLevel(1, 1e4), '0.01%'],
      [bytesLevel(1, 100), '1%'],
      [bytesLevel(1, 4), '25%'],
      [1, '100% of bytes differ'],
    ];
  return [
    [0.04, '1 ULP'],
    [0.5, `10^${(grid.scaleMax / 2).toFixed(1)}`],
    [1, `10^${grid.scaleMax.toFixed(1)} ULP`],
  ];
}

export function buildHeatmap(
  stages: StageDiff[],
  pick: PositionPick,
  metric: Metric,
  first: FirstDivergence | null,
): HeatGrid {
  const layerKinds = new Map<number, LayerKind | null>();
  const heatStages = heatStagesOf(stages);
  let hasHead = false;
  const positions = new Set<number>();
  // Gemma layers with a q stage and no k stage: the KV-shared layers of an E-series target (Qwen3.5's linear layers
  // have neither and are not attention layers).
  const withQ = new Set<number>();
  const withK = new Set<number>();
  for (const s of stages) {
    if (s.layer === null) hasHead = true;
    else if (!layerKinds.has(s.layer) || layerKinds.get(s.layer) === null) layerKinds.set(s.layer, s.layerKind);
    if (s.layer !== null && s.stage === 'q') withQ.add(s.layer);
    if (s.layer !== null && s.stage === 'k') withK.add(s.layer);
    for (const r of s.rows) if (Number.isFinite(r.position)) positions.add(r.position);
  }
  // Every layer from 0 to the last one seen gets a column, so gaps (layers without captures) show as gaps.
  const last = layerKinds.size ? Math.max(...layerKinds.keys()) : -1;
  const columns: HeatColumn[] = [];
  for (let l = 0; l <= last; l++) {
    const kind = layerKinds.get(l) ?? null;
    const shared = (kind === 'sliding' || kind === 'full') && withQ.has(l) && !withK.has(l) && withK.size > 0;
    columns.push({ layer: l, kind, label: String(l), ...(shared ? { kvShared: true } : {}) });
  }
  if (hasHead) columns.push({ layer: null, kind: null, label: 'head' });
  const colOf = (layer: number | null) =>
    layer === null ? (hasHead ? columns.length - 1 : -1) : layer <= last ? layer : -1;

  const raw: Omit<HeatCell, 'level'>[] = [];
  const values: number[] = [];
  for (const s of stages) {
    const col = colOf(s.layer);
    const row = heatStages.indexOf(s.stage);
    // Layer stages belong to layer columns, final stages to the head column; anything else is dropped.
    if (col < 0 || row < 0 || (s.layer === null) !== (FINAL_STAGES as readonly string[]).includes(s.stage)) continue;
    const diff = pickRows(s.rows, pick);
    if (!diff) continue;
    const isFirst =
      first !== null &&
      first.stage === s.stage &&
      first.layer === s.layer &&
      (pick === 'all' || pick === first.position);
    raw.push({ col, row, stage: s.stage, layer: s.layer, diff, first: isFirst });
    values.push(metric === 'bytes' ? bytesLevel(diff.bytesDiffering, diff.bytesTotal) : ulpLevel(diff.maxUlp));
  }
  const scaleMax = metric === 'bytes' ? 1 : Math.max(1, ...values);
  const cells: HeatCell[] = raw.map((c, i) => ({
    ...c,
    level: values[i] > 0 ? Math.min(1, Math.max(0.04, values[i] / scaleMax)) : 0,
  }));
  const index = new Map<number, HeatCell>();
  for (const c of cells) index.set(c.col * heatStages.length + c.row, c);
  return {
    columns,
    stages: heatStages,
    cells,
    at: (col, row) => index.get(col * heatStages.length + row),
    metric,
    scaleMax,
    positions: [...positions].sort((a, b) => a - b),
  };
}

/** Sequential palette from pale amber to dark red; equal cells get a neutral grey-green. */
export const EQUAL_COLOR = '#e3ece6';
export const MISSING_COLOR = '#ffffff';
/** The k and v cells of a KV-shared layer (no projections of its own), hatched over this tint. */
export const SHARED_COLOR = '#eef1f5';
const STOPS: [number, number, number][] = [
  [254, 224, 139],
  [253, 174, 97],
  [244, 109, 67],
  [215, 48, 39],
  [127, 0, 0],
];

export function heatColor(level: number): string {
  if (!(level > 0)) return EQUAL_COLOR;
  const x = Math.min(1, level) * (STOPS.length - 1);
  const i = Math.min(STOPS.length - 2, Math.floor(x));
  const f = x - i;
  const c = STOPS[i].map((v, k) => Math.round(v + (STOPS[i + 1][k] - v) * f));
  return `rgb(${c[0]}, ${c[1]}, ${c[2]})`;
}
