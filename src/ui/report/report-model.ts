/**
 * Turns untrusted JSON (a file, a share link, even a live run) into a ProbeReport whose every field has
 * the type the schema promises. validateReport checks the shape of the top levels; this goes all the way
 * down, coercing numbers, cutting strings and arrays to sane lengths and dropping unknown enum values, so
 * the renderers can trust types and sizes (a crafted ring of 10^9 slots must not freeze the page).
 * Strings are kept verbatim: they are only ever rendered as text.
 */
import {
  FINAL_STAGES,
  LAYER_STAGES,
  LINEAR_STAGES,
  MOE_STAGES,
  PLE_STAGES,
  REPORT_SCHEMA,
  validateReport,
  type CheckpointInfo,
  type DrawResult,
  type ExactnessSelfTestSummary,
  type FirstDivergence,
  type LayerKind,
  type LensLayer,
  type ProbeReport,
  type Provenance,
  type RingView,
  type RowDiff,
  type Stage,
  type StageDiff,
  type StateView,
} from '../../parity/report.ts';
import type { AdapterReport } from '../../gpu/device.ts';
import { type COMPILER_FIELDS, MATH_MODES, type CompilerProvenance } from '../../parity/compiler-provenance.ts';
import { LIMIT_PROFILES, type LimitProfileName } from '../../gpu/limit-profiles.ts';
import { count, num, str } from '../common/format.ts';
import { normalizePerformance } from '../adapter/performance-view.ts';

/** Bounds far above anything a real probe produces (60 layers, K <= 8, W = 1024, 4 draws). */
export const LIMITS = { draws: 64, rows: 512, layers: 1024, stages: 16_384, window: 65_536, strings: 400 } as const;

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : {});
const arr = (v: unknown, max: number): unknown[] => (Array.isArray(v) ? v.slice(0, max) : []);
// Every stage a report may hold: attention layers', Qwen3.5 linear layers', Gemma 4 MoE layers' (router, experts),
// E-series layers' (the per-layer input), final.
const ALL_STAGES: readonly string[] = [
  ...LAYER_STAGES,
  ...LINEAR_STAGES,
  ...MOE_STAGES,
  ...PLE_STAGES,
  ...FINAL_STAGES,
];
const isStage = (v: unknown): v is Stage => typeof v === 'string' && ALL_STAGES.includes(v);
const kind = (v: unknown): LayerKind | null => (v === 'sliding' || v === 'full' || v === 'linear' ? v : null);
const layerIndex = (v: unknown): number | null => {
  const n = count(v);
  return Number.isNaN(n) || n >= LIMITS.layers ? null : n;
};

export type ReadResult = { ok: true; report: ProbeReport } | { ok: false; problems: string[] };

/** validateReport first (its problems are what the user sees), then a deep, typed copy of a probe report. */
export function readReport(x: unknown): ReadResult {
  const problems = validateReport(x);
  if (problems.length) return { ok: false, problems };
  if ((x as Obj).kind !== 'probe')
    return { ok: false, problems: [`this is a ${JSON.stringify((x as Obj).kind)} report, not a probe report`] };
  return { ok: true, report: normalizeReport(x as Obj) };
}

export function normalizeReport(x: Obj): ProbeReport {
  const t = obj(x.timings);
  return {
    schema: REPORT_SCHEMA,
    kind: 'probe',
    verdict: x.verdict === 'equal' ? 'equal' : 'diverges',
    summary: str(x.summary, LIMITS.strings),
    consequence: str(x.consequence, LIMITS.strings),
    provenance: normalizeProvenance(obj(x.provenance)),
    draws: arr(x.draws, LIMITS.draws).map((d, i) => draw(obj(d), i)),
    timings: { totalMs: num(t.totalMs), ...(t.loadMs !== undefined ? { loadMs: num(t.loadMs) } : {}) },
    ...(x.performance !== undefined ? { performance: normalizePerformance(x.performance) } : {}),
  };
}

function checkpoint(c: Obj): CheckpointInfo {
  return {
    label: str(c.label, LIMITS.strings),
    modelType: str(c.modelType, 100),
    digest: str(c.digest, 200),
    layers: num(c.layers),
    hidden: num(c.hidden),
    heads: num(c.heads),
    window: num(c.window),
    vocab: num(c.vocab),
    quantization: str(c.quantization, LIMITS.strings),
    bytes: num(c.bytes),
  };
}

function adapter(a: Obj): AdapterReport {
  const limits: Record<string, number> = {};
  for (const [k, v] of Object.entries(obj(a.limits)).slice(0, 200))
    if (typeof v === 'number') limits[k.slice(0, 100)] = v;
  const strings = (v: unknown) =>
    arr(v, 100)
      .map((s) => str(s, 100))
      .filter(Boolean);
  return {
    vendor: str(a.vendor, 200),
    architecture: str(a.architecture, 200),
    device: str(a.device, 200),
    description: str(a.description, 200),
    limits,
    features: strings(a.features),
    adapterFeatures: strings(a.adapterFeatures),
    ...(a.subgroupMinSize !== undefined ? { subgroupMinSize: num(a.subgroupMinSize) } : {}),
    ...(a.subgroupMaxSize !== undefined ? { subgroupMaxSize: num(a.subgroupMaxSize) } : {}),
    isFallbackAdapter: a.isFallbackAdapter === true,
    platform: str(a.platform, 200),
    ...(typeof a.backend === 'string' ? { backend: str(a.backend, 100) } : {}),
    ...((LIMIT_PROFILES as readonly unknown[]).includes(a.limitProfile)
      ? { limitProfile: a.limitProfile as LimitProfileName }
      : {}),
  };
}

/** The compiler record as text fields; a math mode the page does not know reads "unknown". */
function compiler(c: Obj): CompilerProvenance {
  const text = (k: (typeof COMPILER_FIELDS)[number]) => str(c[k], LIMITS.strings);
  const mode = MATH_MODES.find((m) => m === c.mathMode) ?? 'unknown';
  return {
    browser: text('browser'),
    os: text('os'),
    engine: text('engine'),
    backend: text('backend'),
    backendFrom: text('backendFrom'),
    mathMode: mode,
    math: text('math'),
    mathSource: text('mathSource'),
  };
}

/** A typed copy of a report's provenance (probe and trace reports share it). */
export function normalizeProvenance(p: Obj): Provenance {
  const app = obj(p.app);
  const t = obj(p.selfTest);
  return {
    app: { name: 'ringside', version: str(app.version, 50) },
    ...(typeof p.commit === 'string' ? { commit: str(p.commit, 60) } : {}),
    ...(p.selfTest !== undefined
      ? {
          selfTest: {
            ok: t.ok === true,
            checks: count(t.checks),
            failed: count(t.failed),
            skipped: count(t.skipped),
            at: str(t.at, 100),
          },
        }
      : {}),
    createdAt: str(p.createdAt, 100),
    adapter: adapter(obj(p.adapter)),
    platform: str(p.platform, LIMITS.strings),
    ...(p.compiler !== undefined ? { compiler: compiler(obj(p.compiler)) } : {}),
    policy: str(p.policy, 100),
    precision: p.precision === 'bf16' ? 'bf16' : 'f32',
    block: num(p.block),
    drawLengths: arr(p.drawLengths, LIMITS.draws).map(num),
    prefillChunk: num(p.prefillChunk),
    ...(p.draftPosition === 'hf' || p.draftPosition === 'mlxcel' ? { draftPosition: p.draftPosition } : {}),
    target: checkpoint(obj(p.target)),
    ...(p.assistant !== undefined && p.assistant !== null ? { assistant: checkpoint(obj(p.assistant)) } : {}),
    ...(p.exactnessSelfTest !== undefined ? { exactnessSelfTest: exactnessSelfTest(obj(p.exactnessSelfTest)) } : {}),
  };
}

/** A typed copy of the exactness self-test's summary (validateReport has checked its fields' types). */
export function exactnessSelfTest(e: Obj): ExactnessSelfTestSummary {
  const text = (k: 'kernel' | 'fault' | 'warning') =>
    typeof e[k] === 'string' ? { [k]: str(e[k], LIMITS.strings) } : {};
  return {
    ok: e.ok === true,
    checks: num(e.checks),
    failed: num(e.failed),
    cached: e.cached === true,
    ms: num(e.ms),
    kernelClasses: arr(e.kernelClasses, 8).map((c) => str(c, 20)),
    shaderBuild: str(e.shaderBuild, 64),
    ...text('kernel'),
    ...text('fault'),
    ...text('warning'),
  };
}

function row(r: Obj): RowDiff {
  return {
    position: num(r.position),
    bytesDiffering: num(r.bytesDiffering),
    bytesTotal: num(r.bytesTotal),
    maxAbs: num(r.maxAbs),
    maxUlp: num(r.maxUlp),
    nmse: num(r.nmse),
  };
}

function firstDivergence(f: unknown): FirstDivergence | null {
  const o = obj(f);
  if (!isStage(o.stage)) return null;
  return {
    layer: layerIndex(o.layer),
    layerKind: kind(o.layerKind),
    stage: o.stage,
    position: num(o.position),
    text: str(o.text, LIMITS.strings),
    ...(typeof o.cause === 'string' ? { cause: str(o.cause, LIMITS.strings) } : {}),
  };
}

function stageDiffs(v: unknown): StageDiff[] {
  const out: StageDiff[] = [];
  for (const s of arr(v, LIMITS.stages)) {
    const o = obj(s);
    if (!isStage(o.stage)) continue; // an unknown stage has no row in the heatmap
    out.push({
      layer: layerIndex(o.layer),
      layerKind: kind(o.layerKind),
      stage: o.stage,
      rows: arr(o.rows, LIMITS.rows).map((r) => row(obj(r))),
    });
  }
  return out;
}

function lens(v: unknown): LensLayer[] {
  return arr(v, LIMITS.layers).map((l) => {
    const o = obj(l);
    return {
      layer: num(o.layer),
      rows: arr(o.rows, LIMITS.rows).map((r) => {
        const q = obj(r);
        return { position: num(q.position), kl: num(q.kl), top1Agree: q.top1Agree === true };
      }),
    };
  });
}

function ring(v: unknown): RingView | undefined {
  const o = obj(v);
  const w = count(o.window);
  if (!(w >= 1 && w <= LIMITS.window)) return undefined;
  const blockOrder =
    o.blockOrder === 'physical' || o.blockOrder === 'chronological' ? o.blockOrder : 'masked-chronological';
  return {
    window: w,
    slotPositions: arr(o.slotPositions, w).map((p) => (p === null ? null : num(p))),
    blockStart: num(o.blockStart),
    base: num(o.base),
    blockSlots: arr(o.blockSlots, LIMITS.rows).map(num),
    chainOrder: 'physical',
    blockOrder,
  };
}

/** A Qwen3.5 draw's recurrent state view; undefined when it has no layer rows to show. */
function stateView(v: unknown): StateView | undefined {
  const o = obj(v);
  const layers = arr(o.layers, LIMITS.layers).flatMap((l) => {
    const x = obj(l);
    const layer = layerIndex(x.layer);
    return layer === null ? [] : [{ layer, rows: arr(x.rows, LIMITS.rows).map((r) => row(obj(r))) }];
  });
  if (layers.length === 0) return undefined;
  return {
    blockStart: num(o.blockStart),
    valueHeads: num(o.valueHeads),
    keyHeadDim: num(o.keyHeadDim),
    valueHeadDim: num(o.valueHeadDim),
    convKernel: num(o.convKernel),
    convChannels: num(o.convChannels),
    fullLayers: arr(o.fullLayers, LIMITS.layers)
      .map(layerIndex)
      .filter((n): n is number => n !== null),
    layers,
  };
}

function draw(d: Obj, i: number): DrawResult {
  const t = obj(d.timings);
  const stages = d.stages === undefined ? undefined : stageDiffs(d.stages);
  const lensLayers = d.lens === undefined ? undefined : lens(d.lens);
  const ringView = d.ring === undefined ? undefined : ring(d.ring);
  const state = d.state === undefined ? undefined : stateView(d.state);
  return {
    index: Number.isNaN(count(d.index)) ? i : count(d.index),
    salt: num(d.salt),
    promptLength: num(d.promptLength),
    verdict: d.verdict === 'equal' ? 'equal' : 'diverges',
    position: d.position === null ? null : num(d.position),
    bytesDiffering: num(d.bytesDiffering),
    bytesTotal: num(d.bytesTotal),
    text: str(d.text, LIMITS.strings),
    rows: arr(d.rows, LIMITS.rows).map((r) => row(obj(r))),
    firstDivergence: firstDivergence(d.firstDivergence),
    ...(stages ? { stages } : {}),
    ...(lensLayers ? { lens: lensLayers } : {}),
    ...(ringView ? { ring: ringView } : {}),
    ...(state ? { state } : {}),
    timings: {
      prefillMs: num(t.prefillMs),
      chainMs: num(t.chainMs),
      blockMs: num(t.blockMs),
      ...(t.localizeMs !== undefined ? { localizeMs: num(t.localizeMs) } : {}),
      ...(t.stateMs !== undefined ? { stateMs: num(t.stateMs) } : {}),
    },
  };
}

/** The draw whose details (heatmap, lens, rows) are shown first: the first diverging draw with stages. */
export function defaultDetailDraw(r: ProbeReport): number {
  const withStages = r.draws.findIndex((d) => d.verdict === 'diverges' && (d.stages?.length ?? 0) > 0);
  if (withStages >= 0) return withStages;
  const diverging = r.draws.findIndex((d) => d.verdict === 'diverges');
  return diverging >= 0 ? diverging : Math.max(0, r.draws.length - 1);
}

/** The first divergence the verdict card names: the first draw that has one. */
export function firstDivergenceOf(r: ProbeReport): { draw: DrawResult; fd: FirstDivergence } | undefined {
  for (const d of r.draws) if (d.firstDivergence) return { draw: d, fd: d.firstDivergence };
  return undefined;
}

/** The long draw's ring (largest prompt with a ring view). */
export function longRing(r: ProbeReport): { draw: DrawResult; ring: RingView } | undefined {
  let best: { draw: DrawResult; ring: RingView } | undefined;
  for (const d of r.draws)
    if (d.ring && (!best || (d.promptLength || 0) > (best.draw.promptLength || 0))) best = { draw: d, ring: d.ring };
  return best;
}

/** The long draw's recurrent state view (a Qwen3.5 report's, in place of the ring): the largest prompt with one. */
export function longState(r: ProbeReport): { draw: DrawResult; state: StateView } | undefined {
  let best: { draw: DrawResult; state: StateView } | undefined;
  for (const d of r.draws)
    if (d.state && (!best || (d.promptLength || 0) > (best.draw.promptLength || 0))) best = { draw: d, state: d.state };
  return best;
}
