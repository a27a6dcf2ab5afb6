/**
 * `synth` writes the layout mlx-vlm publishes, for every preset: config.json with text_config, vision_config and
 * audio_config (null where the real model has no audio), quantization with its quantization_config copy and
 * per-module entries (the 12B's 8-bit MLP projections, the 26B's 8-bit routers), tower tensors beside
 * language_model.model.* (ignored on load), and tokenizer.json, tokenizer_config.json and chat_template.jinja, whose
 * chat prompts equal transformers' apply_chat_template (test/fixtures/chat-template/synth-*-golden.json, made by
 * tools/make_chat_golden.py on `synth --preset tiny` and `--preset qwen-tiny`).
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { bytesSource, type ByteSource } from '../../src/format/bytesource.ts';
import { openFamilyCheckpoint } from '../../src/format/open-target.ts';
import { QWEN_SYNTH_PRESETS, qwenSynthGeometry, syntheticQwen } from '../../src/format/qwen3_5/synthetic.ts';
import { readSafetensorsHeader } from '../../src/format/safetensors.ts';
import { SYNTH_PRESETS, type SynthPreset, synthGeometry, syntheticCheckpoint } from '../../src/format/synthetic.ts';
import { syntheticTokenizerFiles, type TokenizerFamily } from '../../src/format/synthetic-tokenizer.ts';
import { isIgnoredTensor } from '../../src/format/tensor-names.ts';
import { checkpointTokenizer, loadTokenizer } from '../../src/format/tokenizer.ts';

const jsonOf = async (f: ByteSource) => JSON.parse(new TextDecoder().decode(await f.read(0, f.size)));
const byName = (files: ByteSource[], name: string) => files.find((f) => f.name === name);

/** The tensor names of the weight files that the loader skips (towers and their embedders). */
async function towerTensors(files: ByteSource[]): Promise<string[]> {
  const names: string[] = [];
  for (const f of files.filter((x) => x.name.endsWith('.safetensors')))
    for (const t of (await readSafetensorsHeader(f)).tensors) if (isIgnoredTensor(t.name)) names.push(t.name);
  return names;
}

/** What each Gemma preset's real model has beside its text model (synthetic-towers.ts says where this is from). */
function expectedTowers(preset: SynthPreset): { roots: string[]; audio: boolean } {
  const g = synthGeometry(preset);
  if (g.modelType === 'gemma4_unified')
    return { roots: ['embed_audio', 'embed_vision', 'vision_embedder'], audio: true };
  if (g.eSeries) return { roots: ['audio_tower', 'embed_audio', 'embed_vision', 'vision_tower'], audio: true };
  return { roots: ['embed_vision', 'vision_tower'], audio: false };
}

describe('synth writes the published layout', () => {
  for (const preset of Object.keys(SYNTH_PRESETS) as SynthPreset[]) {
    it(`${preset}: config blocks, quantization copy, tower tensors ignored on load, tokenizer files`, async () => {
      const g = synthGeometry(preset);
      const files = syntheticCheckpoint(g).target;
      const config = await jsonOf(byName(files, 'config.json')!);
      const want = expectedTowers(preset);
      expect(typeof config.text_config).toBe('object');
      expect(typeof config.vision_config).toBe('object');
      expect(config.vision_config).not.toBeNull();
      if (want.audio) expect(typeof config.audio_config).toBe('object');
      expect(config.audio_config === null).toBe(!want.audio);
      if (g.bits === null) expect([config.quantization, config.quantization_config]).toEqual([undefined, undefined]);
      else expect(config.quantization_config).toEqual(config.quantization);
      const towers = await towerTensors(files);
      expect([...new Set(towers.map((n) => n.split('.')[0]))].sort()).toEqual(want.roots);
      const opened = await openFamilyCheckpoint(files, preset);
      expect(opened.family).toBe('gemma4');
      expect(opened.checkpoint.ignoredTensors).toBe(towers.length);
      for (const n of ['tokenizer.json', 'tokenizer_config.json', 'chat_template.jinja'])
        expect(byName(files, n), n).toBeDefined();
      const tok = await checkpointTokenizer(opened.checkpoint);
      expect(tok?.chatTemplate).toBe('chat_template.jinja');
      const ids = tok!.encode('A prompt, in a chat.', true);
      expect(ids.slice(0, 2)).toEqual([2, 105]); // <bos><|turn>
      expect(Math.max(...ids)).toBeLessThan(g.vocab);
    });
  }

  it("12b: the published 12B's per-module entries, every MLP projection at 8 bits", async () => {
    const files = syntheticCheckpoint(synthGeometry('12b')).target;
    const q = (await jsonOf(byName(files, 'config.json')!)).quantization;
    expect([q.bits, q.group_size, q.mode]).toEqual([4, 64, 'affine']);
    const entries = Object.keys(q).filter((k) => typeof q[k] === 'object');
    expect(entries).toHaveLength(48 * 3);
    for (let i = 0; i < 48; i++)
      for (const p of ['gate_proj', 'up_proj', 'down_proj'])
        expect(q[`language_model.model.layers.${i}.mlp.${p}`]).toEqual({ group_size: 64, bits: 8 });
    const d = (await openFamilyCheckpoint(files, '12b')).checkpoint.description as {
      layers: { gate: { bits: number }; qProj: { bits: number } }[];
    };
    expect(d.layers.map((l) => [l.qProj.bits, l.gate.bits])).toEqual(Array(48).fill([4, 8]));
  });

  for (const preset of Object.keys(QWEN_SYNTH_PRESETS) as (keyof typeof QWEN_SYNTH_PRESETS)[]) {
    it(`${preset}: vision_config and tower, quantization copy, tokenizer files with a ChatML template`, async () => {
      const g = qwenSynthGeometry(preset);
      const files = syntheticQwen(g).target;
      const config = await jsonOf(byName(files, 'config.json')!);
      expect(typeof config.text_config).toBe('object');
      expect(config.vision_config.out_hidden_size).toBe(g.hidden);
      expect(config.quantization_config).toEqual(config.quantization);
      const towers = await towerTensors(files);
      expect(new Set(towers.map((n) => n.split('.')[0]))).toEqual(new Set(['vision_tower']));
      const opened = await openFamilyCheckpoint(files, preset);
      expect(opened.family).toBe('qwen3_5');
      expect(opened.checkpoint.ignoredTensors).toBe(towers.length);
      const tok = await checkpointTokenizer(opened.checkpoint);
      expect(tok?.chatTemplate).toBe('chat_template.jinja');
      expect(tok!.decode(tok!.encode('hi', true))).toBe('<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n');
    });
  }
});

interface Golden {
  folder_files_sha256: Record<string, string>;
  templates: { 'turns-thinking': string };
  cases: { prompt: string; folder: { ids: number[] }; 'turns-thinking': { ids: number[] } }[];
}

describe("synth's tokenizer files against transformers", () => {
  for (const [family, vocab] of [
    ['gemma4', SYNTH_PRESETS.tiny.vocab],
    ['qwen3_5', QWEN_SYNTH_PRESETS['qwen-tiny'].vocab],
  ] as [TokenizerFamily, number][]) {
    it(`${family}: the files the golden was made from, and transformers' apply_chat_template ids`, async () => {
      const golden: Golden = JSON.parse(
        await readFile(path.resolve(`test/fixtures/chat-template/synth-${family}-golden.json`), 'utf8'),
      );
      const [tokenizer, config, template] = syntheticTokenizerFiles(family, vocab);
      for (const f of [tokenizer, config, template])
        expect(
          createHash('sha256')
            .update(await f.read(0, f.size))
            .digest('hex'),
          f.name,
        ).toBe(golden.folder_files_sha256[f.name]);
      const tok = await loadTokenizer(tokenizer, config, template);
      const jinja = new TextEncoder().encode(golden.templates['turns-thinking']);
      const other = await loadTokenizer(tokenizer, config, bytesSource('chat_template.jinja', jinja));
      for (const c of golden.cases) {
        expect(tok.encode(c.prompt, true), JSON.stringify(c.prompt)).toEqual(c.folder.ids);
        expect(other.encode(c.prompt, true), JSON.stringify(c.prompt)).toEqual(c['turns-thinking'].ids);
        expect(tok.decode(tok.encode(c.prompt, false))).toBe(c.prompt); // every text encodes exactly
      }
    });
  }

  it('a vocabulary too small for the tokenizer gets no tokenizer files', () => {
    expect(syntheticTokenizerFiles('gemma4', 458)).toEqual([]);
    expect(syntheticTokenizerFiles('gemma4', 459)).toHaveLength(3);
    expect(syntheticTokenizerFiles('qwen3_5', 258)).toEqual([]);
  });
});
