/**
 * `routers` on gemma4-moe-tiny (the two router conventions must differ where the report says they do, and agree on
 * the chosen experts): the CLI's report (src/parity/router-compare.ts, GPU f32) against the float64 CPU
 * twin (src/reference/gemma4/moe/router-compare.ts) run on the same prompt with the same base convention.
 * - softmax order (MLX's vs transformers'): the same experts on every row of every layer, as in float64; the f32
 *   weights differ in the bytes of some slots (the listed ones really differ), by no more than f32 rounding, while the
 *   float64 weights agree to 1e-15; every listed weight is within the scores' tolerance of float64.
 * - router scalar (bf16(scale x root) vs (norm x scale) x root): the scores move as far as in float64, and the rows
 *   whose experts flip are float64's, with the same sets and top-k gaps. Under transformers' scalar as the base (the
 *   goldens' trajectory), layer 5 row 16 flips (docs/GEMMA4-FAMILY.md section 10's finding).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import type { TargetDescription } from '../../src/format/model-description.ts';
import { openCheckpointDir } from '../../src/node/file-source.ts';
import type { RouterReport } from '../../src/parity/router-compare.ts';
import { referenceRouterComparison, type RouterScale } from '../../src/reference/gemma4/moe/router-compare.ts';
import { loadReferenceWeights, type TargetWeights } from '../../src/reference/index.ts';
import { GEMMA4_E_TINY, GEMMA4_MOE_TINY, loadGolden } from '../support/fixtures.ts';

const run = promisify(execFile);
const cli = (...args: string[]) => run('npm', ['run', '-s', 'cli', '--', ...args], { timeout: 240_000 });
const target = path.join(GEMMA4_MOE_TINY, 'target');
/** GPU f32 scores against float64: the router.proj outputs of gemma4-moe-tiny are within 1e-4 (golden test). */
const SCORE_TOL = 2e-4;

describe('npm run cli routers on gemma4-moe-tiny vs the float64 CPU twin', () => {
  let prompt: number[];
  let tw: TargetWeights;
  beforeAll(async () => {
    prompt = (await loadGolden(GEMMA4_MOE_TINY)).json.prompt;
    const ck = await openCheckpointDir(target);
    tw = await loadReferenceWeights(ck.description as TargetDescription);
  });

  for (const scale of ['mlx-bf16', 'transformers'] as RouterScale[]) {
    it(`base convention order mlx, scale ${scale}`, async () => {
      const file = path.join(mkdtempSync(path.join(tmpdir(), 'ringside-routers-')), 'routers.json');
      const out = await cli(
        'routers',
        '--target',
        target,
        '--tokens',
        prompt.join(','),
        '--scale',
        scale,
        '--report',
        file,
      );
      expect(out.stdout).toMatch(
        /softmax order \(mlx vs transformers, scale [a-z0-9-]+\): the chosen experts agree on every row/,
      );
      const r = JSON.parse(readFileSync(file, 'utf8')) as RouterReport;
      const cpu = referenceRouterComparison(tw, prompt, { order: 'mlx', scale });
      const T = prompt.length;
      const k = r.topK;
      expect(r.prompt).toEqual(prompt);
      expect(r.base).toEqual({ order: 'mlx', scale });
      expect(r.order.scoresIdentical, 'the order runs saw the same router inputs').toBe(true);
      expect(r.order.layers.length).toBe(cpu.length);
      let listed = 0;
      for (const [i, l] of r.order.layers.entries()) {
        const c = cpu[i];
        // the chosen experts agree under both softmax orders, on the GPU as in float64
        expect(l.setsAgree, `layer ${i} GPU`).toBe(T);
        expect(c.order.setsAgree, `layer ${i} CPU`).toBe(T);
        expect(l.setDifferences).toEqual([]);
        // float64: the two orders give the same weights (exact arithmetic says equal)
        expect(c.order.maxWeightDiff, `layer ${i} CPU weight difference`).toBeLessThan(1e-15);
        // f32: the bytes differ where listed, by f32 rounding only
        expect(l.rowsDiffer).toBeLessThanOrEqual(l.slotsDiffer);
        expect(l.slotsDiffer).toBeLessThanOrEqual(k * l.rowsDiffer);
        expect(l.maxWeightDiff).toBeLessThanOrEqual(8 * 2 ** -24);
        for (const d of l.differences) {
          expect(d.mlx, `layer ${i} row ${d.row} expert ${d.expert}`).not.toBe(d.transformers);
          expect(Math.abs(d.mlx - d.transformers)).toBeLessThanOrEqual(l.maxWeightDiff);
          const ref = c.routes[d.row];
          const j = ref.experts.indexOf(d.expert);
          expect(j, `layer ${i} row ${d.row}: expert ${d.expert} chosen in float64`).toBeGreaterThanOrEqual(0);
          // a softmax moves by at most half its inputs' largest change (the scores: SCORE_TOL), the per-expert scales here ~1
          expect(Math.abs(d.mlx - ref.mlx[j])).toBeLessThan(SCORE_TOL);
          expect(Math.abs(d.transformers - ref.transformers[j])).toBeLessThan(SCORE_TOL);
          listed++;
        }
      }
      expect(r.order.totals.slotsDiffer, 'the two orders differ in some weight bytes').toBeGreaterThan(0);
      expect(listed).toBeGreaterThan(0);
      // the scalar comparison: the scores move as in float64, the same rows flip with the same gaps
      const flips: string[] = [];
      for (const [i, l] of r.scale.layers.entries()) {
        const c = cpu[i].scale;
        expect(Math.abs(l.maxScoreDiff - c.maxScoreDiff), `layer ${i} score movement`).toBeLessThan(SCORE_TOL);
        expect(l.setsAgree).toBe(c.setsAgree);
        expect(l.flips.map((f) => f.row)).toEqual(c.flips.map((f) => f.row));
        l.flips.forEach((f, j) => {
          expect([f.base, f.other]).toEqual([c.flips[j].base, c.flips[j].other]);
          expect(Math.abs(f.gapBase - c.flips[j].gapBase)).toBeLessThan(SCORE_TOL);
          expect(Math.abs(f.gapOther - c.flips[j].gapOther)).toBeLessThan(SCORE_TOL);
          flips.push(
            `layer ${i} row ${f.row} (gap ${f.gapBase.toExponential(2)}, float64 ${c.flips[j].gapBase.toExponential(2)})`,
          );
        });
        expect(l.maxScoreDiff, `layer ${i}: bf16(scale x root) moves the scores`).toBeGreaterThan(1e-3);
      }
      if (scale === 'transformers') expect(flips[0]).toMatch(/^layer 5 row 16 /);
      console.log(
        `routers (scale ${scale}): weights differ in ${r.order.totals.slotsDiffer} of ${r.order.totals.rows * k} slots, max ${r.order.totals.maxWeightDiff.toExponential(2)}; scores move by ${r.scale.totals.maxScoreDiff.toExponential(2)}; flips: ${flips.join(', ') || 'none'}`,
      );
    });
  }

  it('refuses a dense target with a message that names the folder', async () => {
    const dense = path.join(GEMMA4_E_TINY, 'target');
    const e = await cli('routers', '--target', dense).catch((x) => x);
    expect(e.code).toBe(1);
    expect(e.stderr).toMatch(/target: not a mixture-of-experts target \(enable_moe_block is not set\)/);
  });
});
