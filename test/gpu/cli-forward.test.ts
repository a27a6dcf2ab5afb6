/**
 * `npm run cli -- forward` on the fixture of every family: the dense tiny-a, the E-series gemma4-e-tiny (per-layer
 * embeddings, KV sharing), the MoE gemma4-moe-tiny and the Qwen3.5 qwen-tiny. Each writes the logits and, with
 * --activations, its family's stages under the goldens' names; the logits meet the goldens within the distance of
 * transformers' own f32 run to float64; --chain and --block 3 give the same bytes.
 */
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  FIXTURES,
  GEMMA4_E_TINY,
  GEMMA4_MOE_TINY,
  TINY_A,
  TINY_A_F64,
  loadGolden,
  loadTransformersF32,
  maxAbsDiff,
  nmse,
} from '../support/fixtures.ts';
import { readSafetensorsHeader, readTensorBytes } from '../../src/format/safetensors.ts';
import { nodeFileSource } from '../../src/node/file-source.ts';

const run = promisify(execFile);
const QWEN_TINY = path.join(FIXTURES, 'qwen-tiny');

interface ForwardOut {
  tensors: Map<string, Uint8Array>;
  metadata: Readonly<Record<string, string>>;
}

async function readOut(file: string): Promise<ForwardOut> {
  const h = await readSafetensorsHeader(await nodeFileSource(file));
  const tensors = new Map<string, Uint8Array>();
  for (const t of h.tensors) tensors.set(t.name, await readTensorBytes(t));
  return { tensors, metadata: h.metadata ?? {} };
}

const f32 = (b: Uint8Array) => new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);

/** `forward` over `tokens` with --activations, whole (one prefill), --chain and --block 3. */
async function forwardThreeWays(
  target: string,
  tokens: number[],
  extra: string[] = [],
): Promise<Record<'whole' | 'chain' | 'block3', ForwardOut>> {
  const dir = mkdtempSync(path.join(tmpdir(), 'ringside-fwd-'));
  const out: Partial<Record<'whole' | 'chain' | 'block3', ForwardOut>> = {};
  for (const [name, mode] of [
    ['whole', []],
    ['chain', ['--chain']],
    ['block3', ['--block', '3']],
  ] as const) {
    const file = path.join(dir, `${name}.safetensors`);
    await run(
      'npm',
      [
        'run',
        '-s',
        'cli',
        '--',
        'forward',
        '--model',
        target,
        '--tokens',
        tokens.join(','),
        '--out',
        file,
        '--activations',
        ...mode,
        ...extra,
      ],
      { timeout: 120_000 },
    );
    out[name] = await readOut(file);
    if (name === 'chain') expect(readFileSync(file).length).toBeGreaterThan(tokens.length * 512 * 4);
  }
  return out as Record<'whole' | 'chain' | 'block3', ForwardOut>;
}

/** Verify blocks equal the single-token chain under exact: every tensor of --block 3 has --chain's bytes. */
function expectChainEqualsBlock(r: Record<'chain' | 'block3', ForwardOut>): void {
  expect([...r.block3.tensors.keys()]).toEqual([...r.chain.tensors.keys()]);
  for (const [name, bytes] of r.chain.tensors) expect(Buffer.compare(bytes, r.block3.tensors.get(name)!), name).toBe(0);
}

describe('npm run cli -- forward', () => {
  it('writes fixture-named logits and activations; chain and block 3 files are byte-identical', async () => {
    const golden = await loadGolden();
    const r = await forwardThreeWays(path.join(TINY_A, 'target'), golden.json.prompt);
    const whole = r.whole.tensors;
    const L = 12;
    // the dense stages: the goldens' act.attn/mlp/layer.i and act.final_norm, and q, k, v of every layer
    const qkv = Array.from({ length: L }, (_, i) => ['q', 'k', 'v'].map((s) => `act.${s}.${i}`)).flat();
    expect([...whole.keys()].sort()).toEqual(
      [...golden.names.filter((n) => n === 'logits' || /^act\./.test(n)), ...qkv].sort(),
    );
    const logits = f32(whole.get('logits')!);
    // The bound of test/gpu/target-golden.test.ts: transformers' own f32 run's distance to the float64
    // goldens (the yardstick the engine meets), plus the shared F32 goldens' own distance to them.
    const shared = (await golden.tensor('logits')).data;
    const truth = (await (await loadGolden(TINY_A_F64)).tensor('logits')).data;
    const bound =
      maxAbsDiff((await (await loadTransformersF32()).tensor('logits')).data, truth) + maxAbsDiff(shared, truth);
    expect(
      maxAbsDiff(logits, shared),
      `logits max abs vs the shared goldens (bound ${bound.toExponential(2)})`,
    ).toBeLessThanOrEqual(bound);
    expectChainEqualsBlock(r);
  });

  it('rejects a token outside the vocabulary with a clear message', async () => {
    const err = await run(
      'npm',
      [
        'run',
        '-s',
        'cli',
        '--',
        'forward',
        '--model',
        path.join(TINY_A, 'target'),
        '--tokens',
        '1,5000',
        '--out',
        '/tmp/x.safetensors',
      ],
      { timeout: 60_000 },
    ).catch((e) => e);
    expect(err.code).toBe(1);
    expect(err.stderr).toMatch(/token 5000 is outside the vocabulary \(1024\)/);
  });
});

/**
 * The family fixtures. Their goldens are float64 (transformers run in float64), so the dense test's bound reduces to
 * its first term: the logits within the max abs distance of transformers' own f32 run (transformers-f32.safetensors)
 * to the goldens. Each stage the goldens hold is compared too, with the bounds of the family's golden GPU test
 * (gemma4-e-golden, gemma4-moe-golden, qwen-target): NMSE at most transformers f32's where that run has the tensor
 * (at least as close to float64 as the library itself in f32), else below 1e-8 (f32 rounding over a few layers
 * of a 128-wide model sits near 1e-9; a wrong op is off by orders more).
 */
const FAMILIES = [
  {
    name: 'gemma4-e-tiny (per-layer embeddings, KV sharing)',
    dir: GEMMA4_E_TINY,
    extra: [],
    // act.ple_inputs is the combined per-layer input table, not a stage of a layer; the shared layers 6-9 read
    // their donors' K/V and have no k, v stages
    notStages: /^act\.ple_inputs$/,
    ownStages: /^act\.(q\.\d+|[kv]\.[0-5])$/,
  },
  {
    name: 'gemma4-moe-tiny (mixture of experts, transformers router)',
    dir: GEMMA4_MOE_TINY,
    // the goldens route as transformers does (softmax over every expert, then top-k)
    extra: ['--router', 'transformers'],
    notStages: /^act\.router_(experts|weights)\.\d+$/,
    ownStages: /^act\.[qkv]\.\d+$/,
  },
  {
    name: 'qwen-tiny (Qwen3.5, Gated DeltaNet)',
    dir: QWEN_TINY,
    extra: [],
    notStages: /^$/,
    // q, k, v of the full-attention layers (2 and 5), the projections and conv of the Gated DeltaNet layers
    ownStages: /^act\.([qkv]\.[25]|gdn\.(proj|conv)\.[0134])$/,
  },
];

describe.each(FAMILIES)('npm run cli -- forward on $name', ({ dir, extra, notStages, ownStages }) => {
  it('logits and every golden stage within the family bounds; --chain and --block 3 byte-identical', async () => {
    const golden = await loadGolden(dir);
    const tf32 = await loadTransformersF32(dir);
    const r = await forwardThreeWays(path.join(dir, 'target'), golden.json.prompt, extra);
    const whole = r.whole.tensors;
    const goldenStages = golden.names.filter((n) => /^act\./.test(n) && !notStages.test(n));
    const written = [...whole.keys()];
    expect(written.filter((n) => n !== 'logits' && !ownStages.test(n)).sort()).toEqual(goldenStages.sort());
    const truth = (await golden.tensor('logits')).data;
    const bound = maxAbsDiff((await tf32.tensor('logits')).data, truth);
    const err = maxAbsDiff(f32(whole.get('logits')!), truth);
    const e: Record<string, { engine: number; transformers?: number }> = {};
    for (const n of goldenStages) {
      const g = (await golden.tensor(n)).data;
      const engine = nmse(f32(whole.get(n)!), g);
      e[n] = tf32.names.includes(n) ? { engine, transformers: nmse((await tf32.tensor(n)).data, g) } : { engine };
    }
    const worst = Object.entries(e).sort((a, b) => b[1].engine - a[1].engine)[0];
    console.log(
      `forward ${path.basename(dir)}: ${written.length} tensors; logits max abs ${err.toExponential(3)} (bound: transformers f32 ${bound.toExponential(3)}); worst stage NMSE ${worst[0]} ${worst[1].engine.toExponential(2)}`,
    );
    expect(err, 'logits max abs vs the float64 goldens').toBeLessThanOrEqual(bound);
    for (const [n, { engine, transformers }] of Object.entries(e))
      expect(engine, `${n} NMSE (transformers f32 ${transformers?.toExponential(2)})`).toBeLessThanOrEqual(
        transformers ?? 1e-8,
      );
    expectChainEqualsBlock(r);
  });
});

describe('npm run cli -- forward: the router convention of mixture-of-experts targets', () => {
  it('defaults to MLX (recorded in the file), which moves the logits off the transformers run; refused elsewhere', async () => {
    const golden = await loadGolden(GEMMA4_MOE_TINY);
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-fwd-'));
    const files = { mlx: path.join(dir, 'mlx.safetensors'), transformers: path.join(dir, 'tf.safetensors') };
    const base = ['run', '-s', 'cli', '--', 'forward', '--model', path.join(GEMMA4_MOE_TINY, 'target')];
    const tokens = ['--tokens', golden.json.prompt.join(',')];
    await run('npm', [...base, ...tokens, '--out', files.mlx], { timeout: 120_000 });
    await run('npm', [...base, ...tokens, '--out', files.transformers, '--router', 'transformers'], {
      timeout: 120_000,
    });
    const mlx = await readOut(files.mlx);
    const tf = await readOut(files.transformers);
    expect(mlx.metadata.router).toBe('mlx');
    expect(tf.metadata.router).toBe('transformers');
    // MLX's bf16 router scalar flips experts at close top-k cuts (gemma4-moe-routers.test.ts): other logits
    expect(Buffer.compare(mlx.tensors.get('logits')!, tf.tensors.get('logits')!)).not.toBe(0);
    const bad = await run(
      'npm',
      [
        'run',
        '-s',
        'cli',
        '--',
        'forward',
        '--model',
        path.join(GEMMA4_E_TINY, 'target'),
        '--router',
        'transformers',
        ...tokens,
        '--out',
        path.join(dir, 'x.safetensors'),
      ],
      { timeout: 60_000 },
    ).catch((x) => x);
    expect(bad.code).toBe(1);
    expect(String(bad.stderr).trim()).toMatch(
      /^.*gemma4-e-tiny\/target: --router applies to Gemma 4 mixture-of-experts targets only; this target has no router$/,
    );
  });
});
