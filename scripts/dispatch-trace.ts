/**
 * A dispatch trace: every GPU dispatch, parameter block, binding, buffer copy and submit that the engine
 * records through src/gpu/recorder.ts's Recorder, as one JSON line per event, for a fixed run on each family
 * fixture (test/fixtures: tiny-a, gemma4-e-tiny, gemma4-moe-tiny, qwen-tiny): a probe (policy exact, lengths
 * 8 and 20, K = 4), a teacher-forced trace, a classic generation and an MTP generation (12 tokens, K = 4; the
 * Gemma 4 assistant drafts, Qwen3.5 drafts with its own mtp.* head). What it is for: proving that a refactor
 * left the engine's GPU work unchanged, by running the same script in two checkouts and comparing the logs
 * byte for byte (`cmp before.jsonl after.jsonl`). It goes through the library functions the CLI's probe, trace
 * and generate commands call, without the exactness self-test (its result is cached per machine, so runs
 * would differ).
 *
 *   eval "$(bash scripts/provision-webgpu.sh)"
 *   node --import tsx --import ./scripts/wgsl-hooks.mjs scripts/dispatch-trace.ts OUT.jsonl [FAMILY...]
 *
 * Events: `phase` (family and phase starting), `dispatch` (recorder, shader, entry, constants sorted by name,
 * workgroup count, each binding as buffer label, buffer size, offset and bound size, and the parameter block
 * bound first: the shader it was packed for, its values sorted by name and its bytes in hex), `copy`, `submit`
 * (dispatches and parameter blocks since the recorder's last submit) and `result` (the run's verdict or
 * tokens). Buffers are named by label and size, never by identity, and recorders by the order of their first
 * event, so that two processes give the same log; nothing timed is written.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { Recorder } from '../src/gpu/recorder.ts';
import type { Binding } from '../src/gpu/kernels.ts';
import { paramsBytes, paramsLayout, type ParamValues } from '../src/gpu/params-layout.ts';
import { nodeGpuContext } from '../src/cli/node-gpu.ts';
import { loadModels, openGemmaPair } from '../src/cli/load-models.ts';
import { loadQwenTarget, openQwenTargetDir, qwenDrafterInfo } from '../src/cli/qwen-target.ts';
import { uploadWeights } from '../src/model/gpu-weights.ts';
import { uploadQwenWeights } from '../src/model/qwen3_5/weights.ts';
import type { TargetDescription } from '../src/format/model-description.ts';
import { runProbe, type ProbeEnv } from '../src/parity/probe.ts';
import { runTrace } from '../src/parity/trace.ts';
import { checkpointInfo, qwenCheckpointInfo } from '../src/parity/summary.ts';
import { generationModels, type GenerationWeights } from '../src/model/generation-setup.ts';
import { generateClassic, generateMtp } from '../src/model/generate.ts';
import type { GpuContext } from '../src/gpu/device.ts';

const out = process.argv[2];
if (!out) throw new Error('usage: dispatch-trace.ts OUT.jsonl [tiny-a|gemma4-e-tiny|gemma4-moe-tiny|qwen-tiny ...]');
const FAMILIES = ['tiny-a', 'gemma4-e-tiny', 'gemma4-moe-tiny', 'qwen-tiny'];
const families = process.argv.length > 3 ? process.argv.slice(3) : FAMILIES;
const FIXTURES = path.resolve(import.meta.dirname, '../test/fixtures');
const K = 4;
const MAX_NEW = 12;
const PROMPT = [2, 17, 101, 5, 33, 250, 7, 64];

const lines: string[] = [];
const emit = (e: Record<string, unknown>) => lines.push(JSON.stringify(e));

const sorted = (o: Readonly<Record<string, unknown>>) =>
  Object.fromEntries(
    Object.keys(o)
      .sort()
      .map((k) => [k, o[k]]),
  );
const hex = (b: ArrayBuffer | ArrayBufferView) => {
  const u8 = b instanceof ArrayBuffer ? new Uint8Array(b) : new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  return Buffer.from(u8).toString('hex');
};

/** The parameter blocks Recorder.params returned, by the binding object it returned. */
const packed = new WeakMap<object, { shader: string; values: Record<string, unknown>; bytes: string }>();
/** Recorders by the order of their first event; per recorder, blocks packed since its last submit. */
const recorderIds = new WeakMap<Recorder, number>();
const pending = new WeakMap<Recorder, { dispatches: number; params: number }>();
let nextRecorder = 0;
function recorderOf(r: Recorder): { id: number; counts: { dispatches: number; params: number } } {
  let id = recorderIds.get(r);
  if (id === undefined) {
    id = nextRecorder++;
    recorderIds.set(r, id);
    pending.set(r, { dispatches: 0, params: 0 });
  }
  return { id, counts: pending.get(r)! };
}

function bindingOf(b: Binding | undefined): Record<string, unknown> | null {
  if (!b) return null;
  const buffer = 'buffer' in b ? b.buffer : (b as GPUBuffer);
  const offset = 'buffer' in b ? (b.offset ?? 0) : 0;
  const size = 'buffer' in b ? (b.size ?? null) : null;
  const e: Record<string, unknown> = { label: buffer.label, bufferSize: buffer.size, offset, size };
  const p = packed.get(b as object);
  if (p) e.params = p;
  return e;
}

const proto = Recorder.prototype;
const { params, run, copy, submit } = proto;
proto.params = function (this: Recorder, shader: string, values: ParamValues): Binding {
  const b = params.call(this, shader, values);
  recorderOf(this).counts.params++;
  packed.set(b as object, {
    shader,
    values: sorted(values),
    bytes: hex(paramsBytes(paramsLayout(shader), values)),
  });
  return b;
};
proto.run = function (this: Recorder, ...args: Parameters<Recorder['run']>): void {
  const [shader, entry, constants, bindings, workgroups] = args;
  const r = recorderOf(this);
  r.counts.dispatches++;
  emit({
    ev: 'dispatch',
    rec: r.id,
    shader,
    entry,
    constants: sorted(constants),
    workgroups,
    bindings: bindings.map(bindingOf),
  });
  run.apply(this, args);
};
proto.copy = function (this: Recorder, ...args: Parameters<Recorder['copy']>): void {
  const [src, srcOffset, dst, dstOffset, size] = args;
  emit({
    ev: 'copy',
    rec: recorderOf(this).id,
    src: { label: src.label, bufferSize: src.size, offset: srcOffset },
    dst: { label: dst.label, bufferSize: dst.size, offset: dstOffset },
    size,
  });
  copy.apply(this, args);
};
proto.submit = function (this: Recorder): void {
  const r = recorderOf(this);
  emit({ ev: 'submit', rec: r.id, ...r.counts });
  r.counts.dispatches = 0;
  r.counts.params = 0;
  submit.call(this);
};

const phase = (family: string, name: string) => emit({ ev: 'phase', family, phase: name });

async function probe(family: string, qwen: boolean): Promise<void> {
  phase(family, 'probe');
  const targetDir = path.join(FIXTURES, family, 'target');
  const q = qwen ? await openQwenTargetDir(targetDir) : undefined;
  const g = qwen ? undefined : await openGemmaPair(targetDir, path.join(FIXTURES, family, 'assistant'));
  const ctx = await nodeGpuContext();
  const weights: ProbeEnv['weights'] = q
    ? await uploadQwenWeights(ctx.device, q.description)
    : await uploadWeights(ctx.device, g!.target.description as TargetDescription);
  try {
    const report = await runProbe(
      {
        ctx,
        weights,
        target: q ? qwenCheckpointInfo(q) : checkpointInfo(g!.target),
        assistant: q ? qwenDrafterInfo(q) : g!.assistant ? checkpointInfo(g!.assistant) : undefined,
        platform: 'dispatch-trace',
      },
      { block: K, precision: 'f32', policy: 'exact', lengths: [8, 20], localize: true },
    );
    emit({ ev: 'result', family, phase: 'probe', verdict: report.verdict });
  } finally {
    weights.destroy();
    ctx.destroy();
  }
}

interface Loaded {
  ctx: GpuContext;
  weights: GenerationWeights;
  info: ReturnType<typeof checkpointInfo>;
  close(): void;
}

async function load(family: string, qwen: boolean, withAssistant: boolean): Promise<Loaded> {
  const dir = path.join(FIXTURES, family);
  if (qwen) {
    const q = await loadQwenTarget(path.join(dir, 'target'));
    return {
      ctx: q.ctx,
      weights: { family: 'qwen3_5', target: q.weights },
      info: qwenCheckpointInfo(q.checkpoint),
      close: () => q.close(),
    };
  }
  const m = await loadModels(path.join(dir, 'target'), withAssistant ? path.join(dir, 'assistant') : undefined);
  return {
    ctx: m.ctx,
    weights: { family: 'gemma4', target: m.targetWeights, assistant: m.assistantWeights },
    info: checkpointInfo(m.target),
    close: () => m.close(),
  };
}

async function trace(family: string, qwen: boolean): Promise<void> {
  phase(family, 'trace');
  const m = await load(family, qwen, false);
  try {
    const report = await runTrace(
      { ctx: m.ctx, weights: m.weights.target, target: m.info, platform: 'dispatch-trace' },
      { prefix: 12, traced: 8, block: K, policy: 'exact', precision: 'f32' },
    );
    emit({ ev: 'result', family, phase: 'trace', verdict: report.verdict });
  } finally {
    m.close();
  }
}

async function generate(family: string, qwen: boolean, mode: 'classic' | 'mtp'): Promise<void> {
  phase(family, mode);
  const m = await load(family, qwen, !qwen);
  try {
    const g = generationModels(m.ctx, m.weights, {
      promptLength: PROMPT.length,
      maxNew: MAX_NEW,
      block: K,
      policy: 'exact',
      precision: 'f32',
      draftPosition: 'hf',
    });
    try {
      const opts = { maxNew: MAX_NEW, eosIds: g.eosIds, policy: g.policy };
      let result: Awaited<ReturnType<typeof generateClassic>>;
      if (mode === 'classic') result = await generateClassic(g.target, PROMPT, opts);
      else {
        const d = g.mtpDrafter();
        result = await generateMtp(g.target, d.source, PROMPT, K, { ...opts, draftPosition: d.position });
        d.done();
      }
      emit({ ev: 'result', family, phase: mode, tokens: result.tokens, counters: result.counters ?? null });
    } finally {
      g.destroy();
    }
  } finally {
    m.close();
  }
}

for (const family of families) {
  if (!FAMILIES.includes(family)) throw new Error(`unknown family ${family}: one of ${FAMILIES.join(', ')}`);
  const qwen = family === 'qwen-tiny';
  await probe(family, qwen);
  await trace(family, qwen);
  await generate(family, qwen, 'classic');
  await generate(family, qwen, 'mtp');
  process.stderr.write(`[dispatch-trace] ${family} done, ${lines.length} events so far\n`);
}
writeFileSync(out, `${lines.map((l) => `${l}\n`).join('')}`);
process.stderr.write(`[dispatch-trace] ${lines.length} events written to ${out}\n`);
