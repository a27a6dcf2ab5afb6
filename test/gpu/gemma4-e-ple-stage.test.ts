/**
 * The E-series per-layer input as a localization stage on gemma4-e-tiny: ETargetModel.stageOrder lists
 * `ple` (the contribution post_norm(W_up(gelu_tanh(W_gate h) * input_i)) as added to the residual, before
 * layer_scalar; capture ple.i) between the MLP and the layer output of every layer; under `exact` its captures, like
 * every other stage's, are byte-equal between the chain arm and the verify block; a policy that perturbs an earlier
 * stage (q projection, attention) is still blamed on that stage although the per-layer input differs after it; and a
 * difference born in the per-layer input is blamed on `ple`, not on the layer output.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TargetDescription } from '../../src/format/model-description.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import { ETargetModel } from '../../src/model/gemma4/e-series/e-target.ts';
import { uploadWeights, type GpuWeights } from '../../src/model/gpu-weights.ts';
import type { Precision } from '../../src/model/target.ts';
import { openCheckpointDir } from '../../src/node/file-source.ts';
import { localize, type StageCaptures } from '../../src/parity/localize.ts';
import { runProbe } from '../../src/parity/probe.ts';
import { STAGE_LABELS, validateReport } from '../../src/parity/report.ts';
import { checkpointInfo } from '../../src/parity/summary.ts';
import { GEMMA4_E_TINY } from '../support/fixtures.ts';
import { testGpu } from './gpu-context.ts';
import { tokens } from './tiny-model.ts';

const V = 512;
const K = 4;

const bytes = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

/** Both arms' captures of every stage for `block` after a prefill of `prompt`: K chain steps, then one verify block. */
async function arms(
  model: ETargetModel,
  prompt: number[],
  block: number[],
): Promise<{ chain: StageCaptures; block: StageCaptures }> {
  model.reset();
  await model.prefill(prompt, { logits: 'none' });
  const snap = model.snapshot();
  const steps = [];
  for (const t of block) steps.push((await model.decode(t, { captures: 'all' })).captures);
  const chain: StageCaptures = new Map();
  for (const name of steps[0].keys()) {
    const rows = steps.map((s) => s.get(name)!);
    const out = new Float32Array(rows.reduce((a, r) => a + r.length, 0));
    rows.reduce((o, r) => (out.set(r, o), o + r.length), 0);
    chain.set(name, out);
  }
  model.restore(snap);
  const r = await model.step(block, { captures: 'all' });
  model.commit(block.length);
  snap.destroy();
  return { chain, block: r.captures };
}

describe('the per-layer input stage of ETargetModel (gemma4-e-tiny)', () => {
  let ctx: GpuContext;
  let weights: GpuWeights<TargetDescription>;
  let target: ReturnType<typeof checkpointInfo>;
  beforeAll(async () => {
    ctx = await testGpu();
    const ck = await openCheckpointDir(path.join(GEMMA4_E_TINY, 'target'));
    weights = await uploadWeights(ctx.device, ck.description as TargetDescription);
    target = checkpointInfo(ck);
  });
  afterAll(() => {
    weights?.destroy();
    ctx?.destroy();
  });

  const model = (precision: Precision) =>
    new ETargetModel(ctx, weights, { maxContext: 64, maxBlock: 8, prefillChunk: 64, precision });

  it('the stage list puts ple between the MLP and the layer output of every layer, owners and shared alike', () => {
    const m = model('f32');
    const order = m.stageOrder();
    const L = weights.desc.layers.length;
    for (let i = 0; i < L; i++) {
      const stages = order.filter((s) => s.layer === i).map((s) => s.stage);
      const owner = m.donors[i] === i;
      expect(stages, `layer ${i}`).toEqual(
        owner ? ['q', 'k', 'v', 'attn', 'mlp', 'ple', 'layer'] : ['q', 'attn', 'mlp', 'ple', 'layer'],
      );
      expect(order.find((s) => s.layer === i && s.stage === 'ple')?.capture).toBe(`ple.${i}`);
    }
    // gemma4-e-tiny: 6 owners and 4 KV-shared layers, so both kinds of layer are checked above
    expect(m.donors.filter((d, i) => d !== i)).toHaveLength(4);
    expect(STAGE_LABELS.ple).toMatch(/^per-layer input .*before layer_scalar\)$/);
    m.destroy();
  });

  for (const precision of ['f32', 'bf16'] as const) {
    it(`exact: every stage's captures, ple included, are byte-equal between the arms (${precision}, K = ${K})`, async () => {
      const m = model(precision);
      const H = weights.desc.hidden;
      const order = m.stageOrder();
      // a prompt inside the window and one past it (window 16): the ring wraps under the block
      for (const P of [5, 40]) {
        const a = await arms(m, tokens(P, P, V), tokens(K, 100 + P, V));
        for (const s of order) {
          const c = a.chain.get(s.capture);
          const b = a.block.get(s.capture);
          expect(c && b, `P=${P} ${s.capture} captured in both arms`).toBeTruthy();
          expect(bytes(b!).equals(bytes(c!)), `P=${P} ${s.capture}`).toBe(true);
        }
        expect(localize(order, a.chain, a.block, K, precision).first).toBeNull();
        // the ple captures are the contribution's rows, not an empty buffer: K x H values, nonzero, different per layer
        const ple = order.filter((s) => s.stage === 'ple').map((s) => a.block.get(s.capture)!);
        for (const x of ple) {
          expect(x.length).toBe(K * H);
          expect(x.some((v) => v !== 0)).toBe(true);
        }
        expect(bytes(ple[0]).equals(bytes(ple[1]))).toBe(false);
      }
      m.destroy();
    });
  }

  for (const [policy, stage] of [
    ['matmul-m-split', 'q'],
    ['attention-m-split', 'attn'],
  ] as const) {
    it(`${policy} is blamed on layer 0 ${stage}, not on the per-layer input it perturbs downstream`, async () => {
      const r = await runProbe(
        { ctx, weights, target, platform: 'test' },
        { block: K, policy, precision: 'f32', localize: true },
      );
      expect(validateReport(r)).toEqual([]);
      expect(r.verdict).toBe('diverges');
      const d = r.draws.find((x) => x.verdict === 'diverges')!;
      expect(d.firstDivergence?.layer).toBe(0);
      expect(d.firstDivergence?.stage).toBe(stage);
      const at = d.stages!.findIndex((s) => s.layer === 0 && s.stage === stage);
      for (const s of d.stages!.slice(0, at))
        expect(
          s.rows.every((x) => x.bytesDiffering === 0),
          `${s.layer} ${s.stage}`,
        ).toBe(true);
      // the per-layer input of layer 0 is compared, comes after the blamed stage, and differs too
      const pleAt = d.stages!.findIndex((s) => s.layer === 0 && s.stage === 'ple');
      expect(pleAt).toBeGreaterThan(at);
      expect(d.stages![pleAt].rows.some((x) => x.bytesDiffering > 0)).toBe(true);
    });
  }

  it('a difference born in the per-layer input is blamed on ple; one born in the MLP before it, on the MLP', async () => {
    const m = model('f32');
    const order = m.stageOrder();
    const a = await arms(m, tokens(20, 7, V), tokens(K, 8, V));
    m.destroy();
    // One ULP of one value of block row 2, in a copy of the block arm's captures.
    const nudge = (caps: StageCaptures, name: string): StageCaptures => {
      const x = Float32Array.from(caps.get(name)!);
      const u = new Uint32Array(x.buffer);
      u[2 * weights.desc.hidden + 5] ^= 1;
      return new Map(caps).set(name, x);
    };
    const ple = localize(order, a.chain, nudge(a.block, 'ple.3'), K, 'f32').first;
    expect(ple).toMatchObject({ layer: 3, stage: 'ple', position: 2 });
    expect(ple?.text).toBe(`first divergence: layer 3 (sliding) ${STAGE_LABELS.ple} at position 2`);
    const mlp = localize(order, a.chain, nudge(nudge(a.block, 'ple.3'), 'mlp.3'), K, 'f32').first;
    expect(mlp).toMatchObject({ layer: 3, stage: 'mlp', position: 2 });
  });
});
