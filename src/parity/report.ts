/**
 * The one report schema shared by the page and the CLI (`ringside-report/1`). A report renders the
 * same from a file, a share link or a live run, without the model. Everything in it is plain JSON
 * data; the page renders strings only as text (never HTML).
 */
import type { WgslFuzzRecord } from '../gpu/wgsl-fuzz/config.ts';
import type { AdapterReport } from '../gpu/device.ts';
import { COMPILER_FIELDS, type CompilerProvenance } from './compiler-provenance.ts';
import { probeProblems, traceProblems } from './report-consistency.ts';
import { type TraceJudgement, validateJudgement } from './trace-judgement.ts';
import { LIMIT_PROFILES } from '../gpu/limit-profiles.ts';

export const REPORT_SCHEMA = 'ringside-report/1';

export type Verdict = 'equal' | 'diverges';
// The stage vocabulary belongs to the engines that capture the stages (src/model/stages.ts); reports name them.
export {
  FINAL_STAGES,
  LAYER_STAGES,
  LINEAR_STAGES,
  MOE_STAGES,
  PLE_STAGES,
  type FinalStage,
  type LayerKind,
  type LayerStage,
  type LinearStage,
  type MoeStage,
  type PleStage,
  type Stage,
} from '../model/stages.ts';
import type { LayerKind, Stage } from '../model/stages.ts';

export const STAGE_LABELS: Record<Stage, string> = {
  q: 'q (after q_norm + RoPE)',
  k: 'k (after k_norm + RoPE)',
  v: 'v (after v_norm)',
  attn: 'attention output',
  mlp: 'MLP output',
  layer: 'layer output',
  proj: 'projections (in_proj qkv, z, b, a)',
  conv: 'conv (causal conv1d + SiLU)',
  recurrence: 'recurrence (o = S q)',
  gated_norm: 'gated norm',
  out: 'Gated DeltaNet output (out_proj)',
  router: 'router scores (router.proj)',
  experts: 'experts output (weighted sum, before post_feedforward_layernorm_2)',
  ple: 'per-layer input (gate, GeLU product, projection, post_per_layer_input_norm; before layer_scalar)',
  final_norm: 'final norm',
  logits: 'LM head logits',
};

/**
 * Qwen3.5's labels: its gated full attention rotates only the first rotaryDim dims of q and k, and takes v
 * straight from v_proj (it has no v_norm, unlike Gemma 4).
 */
export const QWEN_STAGE_LABELS: Record<Stage, string> = {
  ...STAGE_LABELS,
  q: 'q (after q_norm + partial RoPE)',
  k: 'k (after k_norm + partial RoPE)',
  v: 'v (v_proj output, no v_norm)',
};

/** A target's model family in words, from its model_type ("Qwen3.5" for every qwen3_5* type, else "Gemma 4"). */
export function familyName(modelType: string): string {
  return modelType.startsWith('qwen3_5') ? 'Qwen3.5' : 'Gemma 4';
}

export interface CheckpointInfo {
  label: string;
  modelType: string;
  digest: string;
  layers: number;
  hidden: number;
  heads: number;
  window: number;
  vocab: number;
  /** e.g. "affine 4-bit g64, MLP 8-bit" */
  quantization: string;
  bytes: number;
}

/** The GPU self-test the page ran before a report (the adapter card's "Run GPU self-test"), as the report keeps it. */
export interface SelfTestRecord {
  ok: boolean;
  /** Checks run, failed and skipped (an adapter without shader-f16 or subgroups skips those). */
  checks: number;
  failed: number;
  skipped: number;
  /** When it ran (ISO 8601). */
  at: string;
}

export interface Provenance {
  app: { name: 'ringside'; version: string };
  /** The git commit the page was served from (src/parity/version.ts APP_COMMIT); absent where it is not known. */
  commit?: string;
  /** The last GPU self-test before the run, in the page; absent when none ran (and from the command line). */
  selfTest?: SelfTestRecord;
  createdAt: string;
  adapter: AdapterReport;
  /** navigator.userAgent or "node v20 linux x64 (Dawn)". */
  platform: string;
  /** The shader compiler: browser, engine, backend and its math mode (absent in reports made before it was kept). */
  compiler?: CompilerProvenance;
  policy: string;
  precision: 'f32' | 'bf16';
  block: number;
  drawLengths: number[];
  prefillChunk: number;
  draftPosition?: 'hf' | 'mlxcel';
  target: CheckpointInfo;
  assistant?: CheckpointInfo;
  /** The exactness self-test run on this adapter before the run (absent in reports made before it existed). */
  exactnessSelfTest?: ExactnessSelfTestSummary;
  /** Present when the kernels were compiled under the compiler fuzzer (src/gpu/wgsl-fuzz/config.ts). */
  wgslFuzz?: WgslFuzzRecord;
}

/**
 * What a report records of the exactness self-test (src/parity/exactness-selftest.ts): whether this adapter's
 * shader compiler kept a built-in model's verify blocks equal to its chain, byte for byte. When it did not, the
 * `exact` verdicts of the run are not a reference, and `warning` says so.
 */
export interface ExactnessSelfTestSummary {
  ok: boolean;
  /** Checks run, and how many of them differed. */
  checks: number;
  failed: number;
  /** Whether the result came from an earlier run on the same adapter and shader build (then `ms` is that run's). */
  cached: boolean;
  ms: number;
  kernelClasses: string[];
  /** The first 16 hex digits of the SHA-256 of the build's WGSL sources. */
  shaderBuild: string;
  /** The first kernel whose block rows differed, in words (a failed test). */
  kernel?: string;
  /** A fault injected into the kernels for a test of the self-test itself. */
  fault?: string;
  warning?: string;
}

/** Differences between the two arms' values for one row (position). */
export interface RowDiff {
  position: number;
  bytesDiffering: number;
  bytesTotal: number;
  maxAbs: number;
  /** Largest difference in units in the last place of the storage format (f32 or bf16). */
  maxUlp: number;
  nmse: number;
}

export interface FirstDivergence {
  /** Layer index, or null for final_norm / logits. */
  layer: number | null;
  layerKind: LayerKind | null;
  stage: Stage;
  /** Position within the block (0-based row of the verify block). */
  position: number;
  /** "first divergence: layer 0 (sliding) attention output at position 0", "... layer 0 (linear) recurrence ..." */
  text: string;
  /**
   * Why, where the policy can say: under the MLX policies, the MLX kernel pair of the stage's linears
   * and what the narrow pin would cost ("MLX on ...: gate_proj, up_proj: qmv (M = 1) vs qmv_wide (M = 4);
   * narrow pin ...", src/parity/mlx-blame.ts).
   */
  cause?: string;
}

export interface StageDiff {
  layer: number | null;
  layerKind: LayerKind | null;
  stage: Stage;
  rows: RowDiff[];
}

export interface LensRow {
  position: number;
  /** KL(chain || block) of the softmax of the lens logits. */
  kl: number;
  top1Agree: boolean;
}

export interface LensLayer {
  layer: number;
  rows: LensRow[];
}

/** Where the keys of the long draw live, for the ring diagram. */
export interface RingView {
  window: number;
  /** Sequence positions held by each physical slot before the block (null = empty). */
  slotPositions: (number | null)[];
  /** Position of the first block row; block row t is written to slot (blockStart + t - base) mod W. */
  blockStart: number;
  base: number;
  blockSlots: number[];
  /** How each arm reads keys for block row j: "physical" (slot order) or "chronological". */
  chainOrder: 'physical';
  blockOrder: 'physical' | 'chronological' | 'masked-chronological';
}

/**
 * A Qwen3.5 draw's recurrent state where a Gemma draw has its ring (src/parity/state-view.ts): per Gated
 * DeltaNet layer, S after each block token t, the block arm's staged S against the chain arm's committed S.
 */
export interface StateView {
  /** Position of block row 0. */
  blockStart: number;
  /** S per linear layer is valueHeads x keyHeadDim x valueHeadDim f32. */
  valueHeads: number;
  keyHeadDim: number;
  valueHeadDim: number;
  /** The conv window: the last convKernel - 1 raw in_proj_qkv rows of convChannels. */
  convKernel: number;
  convChannels: number;
  /** Full-attention layers (a linear KV cache, one row per position: no ring). */
  fullLayers: number[];
  /** rows[t]: S after block token t, chain arm versus block arm (position = t). */
  layers: { layer: number; rows: RowDiff[] }[];
}

export interface DrawResult {
  index: number;
  salt: number;
  promptLength: number;
  verdict: Verdict;
  /** First block position that differs, or null. */
  position: number | null;
  /** Bytes differing in that row (0 when equal) and bytes per row. */
  bytesDiffering: number;
  bytesTotal: number;
  /** mlxcel's words: "verify block position P differs from the single-token chain in N of M logit bytes". */
  text: string;
  rows: RowDiff[];
  firstDivergence: FirstDivergence | null;
  stages?: StageDiff[];
  lens?: LensLayer[];
  ring?: RingView;
  /** Qwen3.5 targets: the long draw's recurrent state (in place of a ring). */
  state?: StateView;
  timings: { prefillMs: number; chainMs: number; blockMs: number; localizeMs?: number; stateMs?: number };
}

/**
 * Throughput of the GPU that produced the report, measured on request in the page (`npm run bench`
 * short form): ratios to the adapter's own copy bandwidth and FMA rate.
 */
export interface PerformanceSummary {
  /** "timestamp-query" or "wall-clock". */
  timing: string;
  copyGBps: number;
  fmaF32Gflops: number;
  fmaF16Gflops?: number;
  /** 12B 4-bit gate/up at M = 1: GB/s over copy GB/s. */
  matvec4bitBwRatio?: number;
  /** Cost of the same matmul at M = 4 over M = 1. */
  k4VsM1?: number;
  /** The MLP's gate + up + GeGLU as the engine runs it (4-bit, M = 1): GB/s of both weights over copy GB/s. */
  gateUp4bitBwRatio?: number;
  /** Prefill matmul GFLOP/s over FMA GFLOP/s, and its row count. */
  prefillFlopRatio?: number;
  prefillRows?: number;
  /** End to end on a small model of the 12B geometry (named here): one chain token. */
  e2eModel?: string;
  msPerChainToken?: number;
  chainTokensPerSecond?: number;
  dispatchesPerToken?: number;
  /** Its warm-up's last FMA rate over the FMA yardstick (near 1: the token ran at the GPU's working clocks). */
  warmupFmaRatio?: number;
  /**
   * Where a chain token's wall time goes (ms): recording, submit, waiting; GPU time when profiled, and a
   * profiled verify block's GPU time (blockGpuMs).
   */
  breakdown?: { encodeMs: number; submitMs: number; waitMs: number; gpuMs?: number; blockGpuMs?: number };
}

export interface ProbeReport {
  schema: typeof REPORT_SCHEMA;
  kind: 'probe';
  verdict: Verdict;
  /** Overall text, e.g. "block-versus-chain probe passed: 4 draws, every logit byte equal". */
  summary: string;
  /** Fail-closed consequence: "MTP would be declined" / "MTP would be enabled". */
  consequence: string;
  provenance: Provenance;
  draws: DrawResult[];
  timings: { totalMs: number; loadMs?: number };
  /** Present when the page measured this GPU ("Measure this GPU") before the probe: the latest figures. */
  performance?: PerformanceSummary;
}

export type Report = ProbeReport | TraceReport;

/** At most this many problems are listed (a crafted report can have a million rows, each wrong). */
export const MAX_PROBLEMS = 25;

/**
 * Validates an untrusted report (file, share link). Returns a list of problems (empty = valid): the top-level
 * shape here, then the kind's results against its own verdict and counters (report-consistency.ts), each
 * problem naming its field.
 */
export function validateReport(x: unknown): string[] {
  const errs: string[] = [];
  const obj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
  const need = (cond: boolean, msg: string) => {
    if (!cond) errs.push(msg);
  };
  if (!obj(x)) return ['report is not a JSON object'];
  // a generation result is a file of its own kind: say so rather than list every field it lacks
  if (x.schema === 'ringside-generation/1')
    return [
      'this is a generation result (schema "ringside-generation/1"): the viewer opens probe and trace reports; a generation is shown where it is run',
    ];
  need(x.schema === REPORT_SCHEMA, `schema must be "${REPORT_SCHEMA}" (found ${JSON.stringify(x.schema)})`);
  need(x.kind === 'probe' || x.kind === 'trace', `kind must be "probe" or "trace" (found ${JSON.stringify(x.kind)})`);
  need(x.verdict === 'equal' || x.verdict === 'diverges', 'verdict must be "equal" or "diverges"');
  need(typeof x.summary === 'string', 'summary must be a string');
  if (x.kind === 'probe') need(typeof x.consequence === 'string', 'consequence must be a string');
  const p = x.provenance;
  if (!obj(p)) errs.push('provenance missing');
  else {
    for (const k of ['policy', 'precision', 'createdAt', 'platform'] as const)
      need(typeof p[k] === 'string', `provenance.${k} must be a string`);
    need(typeof p.block === 'number', 'provenance.block must be a number');
    need(Array.isArray(p.drawLengths), 'provenance.drawLengths must be an array');
    need(obj(p.adapter), 'provenance.adapter missing');
    // the browser limit profile the device was capped to (src/gpu/limit-profiles.ts), where there was one
    const profile = obj(p.adapter) ? p.adapter.limitProfile : undefined;
    need(
      profile === undefined || (LIMIT_PROFILES as readonly unknown[]).includes(profile),
      `provenance.adapter.limitProfile must be one of ${LIMIT_PROFILES.join(', ')} (found ${JSON.stringify(profile)})`,
    );
    need(
      obj(p.target) && typeof (p.target as Record<string, unknown>).digest === 'string',
      'provenance.target.digest missing',
    );
    if (p.commit !== undefined) need(typeof p.commit === 'string', 'provenance.commit must be a string');
    if (p.selfTest !== undefined) {
      const t = p.selfTest;
      need(
        obj(t) &&
          typeof t.ok === 'boolean' &&
          typeof t.at === 'string' &&
          (['checks', 'failed', 'skipped'] as const).every((k) => Number.isInteger(t[k]) && (t[k] as number) >= 0),
        'provenance.selfTest must be {ok, checks, failed, skipped, at}',
      );
    }
    // reports made before the compiler was recorded have none; one that has it has every field as text
    if (p.compiler !== undefined) {
      const c = p.compiler;
      if (!obj(c)) errs.push('provenance.compiler must be an object');
      else for (const k of COMPILER_FIELDS) need(typeof c[k] === 'string', `provenance.compiler.${k} must be a string`);
    }
    if (p.exactnessSelfTest !== undefined) errs.push(...exactnessSelfTestProblems(p.exactnessSelfTest));
  }
  if (x.kind === 'trace') {
    errs.push(...traceProblems(x));
    // written by every trace since the judgement was added; a report from before has none
    if (x.judgement !== undefined)
      for (const e of validateJudgement(x.judgement, obj(x.metrics) ? x.metrics : undefined))
        errs.push(`judgement: ${e}`);
  } else if (x.kind === 'probe') errs.push(...probeProblems(x));
  return errs.length > MAX_PROBLEMS
    ? [...errs.slice(0, MAX_PROBLEMS - 1), `and ${errs.length - MAX_PROBLEMS + 1} more problems`]
    : errs;
}

/**
 * Problems of a report's provenance.exactnessSelfTest (optional: reports made before the self-test have none). A
 * failed self-test must carry its warning, which the page shows where the verdict is.
 */
export function exactnessSelfTestProblems(x: unknown): string[] {
  const at = 'provenance.exactnessSelfTest';
  if (typeof x !== 'object' || x === null || Array.isArray(x)) return [`${at} must be an object`];
  const t = x as Record<string, unknown>;
  const errs: string[] = [];
  if (typeof t.ok !== 'boolean') errs.push(`${at}.ok must be true or false`);
  if (typeof t.cached !== 'boolean') errs.push(`${at}.cached must be true or false`);
  for (const k of ['checks', 'failed', 'ms'] as const)
    if (typeof t[k] !== 'number' || !Number.isFinite(t[k]) || (t[k] as number) < 0)
      errs.push(`${at}.${k} must be a number of at least 0`);
  if (!Array.isArray(t.kernelClasses) || t.kernelClasses.some((c) => typeof c !== 'string'))
    errs.push(`${at}.kernelClasses must be a list of kernel class names`);
  if (typeof t.shaderBuild !== 'string') errs.push(`${at}.shaderBuild must be a string`);
  for (const k of ['kernel', 'fault', 'warning'] as const)
    if (t[k] !== undefined && typeof t[k] !== 'string') errs.push(`${at}.${k} must be a string`);
  if (typeof t.failed === 'number' && typeof t.checks === 'number' && t.failed > t.checks)
    errs.push(`${at}.failed (${t.failed}) exceeds its checks (${t.checks})`);
  if (typeof t.ok === 'boolean' && typeof t.failed === 'number' && t.ok !== (t.failed === 0))
    errs.push(`${at}.ok (${t.ok}) contradicts its ${t.failed} failed checks`);
  if (t.ok === false && typeof t.warning !== 'string')
    errs.push(`${at}.warning missing: a failed self-test carries it`);
  return errs;
}

// ---- the teacher-forced trace's report (src/parity/trace.ts produces it) --------------------------

export interface TracePosition {
  position: number;
  next: number;
  chainTop: { id: number; logit: number }[];
  blockTop: { id: number; logit: number }[];
  nllChain: number;
  nllBlock: number;
  /** chain top-1 minus top-2 logit. */
  gap: number;
  /** |block - chain| logit of the chain's top-1 token. */
  deltaChosen: number;
  agree: boolean;
  bytesDiffering: number;
}

export interface TraceMetrics {
  positions: number;
  rowsByteEqual: number;
  top1Disagreements: number;
  decidedPositions: number;
  decidedDisagreements: number;
  /** Per bucket [lo, hi): positions and disagreements. */
  buckets: { lo: number; hi: number | null; positions: number; disagreements: number }[];
  deltaLogit: { p50: number; p90: number; p99: number; max: number };
  perplexity: { chain: number; block: number };
}

export interface TraceReport {
  schema: typeof REPORT_SCHEMA;
  kind: 'trace';
  verdict: 'equal' | 'diverges';
  summary: string;
  provenance: Provenance & { prefix: number; traced: number };
  metrics: TraceMetrics;
  /**
   * mlxcel's judgement of the block arm (candidate) against the chain (reference), from the positions' top-k lists
   * (src/parity/trace-judgement.ts); absent from reports written before it was added.
   */
  judgement?: TraceJudgement;
  positions: TracePosition[];
  timings: { totalMs: number; prefillMs: number; chainMs: number; blockMs: number };
}
