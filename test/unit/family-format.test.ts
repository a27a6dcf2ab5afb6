/**
 * Config and tensor plan of the Gemma 4 E-series on the gemma4-e-tiny fixture: per-layer embeddings,
 * KV-shared layers reading their donors, the double-wide MLP, the centroid-head assistant, and the refusals
 * (which file, tensor or key, what was expected) for what is missing or wrong.
 */
import { describe, expect, it } from 'vitest';
import { openCheckpoint } from '../../src/format/checkpoint.ts';
import { checkCompatibility } from '../../src/format/compat.ts';
import { parseConfig } from '../../src/format/config.ts';
import {
  familyFeatures,
  type AssistantDescription,
  type TargetDescription,
} from '../../src/format/model-description.ts';
import type { TensorToWrite } from '../../src/format/safetensors-writer.ts';
import { GEMMA4_E_TINY } from '../support/fixtures.ts';
import { fixtureFiles, memoryCheckpoint } from './fixtures.ts';
import { refusal } from '../support/refusal.ts';

const clone = <T>(x: T): T => JSON.parse(JSON.stringify(x));

async function files(which: 'target' | 'assistant') {
  return fixtureFiles(which, GEMMA4_E_TINY);
}

/** Opens the fixture with its config and tensors edited; resolves to the description or the error message. */
async function open(
  which: 'target' | 'assistant',
  /** Edits config in place; may return a new tensor list. */
  edit: (config: any, tensors: TensorToWrite[]) => unknown = () => undefined,
) {
  const { config, tensors } = await files(which);
  const c = clone(config);
  const r = edit(c, tensors);
  const t = Array.isArray(r) ? (r as TensorToWrite[]) : tensors;
  return openCheckpoint(memoryCheckpoint(c, t), which);
}

const PRE = 'language_model.model.';

describe('gemma4-e-tiny: config', () => {
  it('reads per-layer input width, KV sharing with donors, double-wide MLP', async () => {
    const c = parseConfig((await files('target')).config);
    expect(c.perLayerInput).toEqual({ width: 64, vocab: 512 });
    expect(c.kvSharedLayers).toBe(4);
    expect(c.doubleWideMlp).toBe(true);
    // layers 6..9 are shared: sliding ones read layer 5 (last sliding owner), the full one layer 4
    expect(c.layers.map((l) => l.kvDonor ?? null)).toEqual([null, null, null, null, null, null, 5, 5, 5, 4]);
  });

  it('reads the centroid head of the assistant', async () => {
    const c = parseConfig((await files('assistant')).config);
    expect(c.centroidHead).toEqual({ numCentroids: 16, topK: 4 });
    expect(c.kvSharedLayers).toBe(0);
    expect(c.layers.every((l) => l.kvDonor === undefined)).toBe(true);
  });

  it('requires the fields transformers and mlx-lm default differently', async () => {
    const { config } = await files('target');
    const without = (k: string) => {
      const c = clone(config);
      delete c.text_config[k];
      return () => parseConfig(c);
    };
    expect(without('use_double_wide_mlp')).toThrow(
      'config.json: text_config.use_double_wide_mlp is required for a model with KV-shared layers (num_kv_shared_layers = 4), and it is missing: transformers and mlx-lm default it differently (transformers false, mlx-lm true), so it cannot be guessed',
    );
    expect(without('num_kv_shared_layers')).toThrow(
      'config.json: text_config.num_kv_shared_layers is required for a model with per-layer embeddings (hidden_size_per_layer_input = 64), and it is missing: transformers and mlx-lm default it differently (transformers 0, mlx-lm 20), so it cannot be guessed',
    );
    expect(without('vocab_size_per_layer_input')).toThrow(
      /text_config\.vocab_size_per_layer_input must be a positive integer for a model with per-layer embeddings \(hidden_size_per_layer_input = 64\), found null/,
    );
    const all = clone(config);
    all.text_config.num_kv_shared_layers = 10;
    expect(() => parseConfig(all)).toThrow(/num_kv_shared_layers = 10 makes every layer of a target KV-shared/);
  });

  it('requires num_centroids and its top-k with use_ordered_embeddings', async () => {
    const { config } = await files('assistant');
    const a = clone(config);
    delete a.num_centroids;
    expect(() => parseConfig(a)).toThrow(
      'config.json: num_centroids is required with use_ordered_embeddings (the centroid LM head) and is missing',
    );
    const b = clone(config);
    b.num_centroids = 24;
    expect(() => parseConfig(b)).toThrow(/vocab_size 512 is not a multiple of num_centroids 24/);
    const c = clone(config);
    c.text_config.hidden_size_per_layer_input = 64;
    expect(() => parseConfig(c)).toThrow(/an assistant with per-layer embeddings/);
  });
});

describe('gemma4-e-tiny: tensor plan', () => {
  it('describes the target: PLE weights, shared layers without k/v, double-wide MLP', async () => {
    const d = (await open('target')).description as TargetDescription;
    expect(d.perLayer).toBeDefined();
    expect(d.perLayer!.width).toBe(64);
    expect([d.perLayer!.table.outFeatures, d.perLayer!.table.inFeatures]).toEqual([512, 640]);
    expect([d.perLayer!.modelProjection.outFeatures, d.perLayer!.modelProjection.inFeatures]).toEqual([640, 128]);
    for (const l of d.layers) {
      const shared = l.index >= 6;
      expect(l.kvDonor, `layer ${l.index}`).toBe(shared ? (l.type === 'full' ? 4 : 5) : undefined);
      expect(l.kProj === null, `layer ${l.index}`).toBe(shared);
      expect(l.kNorm === null).toBe(shared);
      expect(l.gate.outFeatures).toBe(shared ? 256 : 128);
      expect(l.down.inFeatures).toBe(shared ? 256 : 128);
      expect([l.perLayerInput!.gate.outFeatures, l.perLayerInput!.projection.inFeatures]).toEqual([64, 64]);
    }
    expect(familyFeatures(d)).toEqual(['per-layer embeddings (P = 64)', '4 KV-shared layers', 'double-wide MLP']);
  });

  it('describes the assistant with its centroid head and fits the target through the donors', async () => {
    const t = (await open('target')).description as TargetDescription;
    const a = (await open('assistant')).description as AssistantDescription;
    expect(a.centroidHead).toMatchObject({ numCentroids: 16, topK: 4 });
    expect(a.centroidHead!.tokenOrdering.dtype).toBe('I32');
    expect([a.centroidHead!.centroids.outFeatures, a.centroidHead!.centroids.inFeatures]).toEqual([16, 64]);
    expect(() => checkCompatibility(t, a)).not.toThrow();
  });

  it('ignores k/v projections that a transformers-made checkpoint keeps on shared layers', async () => {
    const d = (
      await open('target', (_, t) => {
        const k = t.find((x) => x.name === `${PRE}layers.5.self_attn.k_proj.weight`)!;
        return [...t, { ...k, name: `${PRE}layers.7.self_attn.k_proj.weight` }];
      })
    ).description;
    expect(d.layers[7].kProj).toBeNull();
  });

  it('names the file, tensor and expectation of a missing or wrong tensor', async () => {
    const drop = (name: string) => (_: unknown, t: TensorToWrite[]) => t.filter((x) => x.name !== name);
    expect(await refusal(open('target', drop(`${PRE}per_layer_projection_norm.weight`)))).toBe(
      'target: missing tensor "per_layer_projection_norm.weight" (per-layer projection norm weight of shape [64]) in model.safetensors',
    );
    expect(await refusal(open('target', drop(`${PRE}layers.3.post_per_layer_input_norm.weight`)))).toBe(
      'target: missing tensor "layers.3.post_per_layer_input_norm.weight" (norm weight of shape [128]) in model.safetensors',
    );
    expect(await refusal(open('target', drop(`${PRE}layers.5.self_attn.k_proj.weight`)))).toBe(
      'target: missing tensor "layers.5.self_attn.k_proj.weight" in model.safetensors: layer 5 has no K projection, which only a KV-shared layer may lack, and config.json makes only layers 6.. KV-shared (num_kv_shared_layers = 4)',
    );
    // a single-wide MLP on a shared layer: config says double-wide
    expect(
      await refusal(
        open('target', (c) => {
          c.text_config.use_double_wide_mlp = false;
        }),
      ),
    ).toMatch(
      /tensor "language_model\.model\.layers\.6\.mlp\.gate_proj\.weight" has shape \[256,16\], expected \[128,16\]/,
    );
    expect(
      await refusal(
        open('target', (c) => {
          c.text_config.hidden_size_per_layer_input = 0;
        }),
      ),
    ).toBe(
      'target: model.safetensors: the checkpoint has per-layer embeddings ("embed_tokens_per_layer") but config.json has no text_config.hidden_size_per_layer_input > 0 to say their width',
    );
    expect(
      await refusal(
        open('assistant', (_, t) =>
          t.map((x) =>
            x.name === 'masked_embedding.token_ordering'
              ? { ...x, dtype: 'F32' as const, data: new Uint8Array(x.data) }
              : x,
          ),
        ),
      ),
    ).toBe(
      'assistant: model.safetensors: tensor "masked_embedding.token_ordering" should be I32 or I64 (the centroid head\'s token ordering) but is F32',
    );
    expect(
      await refusal(
        open('assistant', (c) => {
          c.use_ordered_embeddings = false;
        }),
      ),
    ).toMatch(
      /has a centroid LM head \("masked_embedding\.centroids"\) but config\.json does not set use_ordered_embeddings/,
    );
  });
});
