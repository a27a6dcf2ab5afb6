import type { TargetDescription } from '../format/model-description.ts';
import type { GpuContext } from '../gpu/device.ts';
import type { GpuWeights } from '../model/gpu-weights.ts';
import type { Precision } from '../model/target.ts';
import type { Policy } from '../model/policy.ts';
import { fmtInt } from '../util/number-format.ts';
import type { CancelToken, ProgressFn } from '../util/cancel.ts';
import { compareRows } from './compare.ts';
import {
  REPORT_SCHEMA,
  type CheckpointInfo,
  type ExactnessSelfTestSummary,
  type TraceMetrics,
  type TracePosition,
  type TraceReport,
} from './report.ts';
import { provenance } from './provenance.ts';
import { buildTarget, targetPolicy } from '../model/build-target.ts';
import type { QwenGpuWeights } from '../model/qwen3_5/weights.ts';
import type { ForwardResult } from '../model/target.ts';
// The trace's report types live with the report schema (report.ts); re-exported for the trace's users.
export type { TraceMetrics, TracePosition, TraceReport };

/**
 * The teacher-forced trace (docs/MODEL.md section 8): a fixed token stream, an untraced prefix, then
 * traced positions run two ways from the same prefill: chain (one token per forward) and block (K
 * tokens per forward through the staging caches, all committed). Per position: top-k, nll of the
 * stream's next token; then disagreement metrics between the arms.
 */
export interface TraceOptions {
  block: number;
  prefix: number;
  traced: number;
  policy: string;
  precision: Precision;
  /** Entries of each row's top list (default 8, as mlxcel's logit traces list). */
  topK?: number;
  /** The stream: prefix + traced + 1 tokens. Default: a deterministic pseudo-random stream. */
  stream?: number[];
}

import { DECIDED_GAP, GAP_BUCKETS } from './trace-thresholds.ts';
import { judgeTraces } from './trace-judgement.ts';
import { armRows } from './trace-files.ts';
export { DECIDED_GAP, GAP_BUCKETS };

/** Entries of each row's top list: mlxcel's logit traces list 8 (its `topk` default), and so does a report. */
export const TRACE_TOP_K = 8;

export function defaultStream(n: number, vocab: number): number[] {
  let s = 0x2545f491;
  return Array.from({ length: n }, () => {
    s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x297a2d39) >>> 0;
    return s % vocab;
  });
}

function topK(row: Float32Array, k: number): { id: number; logit: number }[] {
  const best: { id: number; logit: number }[] = [];
  for (let i = 0; i < row.length; i++) {
    const v = row[i];
    if (best.length < k || v > best[best.length - 1].logit) {
      best.push({ id: i, logit: v });
      best.sort((a, b) => b.logit - a.logit || a.id - b.id);
      if (best.length > k) best.pop();
    }
  }
  return best;
}

function nll(row: Float32Array, target: number): number {
  let mx = -Infinity;
  for (const v of row) mx = Math.max(mx, v);
  let sum = 0;
  for (const v of row) sum += Math.exp(v - mx);
  return Math.log(sum) + mx - row[target];
}

function percentile(sorted: number[], q: number): number {
  if (!sorted.length) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * (sorted.length - 1) + 0.5))];
}

export function traceMetrics(pos: TracePosition[]): TraceMetrics {
  const deltas = pos.map((p) => p.deltaChosen).sort((a, b) => a - b);
  const buckets = GAP_BUCKETS.slice(0, -1).map((lo, i) => {
    const hi = GAP_BUCKETS[i + 1];
    const inside = pos.filter((p) => p.gap >= lo && p.gap < hi);
    return {
      lo,
      hi: Number.isFinite(hi) ? hi : null,
      positions: inside.length,
      disagreements: inside.filter((p) => !p.agree).length,
    };
  });
  const decided = pos.filter((p) => p.gap >= DECIDED_GAP);
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(xs.length, 1);
  return {
    positions: pos.length,
    rowsByteEqual: pos.filter((p) => p.bytesDiffering === 0).length,
    top1Disagreements: pos.filter((p) => !p.agree).length,
    decidedPositions: decided.length,
    decidedDisagreements: decided.filter((p) => !p.agree).length,
    buckets,
    deltaLogit: {
      p50: percentile(deltas, 0.5),
      p90: percentile(deltas, 0.9),
      p99: percentile(deltas, 0.99),
      max: deltas[deltas.length - 1] ?? 0,
    },
    perplexity: {
      chain: Math.exp(mean(pos.map((p) => p.nllChain))),
      block: Math.exp(mean(pos.map((p) => p.nllBlock))),
    },
  };
}

/** The verdict (every row byte-equal or not) and its one-line summary. */
export function traceVerdict(m: TraceMetrics): { verdict: 'equal' | 'diverges'; summary: string } {
  const n = m.positions;
  return m.rowsByteEqual === n
    ? { verdict: 'equal', summary: `teacher-forced trace: all ${fmtInt(n)} block rows equal the chain byte for byte` }
    : {
        verdict: 'diverges',
        summary: `teacher-forced trace: ${fmtInt(n - m.rowsByteEqual)} of ${fmtInt(n)} rows differ; ${fmtInt(m.top1Disagreements)} top-1 disagreements, ${fmtInt(m.decidedDisagreements)} on ${fmtInt(m.decidedPositions)} decided positions (gap >= ${DECIDED_GAP})`,
      };
}

export interface TraceEnv {
  ctx: GpuContext;
  /** A Gemma 4 target's weights or a Qwen3.5 target's (QwenTargetModel, the family's policy list). */
  weights: GpuWeights<TargetDescription> | QwenGpuWeights;
  target: CheckpointInfo;
  platform: string;
  onProgress?: ProgressFn;
  cancel?: CancelToken;
  /** The exactness self-test run on this adapter before the trace, for the provenance. */
  exactnessSelfTest?: ExactnessSelfTestSummary;
}

/** What the trace needs from a target model (TargetModel's contract; QwenTargetModel, ETargetModel, MoETargetModel). */
interface TraceTarget<S extends { destroy(): void } = { destroy(): void }> {
  reset(): void;
  prefill(
    tokens: number[],
    o: { chunk?: number; policy?: Policy; logits: 'none'; cancel?: CancelToken },
  ): Promise<unknown>;
  snapshot(): S;
  restore(s: S): void;
  decode(token: number, o: { policy?: Policy }): Promise<ForwardResult>;
  step(tokens: number[], o: { policy?: Policy }): Promise<ForwardResult>;
  commit(accepted: number): void;
  destroy(): void;
}

async function prefillArm(
  model: TraceTarget,
  prefix: number[],
  policy: Policy,
  chunk: number,
  cancel?: CancelToken,
): Promise<number> {
  const t = performance.now();
  model.reset();
  await model.prefill(prefix, { chunk: chunk || prefix.length, policy, logits: 'none', cancel });
  return performance.now() - t;
}

export async function runTrace(env: TraceEnv, opts: TraceOptions): Promise<TraceReport> {
  const t0 = performance.now();
  const desc = env.weights.desc;
  const policy = targetPolicy(env.weights, opts.policy);
  const K = opts.block;
  const n = opts.prefix + opts.traced + 1;
  const stream = opts.stream ?? defaultStream(n, desc.vocab);
  if (stream.length < n)
    throw new Error(
      `the trace stream has ${stream.length} tokens, needs prefix ${opts.prefix} + traced ${opts.traced} + 1`,
    );
  if (opts.prefix < 1) throw new Error('the trace needs a prefix of at least one token');
  const prefix = stream.slice(0, opts.prefix);
  const traced = stream.slice(opts.prefix, opts.prefix + opts.traced);
  const chunk = Math.min(opts.prefix, 512);
  const modelOpts = {
    maxContext: n + K,
    maxBlock: K,
    prefillChunk: Math.max(chunk, policy.prefillChunks?.block ?? 0),
    precision: opts.precision,
  };
  const model: TraceTarget = buildTarget(env.ctx, env.weights, modelOpts);
  const timings = { totalMs: 0, prefillMs: 0, chainMs: 0, blockMs: 0 };
  const V = desc.vocab;
  try {
    // Chain arm.
    env.onProgress?.({ phase: 'prefill', done: 0, total: traced.length * 2 });
    timings.prefillMs += await prefillArm(model, prefix, policy, policy.prefillChunks?.chain ?? chunk, env.cancel);
    const snapshot = policy.prefillChunks ? undefined : model.snapshot();
    let t = performance.now();
    const chainRows: Float32Array[] = [];
    for (let i = 0; i < traced.length; i++) {
      env.cancel?.throwIfCancelled();
      chainRows.push((await model.decode(traced[i], { policy })).logits!);
      env.onProgress?.({ phase: 'chain', done: i + 1, total: traced.length * 2 });
    }
    timings.chainMs = performance.now() - t;
    // Block arm from the same prefill.
    if (snapshot) {
      model.restore(snapshot);
      snapshot.destroy();
    } else timings.prefillMs += await prefillArm(model, prefix, policy, policy.prefillChunks!.block, env.cancel);
    t = performance.now();
    const blockRows: Float32Array[] = [];
    for (let i = 0; i < traced.length; i += K) {
      env.cancel?.throwIfCancelled();
      const rows = traced.slice(i, i + K);
      const r = await model.step(rows, { policy });
      model.commit(rows.length);
      for (let j = 0; j < rows.length; j++) blockRows.push(r.logits!.slice(j * V, (j + 1) * V));
      env.onProgress?.({ phase: 'block', done: traced.length + i + rows.length, total: traced.length * 2 });
    }
    timings.blockMs = performance.now() - t;
    const topk = opts.topK ?? TRACE_TOP_K;
    const positions: TracePosition[] = chainRows.map((c, i) => {
      const b = blockRows[i];
      const next = stream[opts.prefix + i + 1];
      const ct = topK(c, Math.max(2, topk));
      const bt = topK(b, topk);
      const chosen = ct[0].id;
      return {
        position: opts.prefix + i,
        next,
        chainTop: ct.slice(0, topk),
        blockTop: bt,
        nllChain: nll(c, next),
        nllBlock: nll(b, next),
        gap: ct[0].logit - ct[1].logit,
        deltaChosen: Math.abs(b[chosen] - c[chosen]),
        agree: bt[0].id === chosen,
        bytesDiffering: compareRows(c, b, opts.precision, i).bytesDiffering,
      };
    });
    const metrics = traceMetrics(positions);
    // the judgement reads the chain's top two for its gap: a trace asked for a shorter list carries none
    const judgement = topk >= 2 ? judgeTraces(armRows(positions, 'chain'), armRows(positions, 'block')) : undefined;
    timings.totalMs = performance.now() - t0;
    return {
      schema: REPORT_SCHEMA,
      kind: 'trace',
      ...traceVerdict(metrics),
      provenance: {
        ...provenance(env.ctx.report, env.platform, {
          policy: policy.name,
          precision: opts.precision,
          block: K,
          drawLengths: [],
          prefillChunk: chunk,
          target: env.target,
          ...(env.exactnessSelfTest ? { exactnessSelfTest: env.exactnessSelfTest } : {}),
        }),
        prefix: opts.prefix,
        traced: opts.traced,
      },
      metrics,
      ...(judgement ? { judgement } : {}),
      positions,
      timings,
    };
  } finally {
    model.destroy();
  }
}
