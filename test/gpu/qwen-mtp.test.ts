import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import { loadGolden, maxAbsDiff, nmse, type Golden } from '../support/fixtures.ts';
import { openQwen35Checkpoint } from '../../src/format/qwen3_5/index.ts';
import { nodeFolderSources } from '../../src/node/file-source.ts';
import { uploadQwenWeights, type QwenGpuWeights } from '../../src/model/qwen3_5/weights.ts';
import { QwenTargetModel } from '../../src/model/qwen3_5/target.ts';
import { QwenMtpHead, qwenHeadSource } from '../../src/model/qwen3_5/mtp.ts';
import { generateClassic, generateMtp, oracleSource } from '../../src/model/generate.ts';
import type { GpuContext } from '../../src/gpu/device.ts';

/**
 * The Qwen3.5 MTP head on the GPU, on qwen-tiny: vLLM's proposer after the prompt (the head over the T prompt
 * rows, then drafts from its own hidden) against the fixture's float64 goldens (the script's numpy model:
 * transformers drops mtp.*, so there is no transformers f32 yardstick; the level for logits, 0.05,
 * applies), and a block of head rows == the same rows one at a time, byte for byte.
 */
const FIXTURE = path.resolve(process.cwd(), 'test/fixtures/qwen-tiny');

describe('Qwen3.5 MTP head on the GPU (qwen-tiny)', () => {
  let ctx: GpuContext;
  let golden: Golden;
  let weights: QwenGpuWeights;
  let target: QwenTargetModel;
  let head: QwenMtpHead;
  beforeAll(async () => {
    ctx = await testGpu();
    golden = await loadGolden(FIXTURE);
    const ck = await openQwen35Checkpoint(await nodeFolderSources(path.join(FIXTURE, 'target')), 'qwen-tiny');
    weights = await uploadQwenWeights(ctx.device, ck.description);
    target = new QwenTargetModel(ctx, weights, { maxContext: 352, maxBlock: 8, prefillChunk: 32, precision: 'f32' });
    head = new QwenMtpHead(target);
  });
  afterAll(() => {
    head?.destroy();
    target?.destroy();
    weights?.destroy();
    ctx?.destroy();
  });

  it("drafts the golden tokens from the target's post-norm hidden, logits within 0.05 of float64", async () => {
    const prompt = golden.json.prompt;
    const T = prompt.length;
    const H = target.desc.hidden;
    const V = target.desc.vocab;
    target.reset();
    const pre = await target.prefill(prompt, { logits: 'last', finalHidden: true });
    const bonus = pre.argmax![0];
    expect(bonus).toBe(golden.json.bonus_token);
    const first = await head.forward([...prompt.slice(1), bonus], pre.finalHidden!, 0, 'prefill');
    const promptErr = nmse(first.hidden, (await golden.tensor('mtp.prompt_hidden')).data);
    const steps = (await golden.tensor('mtp.draft.tokens')).data.length;
    const tokens: number[] = [];
    const logits: number[] = [];
    let l: Float32Array = first.logits.subarray((T - 1) * V);
    let h: Float32Array = first.hidden.slice((T - 1) * H);
    let tok = first.argmax[T - 1];
    for (let j = 0; j < steps; j++) {
      tokens.push(tok);
      logits.push(...l);
      if (j + 1 < steps) {
        const r = await head.forward([tok], h, T + j);
        [l, h, tok] = [r.logits, r.hidden, r.argmax[0]];
      }
    }
    const err = maxAbsDiff(logits, (await golden.tensor('mtp.draft.logits')).data);
    console.log(
      `qwen-tiny MTP: drafts ${tokens.join(', ')}; draft logits max abs vs float64 ${err.toExponential(3)}; prompt hidden NMSE ${promptErr.toExponential(2)}`,
    );
    expect(tokens).toEqual([...(await golden.tensor('mtp.draft.tokens')).data]);
    expect(err).toBeLessThan(0.05);
    expect(promptErr).toBeLessThan(1e-8);
  });

  it('classic greedy == MTP with the head (K = 4) and with oracle drafts (K = 3, 8, rejections on a schedule) over 300 tokens, same SHA-256', async () => {
    const prompt = golden.json.prompt;
    const maxNew = 300;
    const classic = await generateClassic(target, prompt, { maxNew });
    expect(classic.tokens.slice(0, golden.json.greedy.length)).toEqual(golden.json.greedy);
    const head4 = await generateMtp(target, qwenHeadSource(head, 8), prompt, 4, { maxNew });
    // Oracle drafts replay the classic stream with a wrong token every 7th / 5th index: every acceptance
    // length and rollback depth occurs.
    const V = target.desc.vocab;
    const oracle3 = await generateMtp(
      target,
      oracleSource(classic.tokens, V, (i) => i % 7 === 3),
      prompt,
      3,
      { maxNew },
    );
    const oracle8 = await generateMtp(
      target,
      oracleSource(classic.tokens, V, (i) => i % 5 === 2),
      prompt,
      8,
      { maxNew },
    );
    for (const [name, r] of [
      ['head K=4', head4],
      ['oracle K=3', oracle3],
      ['oracle K=8', oracle8],
    ] as const) {
      console.log(
        `qwen-tiny generate ${name}: ${r.tokens.length} tokens, sha256 ${r.sha256.slice(0, 16)}, accepted ${r.counters!.accepted} of ${r.counters!.drafted} drafts, histogram ${r.counters!.acceptedHistogram.join('/')}`,
      );
      expect(r.tokens, name).toEqual(classic.tokens);
      expect(r.sha256, name).toBe(classic.sha256);
    }
    console.log(`qwen-tiny classic: ${classic.tokens.length} tokens, sha256 ${classic.sha256}`);
  });

  for (const K of [2, 3, 4, 8]) {
    it(`K = ${K}: head rows as one block == the same rows one at a time, byte for byte`, async () => {
      const prompt = golden.json.prompt.slice(0, 12);
      const H = target.desc.hidden;
      const V = target.desc.vocab;
      target.reset();
      const pre = await target.prefill(prompt, { logits: 'none', finalHidden: true });
      const toks = [...prompt.slice(1), 7];
      // rows 0..K-1 one at a time, then the same rows as one block (the KV rows are rewritten in place)
      const single: Float32Array[] = [];
      for (let j = 0; j < K; j++)
        single.push((await head.forward([toks[j]], pre.finalHidden!.slice(j * H, (j + 1) * H), j)).logits);
      const block = await head.forward(toks.slice(0, K), pre.finalHidden!.slice(0, K * H), 0);
      for (let j = 0; j < K; j++) {
        const a = Buffer.from(block.logits.buffer, block.logits.byteOffset + j * V * 4, V * 4);
        const b = Buffer.from(single[j].buffer, single[j].byteOffset, V * 4);
        expect(Buffer.compare(a, b), `row ${j}`).toBe(0);
      }
    });
  }
});
