import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import { Rand } from './helpers/kernel-lab.ts';
import twoCopy from './wgsl/two-copy.wgsl?raw';
import { readBytes, storageBuffer, uniformBuffer, uploadBuffer } from '../../src/gpu/buffers.ts';
import type { GpuContext } from '../../src/gpu/device.ts';
import {
  fuzzedPipelineSource,
  parseWgslFuzz,
  setWgslFuzz,
  wgslFuzzSpec,
  type WgslFuzzSpec,
} from '../../src/gpu/wgsl-fuzz/config.ts';
import { shaderSource } from '../../src/gpu/shaders.ts';
import { parseWgsl, W } from '../../src/gpu/wgsl-fuzz/parse.ts';
import { tinyModel, tinyWeights, tokens } from './tiny-model.ts';

/**
 * The compiler fuzzer (src/gpu/wgsl-fuzz) on the GPU: its rewrites compile, and they bite where a kernel keeps two
 * copies of one computation (test/gpu/wgsl/two-copy.wgsl), but not where every row runs one copy. The exactness
 * tests themselves run under it in a pass of their own (scripts/test.sh).
 */
const ROWS = 4;
const N = 64;

describe('compiler fuzzer (RINGSIDE_WGSL_FUZZ)', () => {
  let ctx: GpuContext;
  let before: WgslFuzzSpec | undefined;
  beforeAll(async () => {
    ctx = await testGpu();
    before = wgslFuzzSpec();
  });
  afterAll(async () => {
    await setWgslFuzz(before);
    ctx?.destroy();
  });

  /** y of the two-copy kernel's entry point: every row of x the same values, so every y[m] the same sum. */
  async function run(entry: 'two_copies' | 'one_stream', spec: WgslFuzzSpec | undefined): Promise<Uint8Array[]> {
    await setWgslFuzz(spec);
    const code = fuzzedPipelineSource('two-copy.wgsl', twoCopy, entry, {});
    const { device } = ctx;
    const module = device.createShaderModule({ code });
    const errors = (await module.getCompilationInfo()).messages.filter((m) => m.type === 'error');
    expect(errors.map((m) => m.message)).toEqual([]);
    const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: entry } });
    const r = new Rand(7);
    const row = Float32Array.from({ length: N }, () => r.normal());
    const x = new Float32Array(ROWS * N);
    for (let m = 0; m < ROWS; m++) x.set(row, m * N);
    const w = Float32Array.from({ length: N }, () => r.normal());
    const bufs = [
      uniformBuffer(device, new Uint32Array([ROWS, N]), 'P'),
      uploadBuffer(device, x, 'x'),
      uploadBuffer(device, w, 'w'),
      storageBuffer(device, ROWS * 4, 'y'),
    ];
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(
      0,
      device.createBindGroup({
        layout: pipeline.getBindGroupLayout(0),
        entries: bufs.map((buffer, binding) => ({ binding, resource: { buffer } })),
      }),
    );
    pass.dispatchWorkgroups(1);
    pass.end();
    device.queue.submit([enc.finish()]);
    const y = await readBytes(device, bufs[3], ROWS * 4);
    for (const b of bufs) b.destroy();
    return Array.from({ length: ROWS }, (_, m) => y.slice(m * 4, m * 4 + 4));
  }
  const rowsEqual = (y: Uint8Array[]) => y.every((v) => v.every((b, i) => b === y[0][i]));

  it('the two-copy kernel: every row the same bytes without the fuzzer and under identity', async () => {
    expect(rowsEqual(await run('two_copies', undefined))).toBe(true);
    expect(rowsEqual(await run('two_copies', parseWgslFuzz('identity:1')))).toBe(true);
  });

  // Which seeds bite is fixed by the site hash (src/gpu/wgsl-fuzz/pipeline-source.ts): each copy's sites get
  // decisions of their own, so most seeds rewrite the copies differently.
  for (const mode of ['contract', 'reassoc', 'all'] as const) {
    it(`${mode}: row 0's copy differs from the other rows' under some seed of 1..3; one stream never does`, async () => {
      const bitten: number[] = [];
      for (const seed of [1, 2, 3]) {
        const y = await run('two_copies', { mode, seed });
        expect(
          y.slice(1).every((v) => v.every((b, i) => b === y[1][i])),
          `${mode}:${seed} rows 1..`,
        ).toBe(true);
        if (!rowsEqual(y)) bitten.push(seed);
        expect(rowsEqual(await run('one_stream', { mode, seed })), `${mode}:${seed} one stream`).toBe(true);
      }
      console.log(`${mode}: the two-copy kernel's rows differ under seeds ${bitten.join(', ') || 'none'}`);
      expect(bitten.length).toBeGreaterThan(0);
    });
  }

  it("identity (copies per call path, text put back, no rewrite): the tiny model's logits bytes are the engine's", async () => {
    const weights = await tinyWeights(ctx);
    const logits = async (spec: WgslFuzzSpec | undefined) => {
      await setWgslFuzz(spec);
      const model = tinyModel(ctx, weights, 'f32'); // a KernelCache of its own: pipelines made under `spec`
      const prompt = tokens(20, 5);
      const rows = [(await model.prefill(prompt, { logits: 'all' })).logits!];
      for (const t of tokens(3, 6)) rows.push((await model.decode(t)).logits!);
      rows.push((await model.step(tokens(4, 7))).logits!);
      model.destroy();
      return rows.map((r) => new Uint8Array(r.buffer, r.byteOffset, r.byteLength));
    };
    const same = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((x, j) => x === b[j]);
    const plain = await logits(undefined);
    const identity = await logits(parseWgslFuzz('identity:1'));
    expect(identity.length).toBe(plain.length);
    plain.forEach((p, i) => expect(same(identity[i], p), `logits ${i}`).toBe(true));
    // the model's pipelines are the fuzzer's: with rewrites, the same comparison sees other bytes
    const rewritten = await logits(parseWgslFuzz('all:1'));
    expect(rewritten.some((r, i) => !same(r, plain[i]))).toBe(true);
  });

  it("every entry point of every shader compiles under each mode (Tint's own validation)", async () => {
    const { readdirSync } = await import('node:fs');
    const shaders = readdirSync(new URL('../../shaders/', import.meta.url)).filter((f) => f.endsWith('.wgsl'));
    const failures: string[] = [];
    let checked = 0;
    for (const shader of shaders) {
      const text = shaderSource(shader);
      const entries = parseWgsl(text)
        .ast.filter((s): s is W.Function => s instanceof W.Function)
        .filter((f) => (f.attributes ?? []).some((a) => a.name === 'compute'))
        .map((f) => f.name);
      for (const entry of entries) {
        for (const spec of ['identity:1', 'contract:1', 'reassoc:1', 'all:2']) {
          await setWgslFuzz(parseWgslFuzz(spec));
          const code = fuzzedPipelineSource(shader, text, entry, {});
          const info = await ctx.device.createShaderModule({ code }).getCompilationInfo();
          for (const m of info.messages.filter((m) => m.type === 'error'))
            failures.push(`${shader}#${entry} ${spec}: ${m.message}`);
          checked++;
        }
      }
    }
    expect(failures).toEqual([]);
    expect(checked).toBeGreaterThan(100);
  }, 600_000);
});
