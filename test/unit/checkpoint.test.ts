import { describe, expect, it } from 'vitest';
import path from 'node:path';
import { bytesSource, type ByteSource } from '../../src/format/bytesource.ts';
import { openCheckpoint } from '../../src/format/checkpoint.ts';
import { checkCompatibility } from '../../src/format/compat.ts';
import { parseConfig } from '../../src/format/config.ts';
import type { AssistantDescription, TargetDescription } from '../../src/format/model-description.ts';
import { writeSafetensors, type TensorToWrite } from '../../src/format/safetensors-writer.ts';
import { nodeFolderSources, openCheckpointDir } from '../../src/node/file-source.ts';
import { TINY_A, fixtureFiles, memoryCheckpoint } from './fixtures.ts';

const clone = <T>(x: T): T => JSON.parse(JSON.stringify(x));

describe('config.json', () => {
  it('parses the tiny-a target: per-layer geometry, rope, eos, quantization', async () => {
    const { config } = await fixtureFiles('target');
    const c = parseConfig(config);
    expect(c.role).toBe('target');
    expect(c.layers.map((l) => l.type[0]).join('')).toBe('sssssfsssssf');
    expect(c.layers[0]).toMatchObject({
      headDim: 64,
      numHeads: 4,
      numKvHeads: 2,
      kEqV: false,
      rope: { theta: 10000, partialRotary: 1 },
    });
    expect(c.layers[5]).toMatchObject({
      headDim: 128,
      numKvHeads: 1,
      kEqV: true,
      rope: { ropeType: 'proportional', theta: 1e6, partialRotary: 0.25 },
    });
    expect(c.eosIds).toEqual([1, 106]);
    expect(c.finalSoftcap).toBe(30);
    expect(c.quantization!.defaults).toEqual({ groupSize: 64, bits: 4 });
    expect(c.quantization!.overrides.get('language_model.model.layers.3.mlp.up_proj')).toEqual({
      groupSize: 64,
      bits: 8,
    });
  });

  it('parses the assistant (KV-shared by design, no softcap)', async () => {
    const { config } = await fixtureFiles('assistant');
    const c = parseConfig(config);
    expect(c).toMatchObject({ role: 'assistant', backboneHidden: 256, hidden: 128, finalSoftcap: null });
  });

  it('reads eos ids from root, text_config or generation config', async () => {
    const { config } = await fixtureFiles('target');
    const a = clone(config);
    a.eos_token_id = [1, 106, 50];
    expect(parseConfig(a).eosIds).toEqual([1, 106, 50]);
    const b = clone(config);
    b.text_config.eos_token_id = 7;
    expect(parseConfig(b).eosIds).toEqual([7]);
    expect(parseConfig(clone(config), 'config.json', { eos_token_id: [3, 4] }).eosIds).toEqual([3, 4]);
  });

  it('accepts text-only model types with the config at the root', async () => {
    const { config } = await fixtureFiles('target');
    const root = { ...clone(config.text_config), model_type: 'gemma4_unified_text', quantization: config.quantization };
    expect(parseConfig(root).layers).toHaveLength(12);
  });
  // refusals of unsupported variants: bad-input.test.ts
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
      if (l.type === 'full') {
        expect(l.vProj).toBeNull();
        expect(l.kEqV).toBe(true);
      } else expect(l.vProj).not.toBeNull();
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
    expect((await nodeFolderSources(path.join(TINY_A, 'target'))).map((s) => s.name).sort()).toEqual([
      'config.json',
      'model.safetensors',
    ]);
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
      const vision: TensorToWrite = {
        name: 'model.vision_tower.patch.weight',
        dtype: 'F32',
        shape: [2],
        data: new Uint8Array(8),
      };
      const ck = await openCheckpoint(memoryCheckpoint(c, [...renamed, vision]));
      expect([...ck.tensors.keys()].sort()).toEqual([...base.tensors.keys()].sort());
      expect(ck.ignoredTensors).toBe(1);
      expect((ck.description as TargetDescription).layers[0].gate).toMatchObject({ bits: 8 });
    }
  });

  it('opens sharded checkpoints through the index', async () => {
    const { config, tensors } = await fixtureFiles('target');
    const half = Math.floor(tensors.length / 2);
    const shards = [tensors.slice(0, half), tensors.slice(half)];
    const names = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors'];
    const weightMap: Record<string, string> = {};
    shards.forEach((s, i) =>
      s.forEach((t) => {
        weightMap[t.name] = names[i];
      }),
    );
    const files: ByteSource[] = [
      bytesSource('config.json', new TextEncoder().encode(JSON.stringify(config))),
      bytesSource(
        'model.safetensors.index.json',
        new TextEncoder().encode(JSON.stringify({ metadata: {}, weight_map: weightMap })),
      ),
      ...shards.map((s, i) => bytesSource(names[i], writeSafetensors(s))),
    ];
    const ck = await openCheckpoint(files);
    expect(ck.tensors.size).toBe(tensors.length);
    expect(ck.totalBytes).toBe(files[2].size + files[3].size);
  });
});

// Every refusal (missing/unexpected tensors, index mismatches, missing config, target/assistant mismatch)
// is in bad-input.test.ts.
