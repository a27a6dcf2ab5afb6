/** Part (b) of the benchmark: each kernel class as the engine dispatches it, at one geometry's real shapes. */
import {
  BENCH_SHAPES,
  benchAttention,
  benchGateUp,
  benchMatmul,
  makeLinear,
  type AffineKernel,
  type BenchShapes,
  type KernelResult,
  type Yardsticks,
} from './kernels.ts';
import type { GpuTimer } from './timer.ts';
import type { BenchOptions } from './bench-options.ts';

/** Name of the bench rows of the MLP's first half as the engine runs it (benchGateUp). */
export const GATE_UP_LABEL = 'mlp.gate+up+GeGLU';

/** What every kernel benchmark of a run shares: its timer and options, the yardsticks, the engine's kernels. */
export interface KernelBench {
  timer: GpuTimer;
  device: GPUDevice;
  opts: BenchOptions;
  y: Yardsticks;
  engineKernel: AffineKernel;
  prefillKernel: AffineKernel;
  coldBytes: number;
  /** The report's notes (where a prefill M was reduced to fit its budget). */
  notes: string[];
  onResult: (r: KernelResult) => void;
}

/** Every kernel class for each geometry of opts.models: MLP matmuls and prefill, gate/up, attention, LM head. */
export async function benchKernelClasses(b: KernelBench): Promise<void> {
  for (const model of b.opts.models) {
    const S = typeof model === 'string' ? BENCH_SHAPES[model] : model;
    const m = S.name.toLowerCase();
    for (const bits of b.opts.bits) {
      for (const [proj, N, K] of [
        ['mlp.gate/up', S.intermediate, S.hidden],
        ['mlp.down', S.hidden, S.intermediate],
      ] as const)
        await benchProjection(b, S, m, proj, N, K, bits);
      await benchFusedGateUp(b, S, m, bits);
    }
    await benchAttentionDecode(b, S);
    // LM head: the tied 4-bit embedding over the whole vocabulary (skipped when headRows is empty).
    if (b.opts.headRows.length) await benchLmHead(b, S, m);
  }
}

/** One MLP projection: the engine's kernel, the other kernels compared (4-bit), and gate/up's prefill matmul. */
async function benchProjection(
  b: KernelBench,
  S: BenchShapes,
  m: string,
  proj: 'mlp.gate/up' | 'mlp.down',
  N: number,
  K: number,
  bits: 4 | 8,
): Promise<void> {
  const { timer, opts, y, engineKernel, coldBytes, onResult } = b;
  const lin = makeLinear(b.device, `${m}.${proj}`, N, K, bits, S.groupSize);
  try {
    const label = `${proj} ${bits}-bit [${N} x ${K}]`;
    await benchMatmul(
      timer,
      S.name,
      { cls: 'matmul', label, lin, Ms: opts.matmulRows, kernels: [engineKernel], engineKernel, coldBytes },
      y,
      onResult,
    );
    const others = opts.compareKernels.filter((k) => k !== engineKernel);
    if (others.length && bits === 4) {
      await benchMatmul(
        timer,
        S.name,
        {
          cls: 'matmul',
          label,
          lin,
          Ms: opts.compareRows,
          kernels: others,
          engineKernel,
          warm: false,
          coldBytes,
        },
        y,
        onResult,
      );
    }
    if (bits === 4 && proj === 'mlp.gate/up' && opts.prefillRows > 0) await benchPrefill(b, S, label, lin);
  } finally {
    lin.destroy();
  }
}

/** The prefill matmul at opts.prefillRows rows, fewer where one run would exceed opts.prefillBudgetSeconds. */
async function benchPrefill(
  b: KernelBench,
  S: BenchShapes,
  label: string,
  lin: ReturnType<typeof makeLinear>,
): Promise<void> {
  const { timer, opts, y, prefillKernel, notes, onResult } = b;
  // Project the prefill matmul's time from one run at M = 8 of the prefill kernel.
  const [ref] = await benchMatmul(
    timer,
    S.name,
    {
      cls: 'prefill',
      label,
      lin,
      Ms: [8],
      kernels: [prefillKernel],
      engineKernel: prefillKernel,
      warm: false,
    },
    y,
    () => {},
  );
  const projected = (ref.seconds * opts.prefillRows) / ref.M;
  let M = opts.prefillRows;
  let note: string | undefined;
  if (projected > opts.prefillBudgetSeconds) {
    M = Math.max(
      8,
      Math.min(opts.prefillRows, Math.floor(((opts.prefillBudgetSeconds / ref.seconds) * ref.M) / 8) * 8),
    );
    note = `M reduced from ${opts.prefillRows} to ${M}: one matmul at M = ${opts.prefillRows} projects to ${projected.toFixed(1)} s on this adapter`;
    notes.push(`${S.name} prefill ${label}: ${note}`);
  }
  const budget = { ...timer.opts };
  timer.opts.targetSeconds = Math.min(timer.opts.targetSeconds, 1e-3); // one timed run
  try {
    await benchMatmul(
      timer,
      S.name,
      {
        cls: 'prefill',
        label,
        lin,
        Ms: [M],
        kernels: [prefillKernel],
        engineKernel: prefillKernel,
        note,
        warm: false,
      },
      y,
      onResult,
    );
  } finally {
    Object.assign(timer.opts, budget);
  }
}

/**
 * The MLP's first half as the engine runs it: on GPUs one dispatch for both projections and the
 * GeGLU (the rows above time one projection alone through the engine's matmul kernel).
 */
async function benchFusedGateUp(b: KernelBench, S: BenchShapes, m: string, bits: 4 | 8): Promise<void> {
  const gate = makeLinear(b.device, `${m}.mlp.gate`, S.intermediate, S.hidden, bits, S.groupSize);
  const up = makeLinear(b.device, `${m}.mlp.up`, S.intermediate, S.hidden, bits, S.groupSize);
  const down = makeLinear(b.device, `${m}.mlp.down`, S.hidden, S.intermediate, bits, S.groupSize);
  try {
    await benchGateUp(
      b.timer,
      S.name,
      {
        label: `${GATE_UP_LABEL} ${bits}-bit [2 x ${S.intermediate} x ${S.hidden}]`,
        gate,
        up,
        down,
        Ms: b.opts.matmulRows.filter((M) => M === 1 || M === 4 || M === 8),
        engineKernel: b.engineKernel,
        coldBytes: b.coldBytes,
      },
      b.y,
      b.onResult,
    );
  } finally {
    gate.destroy();
    up.destroy();
    down.destroy();
  }
}

/** Attention decode: sliding ring (W slots, d 256) and full cache (4096 keys, d 512). */
async function benchAttentionDecode(b: KernelBench, S: BenchShapes): Promise<void> {
  await benchAttention(
    b.timer,
    S.name,
    {
      label: `sliding ring ${S.window} slots, ${S.heads} q / ${S.kvHeads} kv heads, d ${S.headDim}`,
      mode: 'physical',
      heads: S.heads,
      kvHeads: S.kvHeads,
      d: S.headDim,
      keys: S.window,
      window: S.window,
      Ms: b.opts.attentionRows,
    },
    b.y,
    b.onResult,
  );
  await benchAttention(
    b.timer,
    S.name,
    {
      label: `full cache ${S.fullKeys ?? 4096} keys, ${S.heads} q / ${S.globalKvHeads} kv heads, d ${S.globalHeadDim}`,
      mode: 'linear',
      heads: S.heads,
      kvHeads: S.globalKvHeads,
      d: S.globalHeadDim,
      keys: S.fullKeys ?? 4096,
      window: S.window,
      Ms: b.opts.attentionRows,
    },
    b.y,
    b.onResult,
  );
}

/** The LM head (the tied 4-bit embedding over the whole vocabulary) with the engine's kernel, and the others compared. */
async function benchLmHead(b: KernelBench, S: BenchShapes, m: string): Promise<void> {
  const { timer, opts, y, engineKernel, coldBytes, onResult } = b;
  const head = makeLinear(b.device, `${m}.lm_head`, S.vocab, S.hidden, 4, S.groupSize);
  try {
    const label = `4-bit [${S.vocab} x ${S.hidden}]`;
    await benchMatmul(
      timer,
      S.name,
      { cls: 'lm-head', label, lin: head, Ms: opts.headRows, kernels: [engineKernel], engineKernel, coldBytes },
      y,
      onResult,
    );
    const others = opts.compareKernels.filter((k) => k !== engineKernel);
    if (opts.compareHead && others.length)
      await benchMatmul(
        timer,
        S.name,
        { cls: 'lm-head', label, lin: head, Ms: opts.headRows, kernels: others, engineKernel, warm: false },
        y,
        onResult,
      );
  } finally {
    head.destroy();
  }
}
