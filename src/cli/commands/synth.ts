import path from 'node:path';
import {
  isQwenSynthPreset,
  QWEN_SYNTH_PRESETS,
  type QwenSynthGeometry,
  qwenSynthGeometry,
} from '../../format/qwen3_5/synthetic.ts';
import { SYNTH_PRESETS, synthGeometry, type SynthGeometry, type SynthPreset } from '../../format/synthetic.ts';
import type { AffineBits } from '../../format/quantization.ts';
import { tokenizerIds } from '../../format/synthetic-tokenizer.ts';
import { writeSynthetic } from '../../node/synthetic.ts';
import { intOption, parseInteger, positiveNumberOption } from '../args.ts';
import { MAX_LAYERS, MAX_SEED, MAX_VOCAB } from '../bounds.ts';
import { SUPPORTED_BITS } from '../../model/gpu-weights.ts';
import type { Command } from '../command.ts';

/**
 * The affine widths the GPU engine runs (SUPPORTED_BITS, src/model/gpu-weights.ts, its one source). MLX also writes
 * 3, 5 and 6 bits, and the format layer reads them, but synth writes checkpoints for the engine to load: one at a
 * width it cannot run (or at a width that is no width, 0 or 99) would be written in full and only refused by
 * whatever loads it next. test/unit/synth-bits.test.ts uploads every width listed here.
 */
export const ENGINE_BITS = [...SUPPORTED_BITS] as readonly AffineBits[];

export const synth: Command = {
  name: 'synth',
  summary:
    'Write a synthetic Gemma 4 target + assistant, or a Qwen3.5 target with its MTP head, of a real geometry, in the layout mlx-vlm publishes (seeded random weights; small vision/audio towers beside the text model; tokenizer.json, tokenizer_config.json, chat_template.jinja).',
  usage: `synth --preset ${[...Object.keys(SYNTH_PRESETS), ...Object.keys(QWEN_SYNTH_PRESETS)].join('|')} --out DIR [--seed N] [--layers N] [--vocab N] [--mlp-bits B] [--no-mtp] [--shard-gb G]`,
  options: {
    preset: {
      type: 'string',
      help: `geometry: ${Object.keys(SYNTH_PRESETS).join(', ')} (Gemma 4); ${Object.keys(QWEN_SYNTH_PRESETS).join(', ')} (Qwen3.5)`,
      default: 'tiny',
    },
    out: { type: 'string', help: 'output folder (gets target/ and assistant/)' },
    seed: { type: 'string', help: 'weight seed', default: '0' },
    layers: { type: 'string', help: 'target layers (five sliding, one full; last full)' },
    vocab: {
      type: 'string',
      help: `vocabulary size (below ${tokenizerIds('gemma4')} for Gemma 4, ${tokenizerIds('qwen3_5')} for Qwen3.5, the target gets no tokenizer files)`,
    },
    'mlp-bits': {
      type: 'string',
      help: `quantize MLP projections at this width (per-module overrides): ${ENGINE_BITS.join(', ')}`,
    },
    'shard-gb': { type: 'string', help: 'largest weight file in GB (10^9 bytes)', default: '5' },
    'no-assistant': { type: 'boolean', help: 'write the target only' },
    'no-mtp': { type: 'boolean', help: 'Qwen3.5: leave out the mtp.* head (as plain mlx_lm conversions do)' },
    force: { type: 'boolean', help: 'replace checkpoint files already in the output folders' },
  },
  async run({ values: v }, io) {
    if (typeof v.out !== 'string') throw new Error('--out DIR is required');
    const preset = String(v.preset);
    let g: SynthGeometry | QwenSynthGeometry;
    if (isQwenSynthPreset(preset)) {
      if (v['mlp-bits'] !== undefined || v['no-assistant'])
        throw new Error('--mlp-bits and --no-assistant are Gemma 4 options (a Qwen3.5 target carries its MTP head)');
      const over: Partial<QwenSynthGeometry> = {};
      if (v.layers !== undefined) over.layers = intOption(v, 'layers', 1, MAX_LAYERS);
      if (v.vocab !== undefined) over.vocab = intOption(v, 'vocab', 1, MAX_VOCAB);
      if (v['no-mtp']) over.mtp = false;
      g = qwenSynthGeometry(preset, over);
    } else {
      if (!Object.hasOwn(SYNTH_PRESETS, preset))
        throw new Error(
          `--preset must be one of ${[...Object.keys(SYNTH_PRESETS), ...Object.keys(QWEN_SYNTH_PRESETS)].join(', ')}`,
        );
      if (v['no-mtp']) throw new Error('--no-mtp is a Qwen3.5 option');
      const over: Partial<SynthGeometry> = {};
      if (v.layers !== undefined) over.layers = intOption(v, 'layers', 1, MAX_LAYERS);
      if (v.vocab !== undefined) over.vocab = intOption(v, 'vocab', 1, MAX_VOCAB);
      if (v['mlp-bits'] !== undefined) over.mlpBits = engineBits('mlp-bits', v['mlp-bits']);
      if (v['no-assistant']) over.assistant = null;
      g = synthGeometry(preset as SynthPreset, over);
    }
    // a shard larger than the checkpoint is one file; 1000 GB is past every published checkpoint
    const shardGb = positiveNumberOption(v, 'shard-gb', 1000)!;
    const seed = intOption(v, 'seed', 0, MAX_SEED)!;
    const t0 = performance.now();
    let last = 0;
    const files = await writeSynthetic(path.resolve(v.out), g, {
      seed,
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

function engineBits(name: string, s: string | boolean | undefined): AffineBits {
  const n = parseInteger(s);
  if (!ENGINE_BITS.includes(n as AffineBits))
    throw new Error(
      `--${name} must be one of ${ENGINE_BITS.join(', ')} (the affine widths the GPU engine runs), found ${JSON.stringify(s)}`,
    );
  return n as AffineBits;
}
