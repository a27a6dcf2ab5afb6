import { readFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { toFloat64 } from '../../src/format/dtype.ts';
import { openQwen35Checkpoint } from '../../src/format/qwen3_5/index.ts';
import { readSafetensorsHeader, readTensorBytes } from '../../src/format/safetensors.ts';
import { nodeFileSource, nodeFolderSources } from '../../src/node/file-source.ts';
import {
  cloneQwenMtpState,
  cloneQwenState,
  loadQwenWeights,
  newQwenMtpState,
  newQwenState,
  qwenForward,
  qwenGreedy,
  qwenMtpDraft,
  qwenMtpForward,
  type QwenRefWeights,
  type QwenState,
} from '../../src/reference/qwen3_5/index.ts';
import { QWEN_SYNTH, qwenSynthFiles } from '../support/qwen-synth.ts';

/** Byte equality of float arrays (NaN-safe, -0 != 0): the standard of block == chain. */
function sameBytes(a: Float64Array, b: Float64Array): boolean {
  if (a.length !== b.length) return false;
  const x = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  const y = new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  return Buffer.compare(x, y) === 0;
}

function sameState(a: QwenState, b: QwenState): string | null {
  if (a.length !== b.length) return `length ${a.length} != ${b.length}`;
  for (let i = 0; i < a.layers.length; i++) {
    const x = a.layers[i];
    const y = b.layers[i];
    if (x.kind === 'linear' && y.kind === 'linear') {
      if (!sameBytes(x.conv, y.conv)) return `layer ${i} conv window`;
      if (!sameBytes(x.S, y.S)) return `layer ${i} recurrent state`;
    } else if (x.kind === 'full' && y.kind === 'full') {
      if (x.keys.length !== y.keys.length) return `layer ${i} KV length`;
      for (let j = 0; j < x.keys.length; j++)
        if (!sameBytes(x.keys[j], y.keys[j]) || !sameBytes(x.values[j], y.values[j])) return `layer ${i} KV ${j}`;
    } else return `layer ${i} kind`;
  }
  return null;
}

const TOKENS = [5, 17, 88, 3, 41, 60, 2, 95, 33, 71, 12, 50, 7, 64, 29, 80, 44, 9, 91, 26];

describe('Qwen3.5 reference: a block of K tokens == K single steps, bit for bit (random weights)', () => {
  let w: QwenRefWeights;
  beforeAll(async () => {
    w = await loadQwenWeights((await openQwen35Checkpoint(qwenSynthFiles(QWEN_SYNTH, { seed: 7 }))).description);
  });

  it('prefill as one block == token by token (logits, hidden, conv window, recurrent state, KV)', () => {
    const a = newQwenState(w.config);
    const b = newQwenState(w.config);
    const ra = qwenForward(w, a, TOKENS.slice(0, 9));
    const V = w.vocab;
    for (let t = 0; t < 9; t++) {
      const rb = qwenForward(w, b, [TOKENS[t]]);
      expect(sameBytes(ra.logits.subarray(t * V, (t + 1) * V), rb.logits)).toBe(true);
    }
    expect(sameState(a, b)).toBeNull();
  });

  // Prompts shorter and longer than the conv window (K - 1 = 3) and than the block
  for (const P of [1, 2, 3, 5, 9]) {
    for (const K of [2, 3, 4, 8]) {
      it(`prefix ${P}, block ${K}: block == chain, and replaying any accepted length m from the snapshot == m steps`, () => {
        const base = newQwenState(w.config);
        qwenForward(w, base, TOKENS.slice(0, P));
        const draft = TOKENS.slice(P, P + K);
        const block = cloneQwenState(base);
        const rb = qwenForward(w, block, draft);
        const chain = cloneQwenState(base);
        const V = w.vocab;
        const states: QwenState[] = [cloneQwenState(chain)];
        draft.forEach((tok, j) => {
          const r = qwenForward(w, chain, [tok]);
          expect(sameBytes(rb.logits.subarray(j * V, (j + 1) * V), r.logits)).toBe(true);
          states.push(cloneQwenState(chain));
        });
        expect(sameState(block, chain)).toBeNull();
        // rollback to accepted length m: restore the snapshot and replay the m accepted tokens as one block
        for (let m = 0; m <= K; m++) {
          const replay = cloneQwenState(base);
          if (m > 0) qwenForward(w, replay, draft.slice(0, m));
          expect(sameState(replay, states[m])).toBeNull();
        }
      });
    }
  }

  it('greedy with the state == argmax of teacher-forced full forwards', () => {
    const g = qwenGreedy(w, TOKENS.slice(0, 6), 6);
    const full = qwenForward(w, newQwenState(w.config), [...TOKENS.slice(0, 6), ...g.tokens.slice(0, 5)]);
    const V = w.vocab;
    for (let j = 0; j < 6; j++) {
      const row = full.logits.subarray((5 + j) * V, (6 + j) * V);
      expect(sameBytes(row, g.logits.subarray(j * V, (j + 1) * V))).toBe(true);
    }
  });

  it('MTP head: a block of rows == rows one at a time; drafts are deterministic', () => {
    const H = w.hidden;
    const r = qwenForward(w, newQwenState(w.config), TOKENS.slice(0, 8));
    const toks = TOKENS.slice(1, 9);
    const a = newQwenMtpState();
    const b = newQwenMtpState();
    const ra = qwenMtpForward(w, a, toks, r.hidden, 0);
    for (let j = 0; j < 8; j++) {
      const rb = qwenMtpForward(w, b, [toks[j]], r.hidden.slice(j * H, (j + 1) * H), j);
      expect(sameBytes(ra.hidden.subarray(j * H, (j + 1) * H), rb.hidden)).toBe(true);
    }
    const c = cloneQwenMtpState(a);
    expect(c.kv.keys.every((k, j) => sameBytes(k, b.kv.keys[j]))).toBe(true);
    const d1 = qwenMtpDraft(w, TOKENS.slice(0, 8), r.hidden, TOKENS[8], 3);
    const d2 = qwenMtpDraft(w, TOKENS.slice(0, 8), r.hidden, TOKENS[8], 3);
    expect(d1.tokens).toEqual(d2.tokens);
    expect(sameBytes(d1.logits, d2.logits)).toBe(true);
    expect(d1.state.kv.keys.length).toBe(8 + 2);
  });
});

// -------------------------------------------------------------------------------- against the fixture goldens
const FIXTURE = path.resolve(process.cwd(), 'test/fixtures/qwen-tiny');
// Committed; rebuilt on the device with `python3 tools/make_qwen_fixtures.py $OUT`, then
// `tar xzf $OUT/qwen-tiny.tar.gz -C test/fixtures/`.
const TOL = 1e-9;

describe(`Qwen3.5 reference vs qwen-tiny float64 goldens (within ${TOL})`, () => {
  let w: QwenRefWeights;
  let meta: { prompt: number[]; greedy: number[]; bonus_token: number; spec: { draft_steps: number }; source?: string };
  const golden = new Map<string, { shape: number[]; data: Float64Array }>();
  const g = (name: string) => {
    const t = golden.get(name);
    if (!t) throw new Error(`golden.safetensors: no tensor ${name}`);
    return t;
  };
  const maxDiff = (a: Float64Array, b: Float64Array) => {
    expect(a.length).toBe(b.length);
    let m = 0;
    for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
    return m;
  };

  beforeAll(async () => {
    const ck = await openQwen35Checkpoint(await nodeFolderSources(path.join(FIXTURE, 'target')), 'qwen-tiny');
    w = await loadQwenWeights(ck.description);
    meta = JSON.parse(readFileSync(path.join(FIXTURE, 'golden.json'), 'utf8'));
    const h = await readSafetensorsHeader(await nodeFileSource(path.join(FIXTURE, 'golden.safetensors')));
    for (const t of h.tensors)
      golden.set(t.name, { shape: [...t.shape], data: toFloat64(await readTensorBytes(t), t.dtype) });
  });

  it('full forward: logits and every captured activation', () => {
    const r = qwenForward(w, newQwenState(w.config), meta.prompt, { capture: true });
    const errs: Record<string, number> = { logits: maxDiff(r.logits, g('logits').data) };
    for (const [name] of golden) {
      if (!name.startsWith('act.')) continue;
      const mine = r.acts!.get(name);
      expect(mine, `reference captures ${name}`).toBeDefined();
      errs[name] = maxDiff(mine!, g(name).data);
    }
    expect(Object.keys(errs).length).toBeGreaterThan(4 * w.layers.length);
    const worst = Object.entries(errs).sort((a, b) => b[1] - a[1])[0];
    expect(worst[1], `worst: ${worst[0]}`).toBeLessThan(TOL);
  });

  it('cached greedy decode: tokens and the logits of every step; teacher-forced logits', () => {
    const n = meta.greedy.length;
    const r = qwenGreedy(w, meta.prompt, n);
    expect(r.tokens).toEqual(meta.greedy);
    expect(maxDiff(r.logits, g('greedy_logits').data)).toBeLessThan(TOL);
    const full = qwenForward(w, newQwenState(w.config), [...meta.prompt, ...meta.greedy]);
    expect(maxDiff(full.logits, g('logits_full').data)).toBeLessThan(TOL);
  });

  it('conv window and recurrent state after the prefill', () => {
    const names = [...golden.keys()].filter((n) => n.startsWith('state.'));
    if (meta.source?.startsWith('transformers')) expect(names.length).toBeGreaterThan(0);
    const st = newQwenState(w.config);
    qwenForward(w, st, meta.prompt);
    for (const name of names) {
      const i = Number(name.split('.').pop());
      const L = st.layers[i];
      if (L.kind !== 'linear') throw new Error(`${name}: layer ${i} is not Gated DeltaNet`);
      const ref = g(name);
      if (name.startsWith('state.conv.')) {
        const [C, Km1] = ref.shape; // transformers: [C, K-1]; ours: [K-1, C]
        const t = new Float64Array(C * Km1);
        for (let c = 0; c < C; c++) for (let j = 0; j < Km1; j++) t[j * C + c] = ref.data[c * Km1 + j];
        expect(maxDiff(L.conv, t), name).toBeLessThan(TOL);
      } else expect(maxDiff(L.S, ref.data), name).toBeLessThan(TOL);
    }
  });

  it("MTP head drafts (the script's float64 numpy model, vLLM structure)", () => {
    const r = qwenForward(w, newQwenState(w.config), meta.prompt);
    expect(maxDiff(r.hidden.subarray((meta.prompt.length - 1) * w.hidden), g('mtp.seed_hidden').data)).toBeLessThan(
      TOL,
    );
    const steps = meta.spec.draft_steps;
    const d = qwenMtpDraft(w, meta.prompt, r.hidden, meta.bonus_token, steps);
    expect(d.tokens).toEqual([...g('mtp.draft.tokens').data]);
    expect(maxDiff(d.logits, g('mtp.draft.logits').data)).toBeLessThan(TOL);
    expect(maxDiff(d.hidden, g('mtp.draft.hidden').data)).toBeLessThan(TOL);
    expect(maxDiff(d.promptHidden, g('mtp.prompt_hidden').data)).toBeLessThan(TOL);
  });
});
