/**
 * The CPU twin of the router comparison (src/reference/gemma4/moe/router-compare.ts) on gemma4-moe-tiny: its routes,
 * computed from an h1 it rebuilds from the reference's captures, are the reference forward's own router outputs
 * (the same bytes: the rebuild is the layer's arithmetic), and under transformers' base convention they are the
 * float64 goldens' (act.router_experts.i, act.router_weights.i within 1e-9). The flip it reports under the bf16
 * scalar is the one docs/GEMMA4-FAMILY.md section 10 names (layer 5 row 16, golden top-k gap 2.4e-3).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import path from 'node:path';
import type { TargetDescription } from '../../src/format/model-description.ts';
import { openCheckpointDir } from '../../src/node/file-source.ts';
import { referenceRouterComparison } from '../../src/reference/gemma4/moe/router-compare.ts';
import { loadReferenceWeights, referenceForward, type TargetWeights } from '../../src/reference/index.ts';
import { GEMMA4_MOE_TINY, loadGolden, type Golden } from '../support/fixtures.ts';

let tw: TargetWeights;
let G: Golden;
beforeAll(async () => {
  G = await loadGolden(GEMMA4_MOE_TINY);
  const ck = await openCheckpointDir(path.join(GEMMA4_MOE_TINY, 'target'));
  tw = await loadReferenceWeights(ck.description as TargetDescription);
});

describe('referenceRouterComparison (gemma4-moe-tiny)', () => {
  it("MLX's base: the routes are the reference forward's own, byte for byte", () => {
    const prompt = G.json.prompt;
    const cmp = referenceRouterComparison(tw, prompt);
    const fwd = referenceForward(tw, prompt, {
      captures: true,
      numerics: 'exact',
      router: { order: 'mlx', scaleProduct: 'mlx-bf16' },
    });
    const k = 4;
    cmp.forEach((l, i) => {
      const ids = fwd.acts!.get(`act.router_experts.${i}`)!;
      const w = fwd.acts!.get(`act.router_weights.${i}`)!;
      l.routes.forEach((r, t) => {
        expect(r.experts, `layer ${i} row ${t}`).toEqual([...ids.subarray(t * k, (t + 1) * k)]);
        expect(r.mlx).toEqual([...w.subarray(t * k, (t + 1) * k)]);
      });
      expect(l.order.setsAgree).toBe(prompt.length);
    });
  });

  it("transformers' base: the goldens' experts and weights; the bf16 scalar flips layer 5 row 16", async () => {
    const prompt = G.json.prompt;
    const cmp = referenceRouterComparison(tw, prompt, { order: 'transformers', scale: 'transformers' });
    const k = 4;
    let worst = 0;
    for (const l of cmp) {
      const ids = (await G.tensor(`act.router_experts.${l.layer}`)).data;
      const w = (await G.tensor(`act.router_weights.${l.layer}`)).data;
      l.routes.forEach((r, t) => {
        expect(r.experts, `layer ${l.layer} row ${t}`).toEqual([...ids.subarray(t * k, (t + 1) * k)]);
        r.transformers.forEach((x, j) => (worst = Math.max(worst, Math.abs(x - w[t * k + j]))));
      });
    }
    expect(worst).toBeLessThan(1e-9);
    const flips = cmp.flatMap((l) => l.scale.flips.map((f) => ({ layer: l.layer, ...f })));
    expect(flips.map((f) => `${f.layer}/${f.row}`)).toEqual(['5/16']);
    expect(flips[0].gapBase).toBeCloseTo(2.4e-3, 4);
    console.log(
      `reference routers (transformers base): weights within ${worst.toExponential(2)} of the goldens; flip layer 5 row 16 [${flips[0].base}] -> [${flips[0].other}], gaps ${flips[0].gapBase.toExponential(3)} / ${flips[0].gapOther.toExponential(3)}`,
    );
  });
});
