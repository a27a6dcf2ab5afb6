/**
 * What the CPU reference's golden tests of the Gemma 4 family fixtures (test/unit/family-golden.test.ts for the
 * E-series, test/unit/gemma4-moe-golden.test.ts for MoE) check alike: the goldens belong to the fixture's files,
 * the target exports its last sliding / full layers' K/V and the seed hidden state, cached greedy decode gives the
 * golden tokens, and the assistant drafts the golden tokens. Each check asserts within `FAMILY_TOL` and returns the
 * line its test prints (the actual maxima); the tests keep what is their family's own.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';
import type { AssistantDescription, TargetDescription } from '../../src/format/model-description.ts';
import { openCheckpointDir } from '../../src/node/file-source.ts';
import {
  loadReferenceWeights,
  referenceDraft,
  referenceForward,
  referenceGreedy,
  type AssistantWeights,
  type DraftResult,
  type ForwardResult,
  type ReferenceOptions,
  type TargetWeights,
} from '../../src/reference/index.ts';
import { loadGolden, maxAbsDiff, type Golden } from './fixtures.ts';

/** float64 against float64: what is left is summation order, far below 1e-9 (the printed maxima are ~1e-11). */
export const FAMILY_TOL = 1e-9;

/** A family fixture's reference run: weights, goldens and the prompt's forward with every activation captured. */
export interface FamilyRun {
  dir: string;
  tw: TargetWeights;
  aw: AssistantWeights;
  G: Golden;
  /** The prompt's length. */
  T: number;
  fwd: ForwardResult;
  /** Options of the target's reference calls (MoE: transformers' router conventions, the goldens'); the draft takes none. */
  options: Pick<ReferenceOptions, 'router'>;
  /** A golden tensor's data. */
  g: (name: string) => Promise<Float64Array>;
}

export async function loadFamilyRun(dir: string, options: Pick<ReferenceOptions, 'router'> = {}): Promise<FamilyRun> {
  const t = await openCheckpointDir(path.join(dir, 'target'));
  const a = await openCheckpointDir(path.join(dir, 'assistant'));
  const tw = await loadReferenceWeights(t.description as TargetDescription);
  const aw = await loadReferenceWeights(a.description as AssistantDescription);
  const G = await loadGolden(dir);
  const fwd = referenceForward(tw, G.json.prompt, { captures: true, numerics: 'exact', ...options });
  return { dir, tw, aw, G, T: G.json.prompt.length, fwd, options, g: async (k) => (await G.tensor(k)).data };
}

/** The goldens were computed from the fixture's own model files, and in float64 throughout. */
export function expectGoldensOfFixture(run: FamilyRun): void {
  const sha = (f: string) =>
    createHash('sha256')
      .update(readFileSync(path.join(run.dir, f)))
      .digest('hex');
  const recorded = run.G.json.sha256 as Record<string, string>;
  for (const f of ['target/model.safetensors', 'assistant/model.safetensors', 'golden.safetensors'])
    expect(recorded[f], f).toBe(sha(f));
  expect(run.G.json.non_float64_ops).toEqual({});
}

/** The K/V the assistant reads (from the given layers) and the last prompt row's final hidden state (its seed). */
export async function expectSharedKvAndSeed(
  run: FamilyRun,
  layers: { sliding: number; full: number },
): Promise<string> {
  const { fwd, g } = run;
  expect(fwd.sharedKv.sliding.layerIndex).toBe(layers.sliding);
  expect(fwd.sharedKv.full.layerIndex).toBe(layers.full);
  let worst = 0;
  for (const [type, kv] of [
    ['sliding', fwd.sharedKv.sliding],
    ['full', fwd.sharedKv.full],
  ] as const) {
    for (const part of ['keys', 'values'] as const) {
      const e = maxAbsDiff(kv[part], await g(`shared_kv.${type}_attention.${part}`));
      worst = Math.max(worst, e);
      expect(e, `${type} ${part}`).toBeLessThanOrEqual(FAMILY_TOL);
    }
  }
  const H = run.tw.hidden;
  const se = maxAbsDiff(fwd.finalHidden.subarray((run.T - 1) * H, run.T * H), await g('draft.seed_hidden'));
  expect(se).toBeLessThanOrEqual(FAMILY_TOL);
  return `shared K/V: max abs ${worst.toExponential(2)}; seed hidden ${se.toExponential(2)}`;
}

/**
 * Cached greedy decode gives the golden tokens; its per-step logits equal greedy_logits after f32 rounding (generate
 * copies them to float32 even in a float64 model, `outputs.logits[:, -1, :].to(copy=True, dtype=torch.float32)`, so
 * every golden value is an f32), and the teacher-forced forward over prompt + tokens matches logits_full in float64.
 */
export async function expectGreedy(run: FamilyRun): Promise<string> {
  const { tw, G, T, g, options } = run;
  const n = G.json.greedy.length;
  const gr = referenceGreedy(tw, G.json.prompt, n, { numerics: 'exact', ...options });
  expect(gr.tokens).toEqual(G.json.greedy);
  expect([...(await g('greedy'))]).toEqual(G.json.greedy);
  const gl = await g('greedy_logits');
  expect(gl.every((x) => Math.fround(x) === x)).toBe(true);
  const ge = maxAbsDiff(gr.logits.map(Math.fround), gl);
  const full = referenceForward(tw, [...G.json.prompt, ...gr.tokens], { numerics: 'exact', ...options });
  const fe = maxAbsDiff(full.logits, await g('logits_full'));
  expect(ge).toBe(0);
  expect(fe).toBeLessThanOrEqual(FAMILY_TOL);
  return `greedy ${n} tokens equal; greedy_logits (f32) max abs after f32 rounding ${ge.toExponential(2)}; logits_full [${T + n},${tw.vocab}] ${fe.toExponential(2)}`;
}

/**
 * The assistant drafts the golden tokens from the reference target's seed and K/V; its logits, hidden and normed
 * states match, and so do `more` (the family's own tensors: golden name -> value). Returns the draft for further
 * checks and the printed line.
 */
export async function expectDraft(
  run: FamilyRun,
  more: (d: DraftResult) => Promise<Record<string, number>> = async () => ({}),
): Promise<{ draft: DraftResult; line: string }> {
  const { tw, aw, G, T, fwd, g } = run;
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
    ...(await more(d)),
  };
  for (const [k, e] of Object.entries(errs)) expect(e, k).toBeLessThanOrEqual(FAMILY_TOL);
  const line = `draft ${steps} tokens equal: ${Object.entries(errs)
    .map(([k, e]) => `${k} ${e.toExponential(2)}`)
    .join(', ')}`;
  return { draft: d, line };
}
