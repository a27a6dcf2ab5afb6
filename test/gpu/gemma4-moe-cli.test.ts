/**
 * `probe` on the MoE folder (gemma4-moe-tiny): the CLI uploads the experts, runs the MoE GPU target
 * (src/model/gemma4/moe/moe-target.ts) through the probe's arms, passes under `exact` past the window, and under
 * `moe-grouped` fails (exit 3) with the divergence localized to an experts stage, the MoE stages in the report.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { validateReport } from '../../src/parity/report.ts';
import { GEMMA4_MOE_TINY } from '../support/fixtures.ts';
import { cli, expectProbePassesExact, familyFolders } from './helpers/family-cli.ts';

const { target, assistant } = familyFolders(GEMMA4_MOE_TINY);

describe('npm run cli probe on gemma4-moe-tiny', () => {
  it('passes under exact (exit 0) past the window, with the assistant recorded', async () => {
    await expectProbePassesExact(target, assistant, 'ringside-moeprobe-', 6);
  });

  it('moe-grouped diverges (exit 3) and the localization names the experts stage', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-moeprobe-'));
    const file = path.join(dir, 'grouped.json');
    const bad = await cli(
      'probe',
      '--target',
      target,
      '--lengths',
      '8,48',
      '--block',
      '8',
      '--policy',
      'moe-grouped',
      '--report',
      file,
    ).catch((e) => e);
    expect(bad.code).toBe(3);
    expect(bad.stdout).toMatch(
      /first divergence: layer \d+ \((sliding|full)\) experts output \(weighted sum, before post_feedforward_layernorm_2\) at position \d+/,
    );
    expect(bad.stdout).toMatch(/MTP would be declined/);
    const r = JSON.parse(readFileSync(file, 'utf8'));
    expect(validateReport(r)).toEqual([]);
    expect(r.provenance.policy).toBe('moe-grouped');
    const d = r.draws.find((x: { verdict: string }) => x.verdict === 'diverges');
    expect(d.firstDivergence.stage).toBe('experts');
    const stagesOf = (layer: number) =>
      d.stages.filter((s: { layer: number }) => s.layer === layer).map((s: { stage: string }) => s.stage);
    expect(stagesOf(0)).toEqual(['q', 'k', 'v', 'attn', 'mlp', 'router', 'experts', 'layer']);
    expect(d.lens).toHaveLength(6);
  });
});
