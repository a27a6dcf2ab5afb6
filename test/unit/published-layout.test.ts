/**
 * Folders as mlx-vlm and mlx-lm publish them: the quantization block at the root or inside text_config, a
 * quantization_config copy beside it, per-module entries for the vision and audio towers (`false`, or another mode
 * such as mxfp4) next to the tower tensors, and shards with model.safetensors.index.json. The towers are not loaded,
 * so their entries are never checked; a loaded module's entry is, and its refusal names the file and key.
 */
import { describe, expect, it } from 'vitest';
import { bytesSource, type ByteSource } from '../../src/format/bytesource.ts';
import { openCheckpoint } from '../../src/format/checkpoint.ts';
import { parseConfig } from '../../src/format/config.ts';
import { openQwen35Checkpoint } from '../../src/format/qwen3_5/checkpoint.ts';
import { qwenSynthGeometry, syntheticQwen } from '../../src/format/qwen3_5/synthetic.ts';
import { writeSafetensors, type TensorToWrite } from '../../src/format/safetensors-writer.ts';
import { formatError, refusal } from '../support/refusal.ts';
import { fixtureFiles, memoryCheckpoint } from './fixtures.ts';

const clone = <T>(x: T): T => JSON.parse(JSON.stringify(x));
const { config: tinyConfig, tensors: tinyTensors } = await fixtureFiles('target');
const base = await openCheckpoint(memoryCheckpoint(tinyConfig, tinyTensors));

/** A small bf16 / U32 / U8 tensor of a tower (content irrelevant: it is never read). */
const t = (name: string, dtype: TensorToWrite['dtype'], shape: number[]): TensorToWrite => {
  const size = { BF16: 2, F32: 4, U32: 4, U8: 1 }[dtype as 'BF16'] ?? 4;
  return { name, dtype, shape, data: new Uint8Array(shape.reduce((a, d) => a * d, 1) * size) };
};

/** Vision and audio tower tensors as mlx-vlm writes them: an mxfp4 vision MLP, bf16 others, quantized embedders. */
const towers: TensorToWrite[] = [
  t('vision_tower.patch_embedder.input_proj.weight', 'BF16', [64, 768]),
  t('vision_tower.encoder.layers.0.self_attn.q_proj.linear.weight', 'BF16', [64, 64]),
  t('vision_tower.encoder.layers.0.mlp.gate_proj.linear.weight', 'U32', [128, 8]), // mxfp4: 64 inputs / 8 per word
  t('vision_tower.encoder.layers.0.mlp.gate_proj.linear.scales', 'U8', [128, 2]), // one E8M0 scale per 32
  t('embed_vision.embedding_projection.weight', 'U32', [256, 8]),
  t('embed_vision.embedding_projection.scales', 'BF16', [256, 1]),
  t('embed_vision.embedding_projection.biases', 'BF16', [256, 1]),
  t('audio_tower.layers.0.feed_forward1.ffw_layer_1.linear.weight', 'BF16', [128, 64]),
  t('audio_tower.layers.0.feed_forward1.ffw_layer_1.input_max', 'BF16', []),
  t('embed_audio.embedding_projection.weight', 'BF16', [256, 64]),
];
const towerEntries = {
  'vision_tower.encoder.layers.0.mlp.gate_proj.linear': { group_size: 32, bits: 4, mode: 'mxfp4' },
  'vision_tower.encoder.layers.0.self_attn.q_proj.linear': false,
  'vision_tower.patch_embedder.input_proj': false,
  'audio_tower.layers.0.feed_forward1.ffw_layer_1.linear': false,
  'embed_audio.embedding_projection': false,
  'embed_vision.embedding_projection': { group_size: 64, bits: 4 },
};

/**
 * A description without what differs between layouts of one model: the parsed quantization block (where it was
 * found, which tower entries it holds) and where each tensor lies (file, offset).
 */
const model = (d: object) =>
  JSON.parse(JSON.stringify(d, (k, v) => (k === 'file' || k === 'offset' || k === 'quantization' ? undefined : v)));

/** Same layers, same linears (kind, bits, group size), same tensors as the tiny-a target the fixture opens to. */
function expectSameModel(ck: Awaited<ReturnType<typeof openCheckpoint>>) {
  expect(model(ck.description)).toEqual(model(base.description));
  expect([...ck.tensors.keys()].sort()).toEqual([...base.tensors.keys()].sort());
}

describe('the published layout, read as published', () => {
  it('loads a folder with tower tensors, an mxfp4 vision module and `false` entries; the towers are ignored', async () => {
    const c = clone(tinyConfig);
    for (const q of [c.quantization, c.quantization_config]) Object.assign(q, towerEntries);
    c.vision_config = { model_type: 'gemma4_vision', hidden_size: 64, num_hidden_layers: 1 };
    c.audio_config = { model_type: 'gemma4_audio', hidden_size: 64, num_hidden_layers: 1 };
    const ck = await openCheckpoint(memoryCheckpoint(c, [...tinyTensors, ...towers]));
    expectSameModel(ck);
    expect(ck.ignoredTensors).toBe(towers.length);
  });

  it('loads quantization given only inside text_config (root, or only as quantization_config)', async () => {
    for (const keys of [['quantization'], ['quantization_config'], ['quantization', 'quantization_config']]) {
      const c = clone(tinyConfig);
      const q = c.quantization;
      delete c.quantization;
      delete c.quantization_config;
      for (const k of keys) c.text_config[k] = q;
      const ck = await openCheckpoint(memoryCheckpoint(c, tinyTensors));
      expectSameModel(ck);
      expect(parseConfig(c).quantization?.where).toBe(`text_config.${keys[0]}`);
    }
    // only a quantization_config at the root (a copy without the "quantization" key)
    const c = clone(tinyConfig);
    delete c.quantization;
    expectSameModel(await openCheckpoint(memoryCheckpoint(c, tinyTensors)));
  });

  it('reads entries keyed without the language_model. prefix (mlx-vlm matches them too)', async () => {
    const c = clone(tinyConfig);
    for (const k of Object.keys(c.quantization))
      if (k.startsWith('language_model.')) {
        c.quantization[k.slice('language_model.'.length)] = c.quantization[k];
        delete c.quantization[k];
      }
    delete c.quantization_config;
    expectSameModel(await openCheckpoint(memoryCheckpoint(c, tinyTensors)));
  });

  it('checks entries of loaded modules: another mode, bad bits, `false` where scales exist, two keys for one', async () => {
    const variant = (f: (q: Record<string, unknown>) => void) => {
      const c = clone(tinyConfig);
      delete c.quantization_config;
      f(c.quantization);
      return openCheckpoint(memoryCheckpoint(c, tinyTensors));
    };
    const gate = 'language_model.model.layers.0.mlp.gate_proj';
    const e = await formatError(
      variant((q) => {
        q[gate] = { group_size: 32, bits: 4, mode: 'mxfp4' };
      }),
    );
    expect(e.message).toBe(
      `checkpoint: config.json: quantization entry "${gate}" uses quantization mode "mxfp4", which is not supported yet (only "affine"); this module is part of the text model`,
    );
    expect([e.file, e.subject]).toEqual(['config.json', `quantization.${gate}`]);
    expect(
      await refusal(
        variant((q) => {
          q[gate] = { group_size: 64, bits: 7 };
        }),
      ),
    ).toBe(`checkpoint: config.json: quantization.${gate}.bits must be one of 2, 3, 4, 5, 6, 8, found 7`);
    expect(
      await refusal(
        variant((q) => {
          q[gate] = false;
        }),
      ),
    ).toBe(
      `checkpoint: model.safetensors: config.json marks "${gate}" unquantized but "layers.0.mlp.gate_proj.scales" exists`,
    );
    expect(
      await refusal(
        variant((q) => {
          q['model.layers.0.mlp.gate_proj'] = { group_size: 64, bits: 4 };
          delete q[gate];
          q['layers.0.mlp.gate_proj'] = { group_size: 64, bits: 8 };
        }),
      ),
    ).toBe(
      `checkpoint: config.json: quantization has entries "model.layers.0.mlp.gate_proj" and "layers.0.mlp.gate_proj" for one module ("${gate}" in the weights); keep one`,
    );
    // the block's own mode applies to every loaded module: refused at once, wherever the block is
    const c = clone(tinyConfig);
    c.text_config.quantization = { ...c.quantization, mode: 'nvfp4' };
    delete c.quantization;
    delete c.quantization_config;
    const m = await formatError(() => parseConfig(c));
    expect(m.message).toBe('config.json: text_config.quantization mode "nvfp4" is not supported yet (only "affine")');
    expect(m.subject).toBe('text_config.quantization.mode');
  });

  it('refuses a quantization_config of another format, naming the key', async () => {
    const c = clone(tinyConfig);
    delete c.quantization;
    c.quantization_config = { quant_method: 'compressed-tensors', config_groups: {} };
    const e = await formatError(() => parseConfig(c));
    expect(e.message).toBe(
      'config.json: quantization_config.quant_method is "compressed-tensors", a quantization format other than MLX\'s affine "quantization" block; it is not supported',
    );
    expect(e.subject).toBe('quantization_config.quant_method');
  });

  it('opens shards listed by model.safetensors.index.json, towers in a shard of their own', async () => {
    const lm = writeSafetensors(tinyTensors, { format: 'mlx' });
    const tw = writeSafetensors(towers, { format: 'mlx' });
    const names = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors'];
    const weightMap: Record<string, string> = {};
    for (const x of tinyTensors) weightMap[x.name] = names[0];
    for (const x of towers) weightMap[x.name] = names[1];
    const c = clone(tinyConfig);
    Object.assign(c.quantization, towerEntries);
    const files: ByteSource[] = [
      bytesSource('config.json', new TextEncoder().encode(JSON.stringify(c))),
      bytesSource(
        'model.safetensors.index.json',
        new TextEncoder().encode(
          JSON.stringify({ metadata: { total_size: lm.byteLength + tw.byteLength }, weight_map: weightMap }),
        ),
      ),
      bytesSource(names[0], lm),
      bytesSource(names[1], tw),
    ];
    const ck = await openCheckpoint(files);
    expectSameModel(ck);
    expect(ck.ignoredTensors).toBe(towers.length);
  });

  it('Qwen3.5: quantization inside text_config, vision tower entries in another mode', async () => {
    const files = syntheticQwen(qwenSynthGeometry('qwen-tiny')).target;
    const config = JSON.parse(new TextDecoder().decode(await files[0].read(0, files[0].size)));
    const bare = await openQwen35Checkpoint(files);
    const c = clone(config);
    c.text_config.quantization = {
      ...c.quantization,
      'vision_tower.blocks.0.mlp.linear_fc1': { group_size: 32, bits: 4, mode: 'mxfp4' },
      'vision_tower.merger.linear_fc2': false,
    };
    delete c.quantization;
    delete c.quantization_config;
    const moved = await openQwen35Checkpoint([
      bytesSource('config.json', new TextEncoder().encode(JSON.stringify(c))),
      ...files.slice(1),
    ]);
    expect(model(moved.description)).toEqual(model(bare.description));
  });
});
