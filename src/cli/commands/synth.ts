import path from 'node:path';
import { SYNTH_PRESETS, synthGeometry, type SynthGeometry, type SynthPreset } from '../../format/synthetic.ts';
import type { AffineBits } from '../../format/quantization.ts';
import { writeSynthetic } from '../../node/synthetic.ts';
import type { Command } from '../command.ts';

export const synth: Command = {
  name: 'synth',
  summary: 'Write a synthetic Gemma 4 target + assistant (MLX layout, seeded random weights) of a real geometry.',
  usage: 'synth --preset tiny|12b|31b --out DIR [--seed N] [--layers N] [--vocab N] [--mlp-bits B] [--shard-gb G]',
  options: {
    preset: { type: 'string', help: `geometry: ${Object.keys(SYNTH_PRESETS).join(', ')}`, default: 'tiny' },
    out: { type: 'string', help: 'output folder (gets target/ and assistant/)' },
    seed: { type: 'string', help: 'weight seed', default: '0' },
    layers: { type: 'string', help: 'target layers (five sliding, one full; last full)' },
    vocab: { type: 'string', help: 'vocabulary size' },
    'mlp-bits': { type: 'string', help: 'quantize MLP projections at this width (per-module overrides)' },
    'shard-gb': { type: 'string', help: 'largest weight file in GB (10^9 bytes)', default: '5' },
    'no-assistant': { type: 'boolean', help: 'write the target only' },
    force: { type: 'boolean', help: 'replace checkpoint files already in the output folders' },
  },
  async run({ values: v }, io) {
    if (typeof v.out !== 'string') throw new Error('--out DIR is required');
    const preset = v.preset as SynthPreset;
    if (!Object.hasOwn(SYNTH_PRESETS, preset))
      throw new Error(`--preset must be one of ${Object.keys(SYNTH_PRESETS).join(', ')}`);
    const over: Partial<SynthGeometry> = {};
    if (v.layers !== undefined) over.layers = int('layers', v.layers, 1);
    if (v.vocab !== undefined) over.vocab = int('vocab', v.vocab, 1);
    if (v['mlp-bits'] !== undefined) over.mlpBits = int('mlp-bits', v['mlp-bits']) as AffineBits;
    if (v['no-assistant']) over.assistant = null;
    const g = synthGeometry(preset, over);
    const shardGb = Number(v['shard-gb']);
    if (!(shardGb > 0)) throw new Error('--shard-gb must be a positive number');
    const t0 = performance.now();
    let last = 0;
    const files = await writeSynthetic(path.resolve(v.out), g, {
      seed: int('seed', v.seed),
      shardBytes: shardGb * 1e9,
      force: v.force === true,
      onProgress: (p) => {
        const now = performance.now();
        if (now - last < 2000 && p.done < p.total) return;
        last = now;
        io.err(`synth: ${(p.done / 1e9).toFixed(2)} of ${(p.total / 1e9).toFixed(2)} GB (${p.detail})`);
      },
    });
    const seconds = (performance.now() - t0) / 1000;
    const bytes = files.reduce((a, f) => a + f.bytes, 0);
    io.out(
      JSON.stringify(
        { preset, geometry: g, files, bytes, seconds: +seconds.toFixed(2), MBps: Math.round(bytes / 1e6 / seconds) },
        null,
        2,
      ),
    );
    return 0;
  },
};

function int(name: string, s: string | boolean | undefined, min = 0): number {
  const n = Number(s);
  if (!Number.isSafeInteger(n) || n < min)
    throw new Error(`--${name} must be an integer >= ${min}, found ${JSON.stringify(s)}`);
  return n;
}
