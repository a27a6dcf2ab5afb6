/**
 * The CPU reference (numerics 'exact', float64 throughout) against the float64 goldens of gemma4-e-tiny
 * (tools/make_gemma4_family_fixtures.py: transformers 5.17 in float64 with its f32 RMSNorm, rotary tables and
 * attention softmax patched to float64, and MLX's bf16 constants set in it; golden.json `constants`):
 * per-layer embeddings, 4 KV-shared layers reading their donors, double-wide MLPs and the centroid-head assistant.
 * Every comparison is within 1e-9; the printed lines are the actual maxima.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { AssistantDescription, TargetDescription } from '../../src/format/model-description.ts';
import { openCheckpointDir } from '../../src/node/file-source.ts';
import { familyConstants } from '../../src/reference/family/constants.ts';
import {
  loadReferenceWeights,
  referenceDraft,
  referenceForward,
  referenceGreedy,
  type AssistantWeights,
  type ForwardResult,
  type TargetWeights,
} from '../../src/reference/index.ts';
import { GEMMA4_E_TINY, loadGolden, maxAbsDiff, type Golden } from '../support/fixtures.ts';

const TOL = 1e-9;
let tw: TargetWeights;
let aw: AssistantWeights;
let G: Golden;
let fwd: ForwardResult;
let T: number;
const lines: string[] = [];
const g = async (k: string) => (await G.tensor(k)).data;

beforeAll(async () => {
  const t = await openCheckpointDir(path.join(GEMMA4_E_TINY, 'target'));
  const a = await openCheckpointDir(path.join(GEMMA4_E_TINY, 'assistant'));
  tw = await loadReferenceWeights(t.description as TargetDescription);
  aw = await loadReferenceWeights(a.description as AssistantDescription);
  G = await loadGolden(GEMMA4_E_TINY);
  T = G.json.prompt.length;
  fwd = referenceForward(tw, G.json.prompt, { captures: true, numerics: 'exact' });
});

describe('reference (exact) vs gemma4-e-tiny float64 goldens: within 1e-9', () => {
  it('the goldens belong to the fixture models, and are float64 throughout', () => {
    const sha = (f: string) =>
      createHash('sha256')
        .update(readFileSync(path.join(GEMMA4_E_TINY, f)))
        .digest('hex');
    const recorded = G.json.sha256 as Record<string, string>;
    for (const f of ['target/model.safetensors', 'assistant/model.safetensors', 'golden.safetensors'])
      expect(recorded[f], f).toBe(sha(f));
    expect(G.json.non_float64_ops).toEqual({});
  });

  it('uses the constants the goldens were made with', () => {
    const c = familyConstants(tw.hidden, tw.ple!.ple);
    const used = G.json.constants as Record<string, { used: number }>;
    expect(tw.embedScale).toBe(used.embed_scale.used);
    expect(c.pleInputScale).toBe(used.per_layer_input_scale.used);
    expect(c.pleProjectionScale).toBe(used.per_layer_model_projection_scale.used);
    expect(c.pleTableScale).toBe(used.embed_tokens_per_layer_scale.used);
  });

  it('prompt logits, per-layer inputs and every per-layer activation', async () => {
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
    expect(fwd.sharedKv.sliding.layerIndex).toBe(5);
    expect(fwd.sharedKv.full.layerIndex).toBe(4);
    let worst = 0;
    for (const [type, kv] of [
      ['sliding', fwd.sharedKv.sliding],
      ['full', fwd.sharedKv.full],
    ] as const) {
      for (const part of ['keys', 'values'] as const) {
        const e = maxAbsDiff(kv[part], await g(`shared_kv.${type}_attention.${part}`));
        worst = Math.max(worst, e);
        expect(e, `${type} ${part}`).toBeLessThanOrEqual(TOL);
      }
    }
    const H = tw.hidden;
    const se = maxAbsDiff(fwd.finalHidden.subarray((T - 1) * H, T * H), await g('draft.seed_hidden'));
    lines.push(`shared K/V: max abs ${worst.toExponential(2)}; seed hidden ${se.toExponential(2)}`);
    expect(se).toBeLessThanOrEqual(TOL);
  });

  it('cached greedy decode gives the golden tokens; its logits and teacher-forced logits_full match', async () => {
    const n = G.json.greedy.length;
    const gr = referenceGreedy(tw, G.json.prompt, n, { numerics: 'exact' });
    expect(gr.tokens).toEqual(G.json.greedy);
    expect([...(await g('greedy'))]).toEqual(G.json.greedy);
    // greedy_logits are generate's per-step logits, which transformers' decoding loop copies to float32
    // (`outputs.logits[:, -1, :].to(copy=True, dtype=torch.float32)`) even in a float64 model: every value is an
    // f32. Compared after the same rounding they are equal bit for bit; the float64 check is logits_full below.
    const gl = await g('greedy_logits');
    expect(gl.every((x) => Math.fround(x) === x)).toBe(true);
    const ge = maxAbsDiff(gr.logits.map(Math.fround), gl);
    const full = referenceForward(tw, [...G.json.prompt, ...gr.tokens], { numerics: 'exact' });
    const fe = maxAbsDiff(full.logits, await g('logits_full'));
    lines.push(
      `greedy ${n} tokens equal; greedy_logits (f32) max abs after f32 rounding ${ge.toExponential(2)}; logits_full [${T + n},${tw.vocab}] ${fe.toExponential(2)}`,
    );
    expect(ge).toBe(0);
    expect(fe).toBeLessThanOrEqual(TOL);
  });

  it('the centroid-head assistant drafts the golden tokens from the reference target', async () => {
    const H = tw.hidden;
    const steps = G.json.draft.tokens.length;
    const d = referenceDraft(tw, aw, {
      bonusToken: G.json.bonus_token,
      seedHidden: fwd.finalHidden.slice((T - 1) * H, T * H),
      positionId: G.json.draft.position_id,
      sharedKv: fwd.sharedKv,
      steps,
      numerics: 'exact',
    });
    expect(d.tokens).toEqual(G.json.draft.tokens);
    expect([...(await g('draft.tokens'))]).toEqual(G.json.draft.tokens);
    // transformers' order: clusters by descending centroid logit, each cluster's tokens in token_ordering order
    expect([...d.centroid!.selected]).toEqual([...(await g('draft.selected_tokens'))]);
    const errs = {
      logits: maxAbsDiff(d.logits, await g('draft.logits')), // incl. the min - 1 fill outside the clusters
      hidden: maxAbsDiff(d.hidden, await g('draft.hidden')),
      normed: maxAbsDiff(d.normed, await g('draft.normed')),
      centroid_logits: maxAbsDiff(d.centroid!.logits, await g('draft.centroid_logits')),
    };
    lines.push(
      `draft ${steps} tokens equal: ${Object.entries(errs)
        .map(([k, e]) => `${k} ${e.toExponential(2)}`)
        .join(', ')}`,
    );
    for (const [k, e] of Object.entries(errs)) expect(e, k).toBeLessThanOrEqual(TOL);
    console.log(`reference (exact) vs gemma4-e-tiny float64 goldens:\n  ${lines.join('\n  ')}`);
  });
});
