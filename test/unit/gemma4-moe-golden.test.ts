/**
 * The CPU reference (numerics 'exact', float64 throughout) against the float64 goldens of gemma4-moe-tiny
 * (tools/make_gemma4_family_fixtures.py: transformers 5.17 in float64, eager experts, the router's float32 casts
 * rewritten to float64, MLX's bf16 constants set in it; golden.json `constants`): a dense MLP in parallel with 8
 * experts (top-4), K = V on the full layer, and the dense-head assistant reading the target's K/V.
 * The goldens follow transformers' router (softmax over all E, top-k, renormalise; `(norm(x) * scale) * root`) and
 * its eager experts' sum (expert ids ascending), so the reference runs with those options. Every comparison is
 * within 1e-9; the printed lines are the actual maxima.
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
  type ReferenceOptions,
  type TargetWeights,
} from '../../src/reference/index.ts';
import { GEMMA4_MOE_TINY, loadGolden, maxAbsDiff, type Golden } from '../support/fixtures.ts';

const TOL = 1e-9;
/** transformers' conventions, the ones the goldens were computed with. */
const ROUTER: ReferenceOptions['router'] = {
  order: 'transformers',
  scaleProduct: 'transformers',
  sumOrder: 'expert-ascending',
};
let tw: TargetWeights;
let aw: AssistantWeights;
let G: Golden;
let fwd: ForwardResult;
let T: number;
const lines: string[] = [];
const g = async (k: string) => (await G.tensor(k)).data;

beforeAll(async () => {
  const t = await openCheckpointDir(path.join(GEMMA4_MOE_TINY, 'target'));
  const a = await openCheckpointDir(path.join(GEMMA4_MOE_TINY, 'assistant'));
  tw = await loadReferenceWeights(t.description as TargetDescription);
  aw = await loadReferenceWeights(a.description as AssistantDescription);
  G = await loadGolden(GEMMA4_MOE_TINY);
  T = G.json.prompt.length;
  fwd = referenceForward(tw, G.json.prompt, { captures: true, numerics: 'exact', router: ROUTER });
});

describe('reference (exact) vs gemma4-moe-tiny float64 goldens: within 1e-9', () => {
  it('the goldens belong to the fixture models, are float64 throughout, and every fixture check passed', () => {
    const sha = (f: string) =>
      createHash('sha256')
        .update(readFileSync(path.join(GEMMA4_MOE_TINY, f)))
        .digest('hex');
    const recorded = G.json.sha256 as Record<string, string>;
    for (const f of ['target/model.safetensors', 'assistant/model.safetensors', 'golden.safetensors'])
      expect(recorded[f], f).toBe(sha(f));
    expect(G.json.non_float64_ops).toEqual({});
    expect(G.json.failed_checks).toEqual([]);
    expect(G.json.variant).toBe('moe');
  });

  it('uses the constants the goldens were made with, and every layer is a MoE layer', () => {
    const c = familyConstants(tw.hidden, 0);
    const used = G.json.constants as Record<string, { used: number }>;
    expect(tw.embedScale).toBe(used.embed_scale.used);
    expect(c.routerRootSize).toBe(used.router_root_size.used);
    expect(tw.layers.every((l) => l.moe?.numExperts === 8 && l.moe.topK === 4)).toBe(true);
  });

  it('prompt logits and every per-layer activation: attention, dense MLP, router, experts, layer', async () => {
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
    expect(fwd.sharedKv.sliding.layerIndex).toBe(4);
    expect(fwd.sharedKv.full.layerIndex).toBe(5);
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
    const gr = referenceGreedy(tw, G.json.prompt, n, { numerics: 'exact', router: ROUTER });
    expect(gr.tokens).toEqual(G.json.greedy);
    expect([...(await g('greedy'))]).toEqual(G.json.greedy);
    // greedy_logits are float32 copies (transformers' decoding loop), compared after the same rounding
    const gl = await g('greedy_logits');
    expect(gl.every((x) => Math.fround(x) === x)).toBe(true);
    const ge = maxAbsDiff(gr.logits.map(Math.fround), gl);
    const full = referenceForward(tw, [...G.json.prompt, ...gr.tokens], { numerics: 'exact', router: ROUTER });
    const fe = maxAbsDiff(full.logits, await g('logits_full'));
    lines.push(
      `greedy ${n} tokens equal; greedy_logits (f32) max abs after f32 rounding ${ge.toExponential(2)}; logits_full [${T + n},${tw.vocab}] ${fe.toExponential(2)}`,
    );
    expect(ge).toBe(0);
    expect(fe).toBeLessThanOrEqual(TOL);
  });

  it('the dense-head assistant drafts the golden tokens from the reference target', async () => {
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
    const errs = {
      logits: maxAbsDiff(d.logits, await g('draft.logits')),
      hidden: maxAbsDiff(d.hidden, await g('draft.hidden')),
      normed: maxAbsDiff(d.normed, await g('draft.normed')),
    };
    lines.push(
      `draft ${steps} tokens equal: ${Object.entries(errs)
        .map(([k, e]) => `${k} ${e.toExponential(2)}`)
        .join(', ')}`,
    );
    for (const [k, e] of Object.entries(errs)) expect(e, k).toBeLessThanOrEqual(TOL);
    console.log(`reference (exact) vs gemma4-moe-tiny float64 goldens:\n  ${lines.join('\n  ')}`);
  });
});
