import { describe, expect, it } from 'vitest';
import path from 'node:path';
import { bytesSource, type ByteSource } from '../../src/format/bytesource.ts';
import { openCheckpoint } from '../../src/format/checkpoint.ts';
import { checkCompatibility } from '../../src/format/compat.ts';
import { parseConfig } from '../../src/format/config.ts';
import { FormatError } from '../../src/format/errors.ts';
import type { AssistantDescription, TargetDescription } from '../../src/format/model-description.ts';
import { writeSafetensors, type TensorToWrite } from '../../src/format/safetensors-writer.ts';
import { nodeFolderSources, openCheckpointDir } from '../../src/node/file-source.ts';
import { TINY_A, fixtureFiles, memoryCheckpoint } from './fixtures.ts';

async function refusal(p: Promise<unknown> | (() => unknown)): Promise<string> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (e) {
    expect(e).toBeInstanceOf(FormatError);
    return (e as Error).message;
  }
  throw new Error('expected a FormatError');
}

const clone = <T>(x: T): T => JSON.parse(JSON.stringify(x));

describe('config.json', () => {
  it('parses the tiny-a target: per-layer geometry, rope, eos, quantization', async () => {
    const { config } = await fixtureFiles('target');
    const c = parseConfig(config);
    expect(c.role).toBe('target');
    expect(c.layers.map((l) => l.type[0]).join('')).toBe('sssssfsssssf');
    expect(c.layers[0]).toMatchObject({ headDim: 64, numHeads: 4, numKvHeads: 2, kEqV: false, rope: { theta: 10000, partialRotary: 1 } });
    expect(c.layers[5]).toMatchObject({ headDim: 128, numKvHeads: 1, kEqV: true, rope: { ropeType: 'proportional', theta: 1e6, partialRotary: 0.25 } });
    expect(c.eosIds).toEqual([1, 106]);
    expect(c.finalSoftcap).toBe(30);
    expect(c.quantization!.defaults).toEqual({ groupSize: 64, bits: 4 });
    expect(c.quantization!.overrides.get('language_model.model.layers.3.mlp.up_proj')).toEqual({ groupSize: 64, bits: 8 });
  });

  it('parses the assistant (KV-shared by design, no softcap)', async () => {
    const { config } = await fixtureFiles('assistant');
    const c = parseConfig(config);
    expect(c).toMatchObject({ role: 'assistant', backboneHidden: 256, hidden: 128, finalSoftcap: null });
  });

  it('reads eos ids from root, text_config or generation config', async () => {
    const { config } = await fixtureFiles('target');
    const a = clone(config); a.eos_token_id = [1, 106, 50];
    expect(parseConfig(a).eosIds).toEqual([1, 106, 50]);
    const b = clone(config); b.text_config.eos_token_id = 7;
    expect(parseConfig(b).eosIds).toEqual([7]);
    expect(parseConfig(clone(config), 'config.json', { eos_token_id: [3, 4] }).eosIds).toEqual([3, 4]);
  });

  it('accepts text-only model types with the config at the root', async () => {
    const { config } = await fixtureFiles('target');
    const root = { ...clone(config.text_config), model_type: 'gemma4_unified_text', quantization: config.quantization };
    expect(parseConfig(root).layers).toHaveLength(12);
  });

  it('refuses unsupported variants with clear messages', async () => {
    const { config } = await fixtureFiles('target');
    const variant = (f: (c: any) => void) => { const c = clone(config); f(c); return () => parseConfig(c); };
    expect(await refusal(variant((c) => { c.model_type = 'llama'; })))
      .toMatch(/config\.json: model_type "llama" is not supported \(expected a Gemma 4 text model: gemma4, gemma4_unified/);
    expect(await refusal(variant((c) => { c.text_config.enable_moe_block = true; c.text_config.num_experts = 128; })))
      .toMatch(/mixture-of-experts blocks \(text_config\.enable_moe_block = true\); this variant is not supported yet/);
    expect(await refusal(variant((c) => { c.text_config.num_local_experts = 8; })))
      .toMatch(/mixture-of-experts.*num_local_experts = 8/);
    expect(await refusal(variant((c) => { c.text_config.hidden_size_per_layer_input = 256; })))
      .toMatch(/per-layer embeddings .*hidden_size_per_layer_input = 256\)/);
    expect(await refusal(variant((c) => { c.text_config.num_kv_shared_layers = 20; })))
      .toMatch(/KV-shared layers \(text_config\.num_kv_shared_layers = 20\)/);
    expect(await refusal(variant((c) => { c.quantization = { group_size: 32, bits: 4, mode: 'mxfp4' }; })))
      .toMatch(/quantization mode "mxfp4" is not supported yet/);
    expect(await refusal(variant((c) => { delete c.text_config.hidden_size; })))
      .toMatch(/text_config\.hidden_size must be a positive integer, found nothing/);
    expect(await refusal(variant((c) => { c.text_config.layer_types = ['sliding_attention']; })))
      .toMatch(/layer_types must list 12 layer types/);
  });
});

describe('checkpoint', () => {
  it('opens tiny-a target and assistant from disk; every tensor accounted for', async () => {
    const t = await openCheckpointDir(path.join(TINY_A, 'target'));
    const d = t.description as TargetDescription;
    expect(d.role).toBe('target');
    expect(t.tensors.size).toBe(10 * 28 + 2 * 25 + 4); // sliding layers 28 tensors, k_eq_v full layers 25 (no v_proj), embed 3, norm 1
    expect(d.embedScale).toBe(16);
    expect(d.embed).toMatchObject({ kind: 'affine', bits: 4, groupSize: 64, outFeatures: 1024, inFeatures: 256 });
    for (const l of d.layers) {
      expect(l.gate).toMatchObject({ kind: 'affine', bits: 8 });
      expect(l.up).toMatchObject({ kind: 'affine', bits: 8 });
      expect(l.down).toMatchObject({ kind: 'affine', bits: 8, inFeatures: 512 });
      expect(l.qProj).toMatchObject({ kind: 'affine', bits: 4 });
      expect(l.oProj).toMatchObject({ kind: 'affine', bits: 4 });
      if (l.type === 'full') { expect(l.vProj).toBeNull(); expect(l.kEqV).toBe(true); } else expect(l.vProj).not.toBeNull();
      expect(l.layerScalar.shape).toEqual([1]);
    }
    expect(t.digest).toMatch(/^[0-9a-f]{64}$/);
    const a = await openCheckpointDir(path.join(TINY_A, 'assistant'));
    const ad = a.description as AssistantDescription;
    expect(ad.role).toBe('assistant');
    expect(ad.preProjection).toMatchObject({ outFeatures: 128, inFeatures: 512 });
    expect(ad.postProjection).toMatchObject({ outFeatures: 256, inFeatures: 128 });
    expect(ad.layers.every((l) => l.kProj === null && l.kNorm === null)).toBe(true);
    checkCompatibility(d, ad);
    // nodeFolderSources lists the real folder
    expect((await nodeFolderSources(path.join(TINY_A, 'target'))).map((s) => s.name).sort()).toEqual(['config.json', 'model.safetensors']);
  });

  it('normalises name prefixes (model.language_model., model., language_model.model.) and skips vision towers', async () => {
    const { config, tensors } = await fixtureFiles('target');
    const base = await openCheckpoint(memoryCheckpoint(config, tensors));
    for (const prefix of ['model.language_model.', 'model.']) {
      const renamed = tensors.map((t) => ({ ...t, name: prefix + t.name.slice('language_model.model.'.length) }));
      // quantization overrides are keyed by module path as written in the checkpoint
      const c = clone(config);
      for (const k of Object.keys(c.quantization)) {
        if (k.startsWith('language_model.model.')) {
          c.quantization[prefix + k.slice('language_model.model.'.length)] = c.quantization[k];
          delete c.quantization[k];
        }
      }
      const vision: TensorToWrite = { name: 'model.vision_tower.patch.weight', dtype: 'F32', shape: [2], data: new Uint8Array(8) };
      const ck = await openCheckpoint(memoryCheckpoint(c, [...renamed, vision]));
      expect([...ck.tensors.keys()].sort()).toEqual([...base.tensors.keys()].sort());
      expect(ck.ignoredTensors).toBe(1);
      expect((ck.description as TargetDescription).layers[0].gate).toMatchObject({ bits: 8 });
    }
  });

  it('opens sharded checkpoints through the index and checks the map', async () => {
    const { config, tensors } = await fixtureFiles('target');
    const half = Math.floor(tensors.length / 2);
    const shards = [tensors.slice(0, half), tensors.slice(half)];
    const names = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors'];
    const weightMap: Record<string, string> = {};
    shards.forEach((s, i) => s.forEach((t) => { weightMap[t.name] = names[i]; }));
    const files = (map: Record<string, string>, drop?: string): ByteSource[] => [
      bytesSource('config.json', new TextEncoder().encode(JSON.stringify(config))),
      bytesSource('model.safetensors.index.json', new TextEncoder().encode(JSON.stringify({ metadata: {}, weight_map: map }))),
      ...shards.map((s, i) => bytesSource(names[i], writeSafetensors(s))).filter((f) => f.name !== drop),
    ];
    const ck = await openCheckpoint(files(weightMap));
    expect(ck.tensors.size).toBe(tensors.length);
    expect(await refusal(openCheckpoint(files(weightMap, names[1]))))
      .toMatch(/model\.safetensors\.index\.json: weight_map points \d+ tensors to "model-00002-of-00002\.safetensors", which is not among the files given/);
    const wrong = { ...weightMap, [tensors[0].name]: names[1] };
    expect(await refusal(openCheckpoint(files(wrong))))
      .toMatch(new RegExp(`weight_map says tensor "${tensors[0].name.replace(/\./g, '\\.')}" is in "model-00002-of-00002\\.safetensors" but it is in model-00001-of-00002\\.safetensors`));
    const extra = { ...weightMap, 'language_model.model.ghost.weight': names[0] };
    expect(await refusal(openCheckpoint(files(extra)))).toMatch(/weight_map lists tensor "language_model\.model\.ghost\.weight".*has no such tensor/);
  });

  it('refuses missing tensors, wrong shapes and leftovers, naming them', async () => {
    const { config, tensors } = await fixtureFiles('target');
    const without = tensors.filter((t) => t.name !== 'language_model.model.layers.3.self_attn.k_norm.weight');
    expect(await refusal(openCheckpoint(memoryCheckpoint(config, without))))
      .toBe('missing tensor "layers.3.self_attn.k_norm.weight" (norm weight of shape [64]) in model.safetensors');
    const reshaped = tensors.map((t) => t.name === 'language_model.model.norm.weight' ? { ...t, shape: [2, 128] } : t);
    expect(await refusal(openCheckpoint(memoryCheckpoint(config, reshaped))))
      .toBe('model.safetensors: tensor "language_model.model.norm.weight" has shape [2,128], expected [256]');
    const c8 = clone(config);
    c8.quantization.bits = 8; // the stored attention weights are 4-bit
    expect(await refusal(openCheckpoint(memoryCheckpoint(c8, tensors))))
      .toMatch(/tensor "language_model\.model\.embed_tokens\.weight" has shape \[1024,32\], expected \[1024,64\] \(1024 x 256 at 8 bits; the stored shape fits 4 bits/);
    const vproj = tensors.find((t) => t.name === 'language_model.model.layers.0.self_attn.v_proj.weight')!;
    const extraV = [...tensors, { ...vproj, name: 'language_model.model.layers.5.self_attn.v_proj.weight' }];
    expect(await refusal(openCheckpoint(memoryCheckpoint(config, extraV))))
      .toMatch(/1 unexpected language-model tensor that this gemma4 description does not use: "language_model\.model\.layers\.5\.self_attn\.v_proj\.weight"/);
    const lm = [...tensors, { name: 'lm_head.weight', dtype: 'BF16' as const, shape: [1], data: new Uint8Array(2) }];
    expect(await refusal(openCheckpoint(memoryCheckpoint(config, lm)))).toMatch(/unexpected language-model tensor.*"lm_head\.weight"/);
  });

  it('refuses a folder without config.json or weights', async () => {
    expect(await refusal(openCheckpoint([bytesSource('model.safetensors', new Uint8Array(8))], 'my-model')))
      .toMatch(/my-model: no config\.json among the 1 files given \(model\.safetensors\)/);
    expect(await refusal(openCheckpoint([bytesSource('config.json', new TextEncoder().encode('{}'))], 'my-model')))
      .toMatch(/my-model: no \.safetensors weights/);
  });

  it('checks target/assistant compatibility', async () => {
    const t = (await openCheckpointDir(path.join(TINY_A, 'target'))).description as TargetDescription;
    const { config, tensors } = await fixtureFiles('assistant');
    const c = clone(config);
    c.backbone_hidden_size = 512;
    // pre/post projection shapes follow backbone_hidden_size, so rebuild them as dense tensors of the new size
    const dense = (name: string, out: number, inF: number): TensorToWrite => ({ name, dtype: 'BF16', shape: [out, inF], data: new Uint8Array(out * inF * 2) });
    const kept = tensors.filter((x) => !x.name.startsWith('pre_projection') && !x.name.startsWith('post_projection'));
    const a = (await openCheckpoint(memoryCheckpoint(c, [...kept, dense('pre_projection.weight', 128, 1024), dense('post_projection.weight', 512, 128)]))).description as AssistantDescription;
    expect(await refusal(() => checkCompatibility(t, a)))
      .toMatch(/assistant \(gemma4_assistant\) does not fit target \(gemma4\): assistant backbone_hidden_size 512 != target hidden_size 256/);
    const good = (await openCheckpointDir(path.join(TINY_A, 'assistant'))).description as AssistantDescription;
    const badKv = { ...good, vocab: 2048, layers: good.layers.map((l) => (l.type === 'full' ? { ...l, numKvHeads: 2 } : l)) };
    const msg = await refusal(() => checkCompatibility(t, badKv));
    expect(msg).toMatch(/assistant vocab_size 2048 != target vocab_size 1024/);
    expect(msg).toMatch(/assistant layer 3 \(full\) vs target layer 11: KV heads 2 != 1/);
  });
});
