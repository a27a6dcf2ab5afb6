import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import { loadGolden, loadTransformersF32, maxAbsDiff, nmse, type Golden } from '../support/fixtures.ts';
import { openQwen35Checkpoint } from '../../src/format/qwen3_5/index.ts';
import { nodeFolderSources } from '../../src/node/file-source.ts';
import { uploadQwenWeights, type QwenGpuWeights } from '../../src/model/qwen3_5/weights.ts';
import { QwenTargetModel } from '../../src/model/qwen3_5/target.ts';
import type { ForwardResult, Precision } from '../../src/model/target.ts';
import { policyByName, policyFor } from '../../src/model/policy-registry.ts';
import type { GpuContext } from '../../src/gpu/device.ts';

/**
 * The Qwen3.5 GPU target on qwen-tiny (6 layers: Gated DeltaNet x2, full attention, twice; conv kernel 4):
 * against transformers' float64 goldens with transformers' own f32 run as the yardstick, greedy tokens, and
 * the exactness contract: a verify block == chain steps byte for byte, and commit(m) after a block leaves the
 * state (conv window, recurrent state, KV) a chain-only run leaves, for every m.
 */
const FIXTURE = path.resolve(process.cwd(), 'test/fixtures/qwen-tiny');

const bytes = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

function firstDiff(a: Float32Array, b: Float32Array): string | null {
  if (a.length !== b.length) return `length ${a.length} vs ${b.length}`;
  if (Buffer.compare(bytes(a), bytes(b)) === 0) return null;
  const i = a.findIndex((v, j) => Object.is(v, b[j]) === false);
  return `${a.length} floats, first difference at ${i}: ${a[i]} vs ${b[i]}`;
}

describe('Qwen3.5 GPU target (qwen-tiny)', () => {
  let ctx: GpuContext;
  let golden: Golden;
  let weights: QwenGpuWeights;
  const models = new Map<Precision, QwenTargetModel>();
  const model = (p: Precision = 'f32') => {
    let m = models.get(p);
    if (!m) {
      m = new QwenTargetModel(ctx, weights, { maxContext: 96, maxBlock: 8, prefillChunk: 32, precision: p });
      models.set(p, m);
    }
    return m;
  };
  beforeAll(async () => {
    ctx = await testGpu();
    golden = await loadGolden(FIXTURE);
    const ck = await openQwen35Checkpoint(await nodeFolderSources(path.join(FIXTURE, 'target')), 'qwen-tiny');
    weights = await uploadQwenWeights(ctx.device, ck.description);
  });
  afterAll(() => {
    models.forEach((m) => m.destroy());
    weights?.destroy();
    ctx?.destroy();
  });

  it('prefill logits and every captured activation at least as close to float64 as transformers in f32', async () => {
    // Yardstick: transformers' own Qwen3.5 code run in float32 on the device (transformers-f32.safetensors),
    // tensor by tensor against the float64 goldens; the engine must be no farther (NMSE), and its logits
    // no farther in max abs. The issue's level 0.05 on the logits is far looser than that.
    const tf32 = await loadTransformersF32(FIXTURE);
    const m = model();
    m.reset();
    const r = await m.prefill(golden.json.prompt, { logits: 'all', captures: 'all' });
    const truth = (await golden.tensor('logits')).data;
    const err = maxAbsDiff(r.logits!, truth);
    const tfErr = maxAbsDiff((await tf32.tensor('logits')).data, truth);
    const names = tf32.names.filter((n) => n.startsWith('act.')).map((n) => n.slice(4));
    const e: Record<string, number> = {};
    const tf: Record<string, number> = {};
    for (const n of names) {
      const gold = (await golden.tensor(`act.${n}`)).data;
      const got = r.captures.get(n);
      expect(got, `capture ${n}`).toBeDefined();
      e[n] = nmse(got!, gold);
      tf[n] = nmse((await tf32.tensor(`act.${n}`)).data, gold);
    }
    const ratio = Math.max(...names.map((n) => e[n] / tf[n]));
    const worst = [...names].sort((a, b) => e[b] - e[a]).slice(0, 3);
    console.log(
      `qwen-tiny vs float64: logits max abs ${err.toExponential(3)} (transformers f32 ${tfErr.toExponential(3)}); worst act NMSE ${worst.map((n) => `${n} ${e[n].toExponential(2)} (tf32 ${tf[n].toExponential(2)})`).join(', ')}; largest engine/transformers-f32 NMSE ratio ${ratio.toFixed(2)} over ${names.length} activations`,
    );
    for (const n of names)
      expect(e[n], `act.${n} vs transformers f32 ${tf[n].toExponential(2)}`).toBeLessThanOrEqual(tf[n]);
    expect(err, 'logits max abs').toBeLessThanOrEqual(tfErr);
    expect(err).toBeLessThan(0.05);
  });

  it('greedy decoding reproduces the golden tokens, and each step is as close to the goldens as transformers f32', async () => {
    const m = model();
    m.reset();
    const pre = await m.prefill(golden.json.prompt, { logits: 'last' });
    const out = [pre.argmax![0]];
    const rows = [pre.logits!];
    while (out.length < golden.json.greedy.length) {
      const r = await m.decode(out[out.length - 1]);
      out.push(r.argmax![0]);
      rows.push(r.logits!);
    }
    expect(out).toEqual(golden.json.greedy);
    const truth = (await golden.tensor('greedy_logits')).data;
    const err = maxAbsDiff(Float32Array.from(rows.flatMap((r) => [...r])), truth);
    console.log(`qwen-tiny greedy (${out.length} tokens) logits max abs vs float64 ${err.toExponential(3)}`);
    expect(err).toBeLessThan(0.05);
  });

  it('the conv window and recurrent state after the prefill match the goldens', async () => {
    const m = model();
    m.reset();
    await m.prefill(golden.json.prompt, { logits: 'none' });
    const snap = m.snapshot();
    try {
      const c = m.desc.config.linear!;
      for (const [i, l] of m.state.layers.entries()) {
        if (l.kind !== 'linear') continue;
        const [win, S] = await Promise.all(
          snap.buffers[i].map(async (b) => {
            const { readF32 } = await import('../../src/gpu/buffers.ts');
            return readF32(ctx.device, b, b.size / 4);
          }),
        );
        // golden conv state is [C, K-1] (channel-major); the engine's window [K-1, C]
        const gConv = (await golden.tensor(`state.conv.${i}`)).data;
        const K1 = c.convKernel - 1;
        const conv = new Float64Array(gConv.length);
        for (let ch = 0; ch < c.convDim; ch++)
          for (let r = 0; r < K1; r++) conv[r * c.convDim + ch] = gConv[ch * K1 + r];
        expect(nmse(win, conv), `conv window ${i}`).toBeLessThan(1e-10);
        expect(nmse(S, (await golden.tensor(`state.recurrent.${i}`)).data), `recurrent state ${i}`).toBeLessThan(1e-10);
      }
    } finally {
      snap.destroy();
    }
  });

  // Prompts shorter and longer than the conv window (K - 1 = 3) and than the block; f32 and bf16.
  const TOKENS = [11, 48, 85, 122, 159, 196, 233, 270, 307, 344, 381, 418, 455, 492, 529, 566, 603];
  for (const precision of ['f32', 'bf16'] as const) {
    for (const P of [1, 2, 5]) {
      for (const K of [2, 3, 4, 8]) {
        it(`${precision}, prompt ${P}, block ${K}: verify rows == chain steps byte for byte; commit(m) == m chain steps for every m`, async () => {
          const m = model(precision);
          m.reset();
          await m.prefill(TOKENS.slice(0, P), { logits: 'none' });
          const base = m.snapshot();
          const draft = TOKENS.slice(P, P + K);
          try {
            // chain: K single steps, remembering the state after each
            const chain: Float32Array[] = [];
            const after: Float32Array[][] = [];
            for (const t of draft) {
              chain.push((await m.decode(t)).logits!);
              after.push(await stateBytes(m));
            }
            const V = m.desc.vocab;
            for (let acc = 0; acc <= K; acc++) {
              m.restore(base);
              const block = await m.step(draft);
              for (let j = 0; j < K; j++)
                expect(firstDiff(block.logits!.subarray(j * V, (j + 1) * V), chain[j]), `row ${j}`).toBeNull();
              m.commit(acc);
              expect(m.state.nextPos).toBe(P + acc);
              if (acc > 0) {
                const st = await stateBytes(m);
                st.forEach((b, i) =>
                  expect(firstDiff(b, after[acc - 1][i]), `state buffer ${i} after commit(${acc})`).toBeNull(),
                );
              }
              // continuing after the rollback gives the chain's next logits
              if (acc < K) {
                const next = await m.decode(draft[acc]);
                expect(firstDiff(next.logits!, chain[acc]), `step after commit(${acc})`).toBeNull();
              }
            }
          } finally {
            base.destroy();
          }
        });
      }
    }
  }

  it('the byte comparison has teeth: matmul-m-split (split-K chosen by M) makes block rows differ from the chain', async () => {
    const m = model();
    m.reset();
    await m.prefill(TOKENS.slice(0, 5), { logits: 'none' });
    const base = m.snapshot();
    try {
      const policy = policyByName('matmul-m-split');
      const draft = TOKENS.slice(5, 9);
      const chain: Float32Array[] = [];
      for (const t of draft) chain.push((await m.decode(t, { policy })).logits!);
      m.restore(base);
      const block = await m.step(draft, { policy });
      const V = m.desc.vocab;
      const differ = chain.filter((row, j) => firstDiff(block.logits!.subarray(j * V, (j + 1) * V), row) !== null);
      expect(differ.length).toBeGreaterThan(0);
    } finally {
      base.destroy();
    }
  });

  // Stage order of a forward (the layer program's capture points), for finding where two arms first differ.
  const stageOrder = (m: QwenTargetModel) => [
    ...m.desc.layers.flatMap((l, i) => [
      ...(l.type === 'linear' ? [`gdn.conv.${i}`, `gdn.recurrence.${i}`, `gdn.gated_norm.${i}`] : []),
      `attn.${i}`,
      `mlp.${i}`,
      `layer.${i}`,
    ]),
    'final_norm',
  ];

  for (const [policyName, stage] of [
    ['gdn-state-bf16', 'gdn.recurrence.0'],
    ['matmul-m-split', 'gdn.conv.0'],
  ] as const) {
    it(`${policyName}: block rows differ from the chain, first at ${stage} (row 1 on)`, async () => {
      const m = model();
      m.reset();
      await m.prefill(TOKENS.slice(0, 5), { logits: 'none' });
      const base = m.snapshot();
      try {
        const policy = policyFor('qwen3_5', policyName);
        const draft = TOKENS.slice(5, 9);
        const chain: ForwardResult[] = [];
        for (const t of draft) chain.push(await m.decode(t, { policy, captures: 'all' }));
        m.restore(base);
        const block = await m.step(draft, { policy, captures: 'all' });
        const first = stageOrder(m).find((name) => {
          const b = block.captures.get(name)!;
          const w = b.length / draft.length;
          return chain.some((c, j) => firstDiff(b.subarray(j * w, (j + 1) * w), c.captures.get(name)!) !== null);
        });
        expect(first).toBe(stage);
      } finally {
        base.destroy();
      }
    });
  }

  /** Every state buffer (conv windows, recurrent states, and the KV rows up to nextPos). */
  async function stateBytes(m: QwenTargetModel): Promise<Float32Array[]> {
    const { readF32 } = await import('../../src/gpu/buffers.ts');
    const c = m.desc.config.attention;
    const out: Float32Array[] = [];
    for (const l of m.state.layers) {
      if (l.kind === 'linear') {
        out.push(await readF32(ctx.device, l.window, l.window.size / 4), await readF32(ctx.device, l.S, l.S.size / 4));
      } else {
        const n = m.state.nextPos * c.numKvHeads * c.headDim;
        out.push(await readF32(ctx.device, l.k, n), await readF32(ctx.device, l.v, n));
      }
    }
    return out;
  }
});
