/**
 * The cuts the bench's end-to-end model takes of each family's preset (src/bench/e2e-model.ts): E-series presets
 * in whole sliding + full periods with owning and KV-shared layers of both types (eSeriesTruncated), Qwen3.5 in
 * whole linear : full groups (qwenTruncated), and the default layer count per preset. Geometry only, no GPU.
 */
import { describe, expect, it } from 'vitest';
import { checkE2ELayers, defaultE2ELayers, E2E_PRESETS, isE2EPreset } from '../../src/bench/e2e-model.ts';
import { qwenLayerTypes, qwenTruncated } from '../../src/format/qwen3_5/synthetic.ts';
import { openCheckpoint } from '../../src/format/checkpoint.ts';
import type { TargetDescription } from '../../src/format/model-description.ts';
import {
  E_SYNTH_PRESETS,
  eSeriesTruncated,
  type ESynthPreset,
} from '../../src/format/synthetic-gemma4-family-presets.ts';
import { checkESeriesGeometry, eSeriesLayerTypes } from '../../src/format/synthetic-gemma4-family.ts';
import { syntheticCheckpoint } from '../../src/format/synthetic.ts';

describe('eSeriesTruncated', () => {
  it.each([
    ['e2b', 10, 5],
    ['e2b', 20, 10],
    ['e2b', 35, 20],
    ['e4b', 12, 6],
    ['e4b', 24, 12],
    ['e4b', 42, 18],
    ['e2b-tiny', 10, 4],
  ] as [ESynthPreset, number, number][])('%s at %i layers shares the last %i', (preset, layers, sharedCount) => {
    const g = eSeriesTruncated(preset, layers);
    expect(g.layers).toBe(layers);
    expect(g.eSeries.kvSharedLayers).toBe(sharedCount);
    // every other field is the preset's: the real widths stay
    const { layers: _l, eSeries, ...rest } = g;
    const { layers: _l2, eSeries: e0, ...rest0 } = E_SYNTH_PRESETS[preset];
    expect(rest).toEqual(rest0);
    expect({ ...eSeries, kvSharedLayers: 0 }).toEqual({ ...e0, kvSharedLayers: 0 });
    // a loadable E-series geometry, ending on a full layer, with a shared sliding and a shared full layer
    expect(() => checkESeriesGeometry({ ...g, assistant: null })).not.toThrow();
    const types = eSeriesLayerTypes(layers, g.eSeries.slidingPerFull);
    expect(types[layers - 1]).toBe('full_attention');
    const shared = types.slice(layers - g.eSeries.kvSharedLayers);
    expect(new Set(shared)).toEqual(new Set(['sliding_attention', 'full_attention']));
  });

  it('refuses cuts that break the period structure, naming the valid counts', () => {
    expect(() => eSeriesTruncated('e4b', 13)).toThrow(
      /e4b: 13 layers .* whole periods of 6 layers .* 12, 18, \.\.\. or 42/,
    );
    expect(() => eSeriesTruncated('e4b', 6)).toThrow(/at least one owning and one KV-shared period/);
    expect(() => eSeriesTruncated('e2b', 4)).toThrow(/whole periods of 5 layers/);
    expect(() => eSeriesTruncated('e4b', 48)).toThrow(/48 layers exceed the preset's 42/);
  });

  it('the smallest E4B cut opens from its headers with 6 cache owners and 6 KV-shared layers', async () => {
    const g = { ...eSeriesTruncated('e4b', 12), assistant: null };
    const ck = await openCheckpoint(syntheticCheckpoint(g).target, 'e4b x12');
    const d = ck.description as TargetDescription;
    expect(d.layers.length).toBe(12);
    expect(d.hidden).toBe(2560);
    expect(d.vocab).toBe(262144);
    expect(d.config.kvSharedLayers).toBe(6);
    expect(d.perLayer?.width).toBe(256);
  });
});

describe('qwenTruncated', () => {
  it('keeps the 3 linear : 1 full pattern at real widths', () => {
    const g = qwenTruncated('qwen36-27b', 4);
    expect(qwenLayerTypes(g)).toEqual(['linear_attention', 'linear_attention', 'linear_attention', 'full_attention']);
    expect([g.hidden, g.intermediate, g.vocab, g.linearValueHeads]).toEqual([5120, 17408, 248320, 48]);
    expect(qwenLayerTypes(qwenTruncated('qwen35-9b', 8)).filter((t) => t === 'full_attention').length).toBe(2);
    expect(qwenTruncated('qwen-tiny', 3, { mtp: false }).mtp).toBe(false);
  });

  it('refuses counts that are not whole groups', () => {
    expect(() => qwenTruncated('qwen36-27b', 5)).toThrow(/qwen36-27b: 5 layers .* multiple of 4 up to 64/);
    expect(() => qwenTruncated('qwen36-27b', 2)).toThrow(/multiple of 4/);
    expect(() => qwenTruncated('qwen35-9b', 36)).toThrow(/up to 32/);
  });
});

describe('bench end-to-end presets', () => {
  it('checks a cut before anything is generated: every default passes, broken cuts name the family rule', () => {
    for (const p of E2E_PRESETS) expect(() => checkE2ELayers(p, defaultE2ELayers(p))).not.toThrow();
    expect(() => checkE2ELayers('e4b', 13)).toThrow(/whole periods of 6 layers/);
    expect(() => checkE2ELayers('qwen36-27b', 3)).toThrow(/multiple of 4/);
    expect(() => checkE2ELayers('26b-a4b', 3)).not.toThrow();
    expect(() => checkE2ELayers('12b', 0)).toThrow(/positive integer/);
  });

  it('lists every family and picks the smallest structural cut by default', () => {
    for (const p of ['12b', 'e2b', 'e4b', '26b-a4b', 'qwen36-27b', 'qwen35-9b', 'qwen-tiny'])
      expect(isE2EPreset(p)).toBe(true);
    expect(isE2EPreset('gpt2')).toBe(false);
    expect(E2E_PRESETS.map((p) => [p, defaultE2ELayers(p)])).toEqual(
      expect.arrayContaining([
        ['12b', 2],
        ['e2b', 10],
        ['e4b', 12],
        ['e2b-tiny', 10],
        ['26b-a4b', 2],
        ['qwen36-27b', 4],
        ['qwen35-9b', 4],
        ['qwen-tiny', 3],
      ]),
    );
  });
});
