/**
 * The centroid head's two fill conventions for the tokens it does not score (min - 1 in transformers and mlx-vlm,
 * the dtype's minimum in vLLM; greedy takes the argmax over the scored ones), on the GPU assistant of
 * gemma4-e-tiny (AssistantModel.draft's `fill`, centroid-head-op.ts fullLogits) and the CPU reference
 * (centroidHead's `fill`): the full-vocabulary rows differ only in the entries outside the scored tokens, which
 * hold each convention's value; the scored entries, the drafted tokens and every other capture are the same bytes;
 * the argmax of either full row is the drafted token (greedy over the scored tokens), and the golden min - 1 rows
 * (transformers, float64) have their fill exactly where the GPU's are.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AssistantDescription, TargetDescription } from '../../src/format/model-description.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import { AssistantModel, type DraftResult } from '../../src/model/gemma4/assistant.ts';
import { ETargetModel } from '../../src/model/gemma4/e-series/e-target.ts';
import type { GpuWeights } from '../../src/model/gpu-weights.ts';
import { centroidHead, DTYPE_MIN, type CentroidFill } from '../../src/reference/gemma4/e-series/centroid-head.ts';
import { GEMMA4_E_TINY, type Golden } from '../support/fixtures.ts';
import { fixtureOnGpu, type FixtureOnGpu } from './helpers/fixture-on-gpu.ts';

const OPTS = { maxContext: 64, maxBlock: 8, prefillChunk: 64, precision: 'f32' as const };
const FILLS: { name: string; fill: CentroidFill }[] = [
  { name: 'min - 1 (transformers, mlx-vlm)', fill: 'min-minus-one' },
  { name: 'bf16 minimum (vLLM)', fill: DTYPE_MIN.bf16 },
  { name: 'f32 minimum (vLLM)', fill: DTYPE_MIN.f32 },
];

const bits = (a: Float32Array | Uint32Array) => new Uint32Array(a.buffer, a.byteOffset, a.length);
/** First maximum of a row (argmax.wgsl's and numpy's tie rule). */
const argmax = (row: ArrayLike<number>) => {
  let b = 0;
  for (let j = 1; j < row.length; j++) if (row[j] > row[b]) b = j;
  return b;
};

describe('centroid head fill conventions (gemma4-e-tiny assistant)', () => {
  let fixture: FixtureOnGpu;
  let ctx: GpuContext;
  let golden: Golden;
  let tw: GpuWeights<TargetDescription>;
  let aw: GpuWeights<AssistantDescription>;
  let target: ETargetModel;
  let asst: AssistantModel;
  beforeAll(async () => {
    fixture = await fixtureOnGpu(GEMMA4_E_TINY);
    ({ ctx, golden, tw, aw } = fixture);
    target = new ETargetModel(ctx, tw, OPTS);
    asst = new AssistantModel(ctx, aw, target, 'hf');
  });
  afterAll(() => {
    asst?.destroy();
    target?.destroy();
    fixture?.destroy();
  });

  it('GPU: full rows differ only in the filled entries; tokens, scored logits and hidden are the same bytes', async () => {
    const P = golden.json.prompt.length;
    const H = target.desc.hidden;
    const V = aw.desc.vocab;
    target.reset();
    const pre = await target.prefill(golden.json.prompt, { logits: 'last', finalHidden: true });
    const seed = pre.finalHidden!.slice((P - 1) * H, P * H);
    const steps = golden.json.draft.tokens.length;
    const runs: DraftResult[] = [];
    for (const f of FILLS) runs.push(await asst.draft(pre.argmax![0], seed, steps, { capture: true, fill: f.fill }));
    const [ref] = runs;
    const n = ref.centroid!.selected.length / steps;
    const goldLogits = (await golden.tensor('draft.logits')).data;
    const lines: string[] = [];
    for (const [i, r] of runs.entries()) {
      expect(r.tokens, FILLS[i].name).toEqual(ref.tokens);
      expect(bits(r.centroid!.selected)).toEqual(bits(ref.centroid!.selected));
      expect(bits(r.centroid!.selectedLogits)).toEqual(bits(ref.centroid!.selectedLogits));
      expect(bits(r.hidden!)).toEqual(bits(ref.hidden!));
      let filled = 0;
      for (let s = 0; s < steps; s++) {
        const row = r.logits!.subarray(s * V, (s + 1) * V);
        const base = ref.logits!.subarray(s * V, (s + 1) * V);
        const sel = new Set(ref.centroid!.selected.subarray(s * n, (s + 1) * n));
        const lg = ref.centroid!.selectedLogits.subarray(s * n, (s + 1) * n);
        const want = FILLS[i].fill === 'min-minus-one' ? Math.fround(Math.min(...lg) - 1) : Math.fround(FILLS[i].fill);
        for (let v = 0; v < V; v++) {
          if (sel.has(v)) {
            expect(row[v], `step ${s} token ${v}: a scored entry`).toBe(base[v]);
            continue;
          }
          expect(row[v], `step ${s} token ${v}: the fill`).toBe(want);
          // the golden (transformers, min - 1) fills the same entries
          expect(goldLogits[s * V + v], `golden step ${s} token ${v}`).toBe(
            Math.min(...goldLogits.subarray(s * V, (s + 1) * V)),
          );
          filled++;
        }
        // greedy: the argmax of the full row is the drafted token, whatever the fill
        expect(argmax(row), `step ${s} full-row argmax`).toBe(r.tokens[s]);
      }
      expect(filled).toBe(steps * (V - n));
      const differ = i === 0 ? 0 : bits(r.logits!).filter((x, j) => x !== bits(ref.logits!)[j]).length;
      lines.push(`${FILLS[i].name}: ${filled} filled entries, ${differ} differ from min - 1`);
      if (i > 0) expect(differ).toBe(steps * (V - n));
    }
    console.log(`centroid fills (${steps} steps, ${n} of ${V} tokens scored):\n  ${lines.join('\n  ')}`);
  });

  it('CPU reference: the fills change only the unscored entries and not the token', () => {
    const C = 16;
    const h = 32;
    const V = 128;
    let seed = 7;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31) * 2 - 1;
    const order = Array.from({ length: V }, (_, i) => (i * 37) % V); // a permutation (37 is coprime to 128)
    const w = {
      centroids: { out: C, in: h, w: Float64Array.from({ length: C * h }, rnd) },
      tokenOrdering: Int32Array.from(order),
      embed: { out: V, in: h, w: Float64Array.from({ length: V * h }, rnd) },
      topK: 3,
    };
    const x = Float64Array.from({ length: h }, rnd);
    const results = FILLS.map((f) => centroidHead(w, x, f.fill));
    const scored = new Set(results[0].selected);
    for (const [i, r] of results.entries()) {
      expect(r.token).toBe(results[0].token);
      expect(r.selectedLogits).toEqual(results[0].selectedLogits);
      expect(r.fill).toBe(FILLS[i].fill === 'min-minus-one' ? Math.min(...r.selectedLogits) - 1 : FILLS[i].fill);
      for (let v = 0; v < V; v++) expect(r.logits[v]).toBe(scored.has(v) ? results[0].logits[v] : r.fill);
      expect(argmax(r.logits)).toBe(r.token);
    }
  });
});
