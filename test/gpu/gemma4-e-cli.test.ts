/**
 * `probe` on an E-series folder (gemma4-e-tiny): the CLI runs the E-series GPU target (src/model/gemma4/e-series/e-target.ts)
 * through the probe's arms and localizes a divergence in its own stage order (no k / v stages on the KV-shared layers).
 * (MoE folders run in the MoE target: test/gpu/gemma4-moe-cli.test.ts.)
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { validateReport } from '../../src/parity/report.ts';
import { GEMMA4_E_TINY } from '../support/fixtures.ts';
import { cli, expectProbePassesExact, familyFolders } from './helpers/family-cli.ts';

const { target, assistant } = familyFolders(GEMMA4_E_TINY);

describe('npm run cli probe on gemma4-e-tiny', () => {
  it('passes under exact (exit 0) past the window, with the assistant recorded', async () => {
    await expectProbePassesExact(target, assistant, 'ringside-eprobe-', 10);
  });

  it('ring-chronological diverges (exit 3) and is localized to layer 0 attention; shared layers have no k / v stage', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-eprobe-'));
    const file = path.join(dir, 'ring.json');
    const bad = await cli(
      'probe',
      '--target',
      target,
      '--lengths',
      '48',
      '--policy',
      'ring-chronological',
      '--report',
      file,
    ).catch((e) => e);
    expect(bad.code).toBe(3);
    expect(bad.stdout).toMatch(/first divergence: layer 0 \(sliding\) attention output at position 0/);
    const r = JSON.parse(readFileSync(file, 'utf8'));
    expect(validateReport(r)).toEqual([]);
    const stagesOf = (layer: number) =>
      r.draws[0].stages.filter((s: { layer: number }) => s.layer === layer).map((s: { stage: string }) => s.stage);
    expect(stagesOf(5)).toEqual(['q', 'k', 'v', 'attn', 'mlp', 'ple', 'layer']);
    expect(stagesOf(6)).toEqual(['q', 'attn', 'mlp', 'ple', 'layer']);
    expect(stagesOf(9)).toEqual(['q', 'attn', 'mlp', 'ple', 'layer']);
    expect(r.draws[0].lens).toHaveLength(10);
    expect(r.draws[0].ring.window).toBe(16);
  });
});
