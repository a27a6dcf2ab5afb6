/**
 * The CPU reference (numerics 'exact', float64 throughout) against the float64 goldens of gemma4-moe-tiny
 * (tools/make_gemma4_family_fixtures.py: transformers 5.17 in float64, eager experts, the router's float32 casts
 * rewritten to float64, MLX's bf16 constants set in it; golden.json `constants`): a dense MLP in parallel with 8
 * experts (top-4), K = V on the full layer, and the dense-head assistant reading the target's K/V.
 * The goldens follow transformers' router (softmax over all E, top-k, renormalise; `(norm(x) * scale) * root`) and
 * its eager experts' sum (expert ids ascending), so the reference runs with those options. Every comparison is
 * within 1e-9; the printed lines are the actual maxima.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { familyConstants } from '../../src/numerics/family-constants.ts';
import { referenceForward, type ReferenceOptions } from '../../src/reference/index.ts';
import {
  expectDraft,
  expectGoldensOfFixture,
  expectGreedy,
  expectSharedKvAndSeed,
  FAMILY_TOL as TOL,
  loadFamilyRun,
  type FamilyRun,
} from '../support/family-goldens.ts';
import { GEMMA4_MOE_TINY, maxAbsDiff } from '../support/fixtures.ts';

/** transformers' conventions, the ones the goldens were computed with. */
const ROUTER: ReferenceOptions['router'] = {
  order: 'transformers',
  scaleProduct: 'transformers',
  sumOrder: 'expert-ascending',
};
let run: FamilyRun;
const lines: string[] = [];

beforeAll(async () => {
  run = await loadFamilyRun(GEMMA4_MOE_TINY, { router: ROUTER });
});

describe('reference (exact) vs gemma4-moe-tiny float64 goldens: within 1e-9', () => {
  it('the goldens belong to the fixture models, are float64 throughout, and every fixture check passed', () => {
    expectGoldensOfFixture(run);
    expect(run.G.json.failed_checks).toEqual([]);
    expect(run.G.json.variant).toBe('moe');
  });

  it('uses the constants the goldens were made with, and every layer is a MoE layer', () => {
    const { tw, G } = run;
    const c = familyConstants(tw.hidden, 0);
    const used = G.json.constants as Record<string, { used: number }>;
    expect(tw.embedScale).toBe(used.embed_scale.used);
    expect(c.routerRootSize).toBe(used.router_root_size.used);
    expect(tw.layers.every((l) => l.moe?.numExperts === 8 && l.moe.topK === 4)).toBe(true);
  });

  it('prompt logits and every per-layer activation: attention, dense MLP, router, experts, layer', async () => {
    const { tw, G, T, fwd, g } = run;
    const err = maxAbsDiff(fwd.logits, await g('logits'));
    lines.push(`logits [${T},${tw.vocab}]: max abs ${err.toExponential(2)}`);
    expect(err).toBeLessThanOrEqual(TOL);
    const goldenActs = G.names.filter((n) => n.startsWith('act.'));
    // every golden activation is produced, and nothing else
    expect([...fwd.acts!.keys()].sort()).toEqual(goldenActs.sort());
    const worst = new Map<string, number>();
    for (const k of goldenActs) {
      const want = await g(k);
      const got = fwd.acts!.get(k)!;
      const kind = k.replace(/\.\d+$/, '.i');
      if (kind === 'act.router_experts.i') {
        // ids: equal, in torch.topk's order (descending probability)
        expect([...got], k).toEqual([...want]);
        continue;
      }
      const e = maxAbsDiff(got, want);
      worst.set(kind, Math.max(worst.get(kind) ?? 0, e));
      expect(e, k).toBeLessThanOrEqual(TOL);
    }
    lines.push(`acts (router ids equal): ${[...worst].map(([k, e]) => `${k} ${e.toExponential(2)}`).join(', ')}`);
  });

  it("MLX's router (top-k of the scores, softmax over k) picks the same experts with weights within 1e-12", () => {
    const { tw, G, T, fwd } = run;
    const mlx = referenceForward(tw, G.json.prompt, { captures: true, numerics: 'exact' });
    const k = 4;
    let worst = 0;
    for (let li = 0; li < tw.layers.length; li++) {
      const hfIds = fwd.acts!.get(`act.router_experts.${li}`)!;
      const hfW = fwd.acts!.get(`act.router_weights.${li}`)!;
      const ids = mlx.acts!.get(`act.router_experts.${li}`)!;
      const ws = mlx.acts!.get(`act.router_weights.${li}`)!;
      for (let r = 0; r < T; r++) {
        const byId = (a: Float64Array, w: Float64Array) =>
          new Map([...a.subarray(r * k, (r + 1) * k)].map((e, j) => [e, w[r * k + j]]));
        const want = byId(hfIds, hfW);
        const got = byId(ids, ws);
        expect([...got.keys()].sort(), `layer ${li} row ${r}`).toEqual([...want.keys()].sort());
        for (const [e, w] of got) worst = Math.max(worst, Math.abs(w - want.get(e)!));
      }
    }
    lines.push(`mlx router vs transformers router: same experts, weights max abs ${worst.toExponential(2)}`);
    expect(worst).toBeLessThanOrEqual(1e-12);
  });

  it('exports the last sliding / full layers K/V (layers 4 and 5) and the seed hidden state', async () => {
    lines.push(await expectSharedKvAndSeed(run, { sliding: 4, full: 5 }));
  });

  it('cached greedy decode gives the golden tokens; its logits and teacher-forced logits_full match', async () => {
    lines.push(await expectGreedy(run));
  });

  it('the dense-head assistant drafts the golden tokens from the reference target', async () => {
    lines.push((await expectDraft(run)).line);
    console.log(`reference (exact) vs gemma4-moe-tiny float64 goldens:\n  ${lines.join('\n  ')}`);
  });
});
