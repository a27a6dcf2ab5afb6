/**
 * The CPU reference (numerics 'exact', float64 throughout) against the float64 goldens of gemma4-e-tiny
 * (tools/make_gemma4_family_fixtures.py: transformers 5.17 in float64 with its f32 RMSNorm, rotary tables and
 * attention softmax patched to float64, and MLX's bf16 constants set in it; golden.json `constants`):
 * per-layer embeddings, 4 KV-shared layers reading their donors, double-wide MLPs and the centroid-head assistant.
 * Every comparison is within 1e-9; the printed lines are the actual maxima.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { familyConstants } from '../../src/numerics/family-constants.ts';
import {
  expectDraft,
  expectGoldensOfFixture,
  expectGreedy,
  expectSharedKvAndSeed,
  FAMILY_TOL as TOL,
  loadFamilyRun,
  type FamilyRun,
} from '../support/family-goldens.ts';
import { GEMMA4_E_TINY, maxAbsDiff } from '../support/fixtures.ts';

let run: FamilyRun;
const lines: string[] = [];

beforeAll(async () => {
  run = await loadFamilyRun(GEMMA4_E_TINY);
});

describe('reference (exact) vs gemma4-e-tiny float64 goldens: within 1e-9', () => {
  it('the goldens belong to the fixture models, and are float64 throughout', () => {
    expectGoldensOfFixture(run);
  });

  it('uses the constants the goldens were made with', () => {
    const { tw, G } = run;
    const c = familyConstants(tw.hidden, tw.ple!.ple);
    const used = G.json.constants as Record<string, { used: number }>;
    expect(tw.embedScale).toBe(used.embed_scale.used);
    expect(c.pleInputScale).toBe(used.per_layer_input_scale.used);
    expect(c.pleProjectionScale).toBe(used.per_layer_model_projection_scale.used);
    expect(c.pleTableScale).toBe(used.embed_tokens_per_layer_scale.used);
  });

  it('prompt logits, per-layer inputs and every per-layer activation', async () => {
    const { tw, G, T, fwd, g } = run;
    const err = maxAbsDiff(fwd.logits, await g('logits'));
    lines.push(`logits [${T},${tw.vocab}]: max abs ${err.toExponential(2)}`);
    expect(err).toBeLessThanOrEqual(TOL);
    const goldenActs = G.names.filter((n) => n.startsWith('act.'));
    // every golden activation is produced, and nothing else
    expect([...fwd.acts!.keys()].sort()).toEqual(goldenActs.sort());
    const worst = new Map<string, number>();
    for (const k of goldenActs) {
      const e = maxAbsDiff(fwd.acts!.get(k)!, await g(k));
      const kind = k.replace(/\.\d+$/, '.i');
      worst.set(kind, Math.max(worst.get(kind) ?? 0, e));
      expect(e, k).toBeLessThanOrEqual(TOL);
    }
    lines.push(`acts: ${[...worst].map(([k, e]) => `${k} ${e.toExponential(2)}`).join(', ')}`);
  });

  it('exports the donors K/V (layers 5 and 4) as the shared K/V, and the seed hidden state', async () => {
    lines.push(await expectSharedKvAndSeed(run, { sliding: 5, full: 4 }));
  });

  it('cached greedy decode gives the golden tokens; its logits and teacher-forced logits_full match', async () => {
    lines.push(await expectGreedy(run));
  });

  it('the centroid-head assistant drafts the golden tokens from the reference target', async () => {
    const { g } = run;
    const { draft, line } = await expectDraft(run, async (d) => ({
      // draft.logits include the min - 1 fill outside the chosen clusters
      centroid_logits: maxAbsDiff(d.centroid!.logits, await g('draft.centroid_logits')),
    }));
    // transformers' order: clusters by descending centroid logit, each cluster's tokens in token_ordering order
    expect([...draft.centroid!.selected]).toEqual([...(await g('draft.selected_tokens'))]);
    lines.push(line);
    console.log(`reference (exact) vs gemma4-e-tiny float64 goldens:\n  ${lines.join('\n  ')}`);
  });
});
