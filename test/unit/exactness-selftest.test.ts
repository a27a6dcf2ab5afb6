/**
 * The exactness self-test's pieces that need no GPU: the kernel faults' WGSL rewrites, the kernel attribution, the
 * summary a report records and its validation, the cache key, and the page's line in words. The test itself runs
 * in test/gpu/exactness-selftest.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { faultedSource, faultShaders, KERNEL_FAULTS, parseKernelFault } from '../../src/gpu/kernel-fault.ts';
import { shaderFiles, shaderSource } from '../../src/gpu/shaders.ts';
import { blameCaptures, blameKernel } from '../../src/parity/exactness-blame.ts';
import { exactnessWarning, shaderBuildHash, summarize } from '../../src/parity/exactness-gate.ts';
import type { ExactnessSelfTestResult } from '../../src/parity/exactness-selftest.ts';
import { exactnessSelfTestProblems, validateReport } from '../../src/parity/report.ts';
import { exactnessText } from '../../src/ui/common/exactness-view.ts';
import { readReport } from '../../src/ui/report/report-model.ts';
import { equalReport } from '../e2e/sample-report.ts';

describe('kernel faults', () => {
  it('rewrite every kernel they name (one row of a block on another path) and no other shader', () => {
    for (const fault of KERNEL_FAULTS) {
      for (const shader of faultShaders(fault)) {
        const source = shaderSource(shader);
        const faulted = faultedSource(fault, shader, source);
        expect(faulted, `${fault} in ${shader}`).not.toBe(source);
        // the alternate path is taken for one row of a block only, in the block path the chain never runs
        expect(faulted).toMatch(/P\.M > 1u && [^)]+ == FAULT_ROW|r0 == 0u/);
        expect(faulted).toContain(`// injected fault "${fault}"`);
      }
      for (const shader of Object.keys(shaderFiles()).filter((s) => !faultShaders(fault).includes(s)))
        expect(faultedSource(fault, shader, shaderSource(shader))).toBe(shaderSource(shader));
    }
    expect(faultShaders('matmul')).toEqual([
      'matmul_lanes_subgroupx.wgsl',
      'matmul_lanes_loadx.wgsl',
      'matmul_coop.wgsl',
    ]);
    expect(faultShaders('attention')).toEqual(['attention.wgsl']);
  });

  it('refuse a kernel whose text no longer holds the anchor, and an unknown fault name', () => {
    expect(() => faultedSource('matmul', 'matmul_coop.wgsl', 'fn main() {}')).toThrow(
      /kernel fault "matmul": matmul_coop.wgsl no longer contains the text it rewrites/,
    );
    expect(() => parseKernelFault('rmsnorm', '--inject-fault')).toThrow(
      '--inject-fault: unknown kernel fault "rmsnorm" (expected matmul or attention)',
    );
    expect(parseKernelFault('attention', 'x')).toBe('attention');
  });
});

describe('kernel attribution', () => {
  const desc = { layers: [{ type: 'sliding' }, { type: 'full' }] } as never;
  /** Chain and block captures of K rows, equal everywhere. */
  function captures(K: number) {
    const chain = new Map<string, Float32Array>();
    for (const name of blameCaptures(2))
      chain.set(
        name,
        Float32Array.from({ length: 3 * K }, (_, i) => i + 0.5),
      );
    const block = new Map([...chain].map(([k, v]) => [k, v.slice()]));
    return { chain, block };
  }

  it('names the first kernel in execution order whose block rows differ, and the row', () => {
    const K = 4;
    const { chain, block } = captures(K);
    expect(blameKernel(desc, chain, block, K, 'f32', 'software')).toBeUndefined();
    // attention of layer 1 and everything after it differ; so does layer 1's o projection
    for (const name of ['op:attention.1', 'attn.1', 'mlp.1', 'layer.1', 'logits']) block.get(name)![2 * 3 + 1] += 1;
    const b = blameKernel(desc, chain, block, K, 'f32', 'gpu');
    expect(b?.kernel).toBe('attention');
    expect(b?.text).toBe('attention (attention.wgsl seg_fused + combine_fused): layer 1 (full) attention, block row 2');
    // an earlier kernel's difference comes first: layer 0's q projection, row 1
    block.get('op:qproj.0')![3] = -1;
    expect(blameKernel(desc, chain, block, K, 'f32', 'software')?.text).toBe(
      'matmul (matmul_lanes_*.wgsl): layer 0 (sliding) q projection, block row 1',
    );
  });

  it('compares in the storage bytes: a difference bf16 does not store is no difference', () => {
    const K = 2;
    const { chain, block } = captures(K);
    new Uint32Array(block.get('op:xn.0')!.buffer)[0] += 1; // the lowest f32 bit
    expect(blameKernel(desc, chain, block, K, 'bf16', 'software')).toBeUndefined();
    expect(blameKernel(desc, chain, block, K, 'f32', 'software')?.kernel).toBe('rmsnorm');
  });
});

describe('what a report records', () => {
  const result = (ok: boolean): ExactnessSelfTestResult => ({
    ok,
    checks: [8, 4, 2].map((block) => ({
      kernelClass: 'software',
      precision: 'f32',
      block,
      blockStart: 84,
      slots: [],
      ok: ok || block !== 4,
      rowsDiffering: ok || block !== 4 ? 0 : 3,
      position: ok || block !== 4 ? null : 1,
      bytesDiffering: 0,
      bytesTotal: 4096,
      ms: 10,
    })),
    ms: 1234.5,
    kernelClasses: ['software'],
    model: 'm',
    ...(ok
      ? {}
      : { kernel: 'matmul', failure: 'matmul (matmul_lanes_*.wgsl): layer 0 (sliding) q projection, block row 1' }),
  });

  it('a passed test: ok, its checks, no warning; a failed one: the count, the kernel and the warning', () => {
    expect(summarize(result(true), 'abcd', "this browser's shader compiler")).toEqual({
      ok: true,
      checks: 3,
      failed: 0,
      cached: false,
      ms: 1235,
      kernelClasses: ['software'],
      shaderBuild: 'abcd',
    });
    const failed = summarize(result(false), 'abcd', "this browser's shader compiler");
    expect(failed).toMatchObject({ ok: false, checks: 3, failed: 1, kernel: 'matmul' });
    expect(failed.warning).toBe(
      `This browser's shader compiler does not keep verify rows exact on this machine, so "exact" verdicts here are not a reference (the exactness self-test failed: matmul (matmul_lanes_*.wgsl): layer 0 (sliding) q projection, block row 1).`,
    );
    expect(exactnessWarning('x', 'y')).toMatch(/^X does not keep verify rows exact/);
    expect(exactnessText(failed)).toMatch(/^Exactness self-test FAILED on this adapter: 1 of 3 verify blocks differ/);
    expect(exactnessText({ ...summarize(result(true), 'abcd', 'c'), cached: true })).toMatch(
      /^Exactness self-test passed on this adapter: 3 verify blocks .* result kept from an earlier run/,
    );
  });

  it('validation accepts a report with the self-test and one from before it, and refuses a malformed one by field', () => {
    const old = equalReport();
    expect(validateReport(old)).toEqual([]);
    const withTest = equalReport();
    withTest.provenance.exactnessSelfTest = summarize(result(false), 'abcd', 'c');
    expect(validateReport(withTest)).toEqual([]);
    const { warning: _, ...silent } = summarize(result(false), 'abcd', 'c');
    expect(exactnessSelfTestProblems(silent)).toEqual([
      'provenance.exactnessSelfTest.warning missing: a failed self-test carries it',
    ]);
    expect(exactnessSelfTestProblems({ ...summarize(result(true), 'abcd', 'c'), failed: 2 })).toEqual([
      'provenance.exactnessSelfTest.ok (true) contradicts its 2 failed checks',
    ]);
    expect(exactnessSelfTestProblems({ ...summarize(result(true), 'abcd', 'c'), checks: '6', cached: 'no' })).toEqual([
      'provenance.exactnessSelfTest.cached must be true or false',
      'provenance.exactnessSelfTest.checks must be a number of at least 0',
    ]);
    // the page's typed copy keeps it (and an old report still has none)
    const read = readReport(withTest);
    expect(read.ok && read.report.provenance.exactnessSelfTest).toEqual(withTest.provenance.exactnessSelfTest);
    const readOld = readReport(old);
    expect(readOld.ok && 'exactnessSelfTest' in readOld.report.provenance).toBe(false);
    const bad = equalReport() as unknown as { provenance: Record<string, unknown> };
    bad.provenance.exactnessSelfTest = 'passed';
    expect(validateReport(bad)).toEqual(['provenance.exactnessSelfTest must be an object']);
  });

  it('the shader build is a hash of every WGSL source: 16 hex digits, the same on every call', async () => {
    const h = await shaderBuildHash();
    expect(h).toMatch(/^[0-9a-f]{16}$/);
    expect(await shaderBuildHash()).toBe(h);
  });
});
