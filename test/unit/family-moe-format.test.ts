/**
 * Config and tensor plan of a Gemma 4 MoE target (26B-A4B's structure) on a small in-memory checkpoint:
 * router and MLX SwitchGLU experts (4-bit, stacked [E, out, ...]), the expert views the reference reads, the refusals,
 * and the reference target running it with both router conventions. (The float64 goldens of gemma4-moe-tiny come
 * from the next device run of tools/make_gemma4_family_fixtures.py.)
 */
import { describe, expect, it } from 'vitest';
import { openCheckpoint } from '../../src/format/checkpoint.ts';
import { parseConfig } from '../../src/format/config.ts';
import { dequantAffine, dequantizeLinear } from '../../src/format/dequant.ts';
import { toFloat64, toUint32 } from '../../src/format/dtype.ts';
import { readTensorBytes } from '../../src/format/safetensors.ts';
import { expertLinear } from '../../src/format/experts.ts';
import { familyFeatures, type TargetDescription } from '../../src/format/model-description.ts';
import type { TensorToWrite } from '../../src/format/safetensors-writer.ts';
import { loadReferenceWeights, referenceForward } from '../../src/reference/index.ts';
import { memoryCheckpoint } from './fixtures.ts';
import { refusal } from '../support/refusal.ts';

const H = 64;
const E = 4;
const K = 2;
const IM = 32; // expert width
const I = 64; // dense MLP width
const V = 64;
const L = 2;
const PRE = 'language_model.model.';

function rng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function config() {
  return {
    model_type: 'gemma4',
    text_config: {
      model_type: 'gemma4_text',
      vocab_size: V,
      hidden_size: H,
      intermediate_size: I,
      num_hidden_layers: L,
      num_attention_heads: 2,
      num_key_value_heads: 1,
      head_dim: 32,
      global_head_dim: 64,
      sliding_window: 8,
      layer_types: ['sliding_attention', 'full_attention'],
      final_logit_softcapping: 30,
      hidden_size_per_layer_input: 0,
      num_kv_shared_layers: 0,
      enable_moe_block: true,
      num_experts: E,
      top_k_experts: K,
      moe_intermediate_size: IM,
    },
    tie_word_embeddings: true,
    quantization: { group_size: 32, bits: 4, mode: 'affine' },
  };
}

/** Dense F32 everywhere except the experts, which are MLX 4-bit group-32 stacks. */
function tensors(): TensorToWrite[] {
  const r = rng(7);
  const out: TensorToWrite[] = [];
  const f32 = (name: string, shape: number[], scale = 0.2, shift = 0) => {
    const n = shape.reduce((a, b) => a * b, 1);
    const a = Float32Array.from({ length: n }, () => shift + scale * (r() * 2 - 1));
    out.push({ name: PRE + name, dtype: 'F32', shape, data: new Uint8Array(a.buffer) });
  };
  const q4 = (path: string, outF: number, inF: number) => {
    const words = Uint32Array.from({ length: E * outF * (inF / 8) }, () => (r() * 2 ** 32) >>> 0);
    out.push({
      name: `${PRE + path}.weight`,
      dtype: 'U32',
      shape: [E, outF, inF / 8],
      data: new Uint8Array(words.buffer),
    });
    f32(`${path}.scales`, [E, outF, inF / 32], 0.01, 0.02);
    f32(`${path}.biases`, [E, outF, inF / 32], 0.05);
  };
  f32('embed_tokens.weight', [V, H], 1);
  f32('norm.weight', [H], 0.1, 1);
  for (let i = 0; i < L; i++) {
    const p = `layers.${i}.`;
    const hd = i === 0 ? 32 : 64;
    f32(`${p}self_attn.q_proj.weight`, [2 * hd, H]);
    f32(`${p}self_attn.k_proj.weight`, [hd, H]);
    f32(`${p}self_attn.v_proj.weight`, [hd, H]);
    f32(`${p}self_attn.o_proj.weight`, [H, 2 * hd]);
    f32(`${p}self_attn.q_norm.weight`, [hd], 0.1, 1);
    f32(`${p}self_attn.k_norm.weight`, [hd], 0.1, 1);
    for (const n of [
      'input_layernorm',
      'post_attention_layernorm',
      'pre_feedforward_layernorm',
      'post_feedforward_layernorm',
      'pre_feedforward_layernorm_2',
      'post_feedforward_layernorm_1',
      'post_feedforward_layernorm_2',
    ])
      f32(`${p}${n}.weight`, [H], 0.1, 1);
    f32(`${p}mlp.gate_proj.weight`, [I, H]);
    f32(`${p}mlp.up_proj.weight`, [I, H]);
    f32(`${p}mlp.down_proj.weight`, [H, I]);
    f32(`${p}layer_scalar`, [1], 0, 0.9);
    f32(`${p}router.proj.weight`, [E, H], 2);
    f32(`${p}router.scale`, [H], 0.2, 1);
    f32(`${p}router.per_expert_scale`, [E], 0.2, 1);
    q4(`${p}experts.switch_glu.gate_proj`, IM, H);
    q4(`${p}experts.switch_glu.up_proj`, IM, H);
    q4(`${p}experts.switch_glu.down_proj`, H, IM);
  }
  return out;
}

async function open(edit: (c: any, t: TensorToWrite[]) => unknown = () => undefined) {
  const c = config();
  const t = tensors();
  const r = edit(c, t);
  return openCheckpoint(memoryCheckpoint(c, Array.isArray(r) ? (r as TensorToWrite[]) : t), 'moe');
}

describe('Gemma 4 MoE target: format', () => {
  it('reads the MoE config, requiring its sizes', () => {
    expect(parseConfig(config()).moe).toEqual({ numExperts: E, topK: K, intermediate: IM });
    const c = config() as any;
    delete c.text_config.top_k_experts;
    expect(() => parseConfig(c)).toThrow(
      'config.json: text_config.top_k_experts is required with enable_moe_block and is missing',
    );
    const d = config() as any;
    d.text_config.enable_moe_block = false;
    expect(() => parseConfig(d)).toThrow(
      'config.json: text_config.num_experts = 4 but enable_moe_block is not true: the experts would be ignored; set enable_moe_block or remove num_experts',
    );
  });

  it('describes router and stacked experts; expert views are the slices of the stacks', async () => {
    const d = (await open()).description as TargetDescription;
    expect(familyFeatures(d)).toEqual(['mixture-of-experts blocks (4 experts, top 2)']);
    const m = d.layers[1].moe!;
    expect([m.numExperts, m.topK, m.gate.numExperts]).toEqual([E, K, E]);
    expect(m.gate.stacked).toMatchObject({ kind: 'affine', outFeatures: IM, inFeatures: H, bits: 4, groupSize: 32 });
    expect(m.down.stacked).toMatchObject({ outFeatures: H, inFeatures: IM });
    expect(m.routerProj.kind).toBe('dense');
    // expert 2 of down_proj, dequantized through its view, equals the slice of the whole stack dequantized
    const s = m.down.stacked;
    if (s.kind !== 'affine') throw new Error('affine expected');
    const whole = async (t: typeof s.scales) => toFloat64(await readTensorBytes(t), t.dtype);
    const all = dequantAffine(
      toUint32(await readTensorBytes(s.weight)),
      await whole(s.scales),
      await whole(s.biases),
      E * H,
      IM,
      4,
      32,
    );
    const view = await dequantizeLinear(expertLinear(m.down, 2));
    expect(view).toEqual(all.subarray(2 * H * IM, 3 * H * IM));
  });

  it('names what is missing or in the wrong layout', async () => {
    const drop = (n: string) => (_: unknown, t: TensorToWrite[]) => t.filter((x) => x.name !== PRE + n);
    expect(await refusal(open(drop('layers.0.router.scale')))).toBe(
      'moe: missing tensor "layers.0.router.scale" (router scale of shape [64]) in model.safetensors',
    );
    expect(await refusal(open(drop('layers.1.post_feedforward_layernorm_2.weight')))).toBe(
      'moe: missing tensor "layers.1.post_feedforward_layernorm_2.weight" (norm weight of shape [64]) in model.safetensors',
    );
    expect(
      await refusal(
        open((_, t) =>
          t.map((x) =>
            x.name.endsWith('layers.0.experts.switch_glu.up_proj.weight') ? { ...x, shape: [E * IM, H / 8] } : x,
          ),
        ),
      ),
    ).toMatch(
      /tensor "language_model\.model\.layers\.0\.experts\.switch_glu\.up_proj\.weight" has shape \[128,8\], expected \[4,32,8\] \(4 x 32 x 64 at 4 bits\)/,
    );
    expect(
      await refusal(
        open((_, t) => [
          ...t,
          { name: `${PRE}layers.0.experts.gate_up_proj`, dtype: 'F32' as const, shape: [1], data: new Uint8Array(4) },
        ]),
      ),
    ).toMatch(/layer 0 stores its experts in transformers' layout .* convert the checkpoint with mlx-lm/);
  });
});

describe('Gemma 4 MoE target: reference', () => {
  it('runs with both router conventions: same experts, weights equal to rounding, captures named as the goldens', async () => {
    const w = await loadReferenceWeights((await open()).description as TargetDescription);
    const prompt = [3, 17, 42, 5, 9, 11];
    const a = referenceForward(w, prompt, { captures: true, numerics: 'exact', router: { order: 'mlx' } });
    const b = referenceForward(w, prompt, {
      captures: true,
      numerics: 'exact',
      router: { order: 'transformers', scaleProduct: 'transformers' },
    });
    for (let i = 0; i < L; i++) {
      expect(a.acts!.get(`act.router_experts.${i}`)).toEqual(b.acts!.get(`act.router_experts.${i}`));
      const wa = a.acts!.get(`act.router_weights.${i}`)!;
      const wb = b.acts!.get(`act.router_weights.${i}`)!;
      for (let j = 0; j < wa.length; j++) expect(Math.abs(wa[j] - wb[j])).toBeLessThan(1e-12);
      expect(a.acts!.get(`act.experts.${i}`)!.length).toBe(prompt.length * H);
      expect(a.acts!.get(`act.router_scores.${i}`)!.length).toBe(prompt.length * E);
    }
    let d = 0;
    for (let j = 0; j < a.logits.length; j++) d = Math.max(d, Math.abs(a.logits[j] - b.logits[j]));
    expect(d).toBeLessThan(1e-9);
  });
});
