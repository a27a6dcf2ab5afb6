import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openQwen35Checkpoint, parseQwen35Config } from '../../src/format/qwen3_5/index.ts';
import { nodeFolderSources } from '../../src/node/file-source.ts';
import { QWEN_SYNTH, qwenSynthConfig, qwenSynthFiles } from '../support/qwen-synth.ts';
import { formatError } from '../support/refusal.ts';

type Cfg = Record<string, unknown> & { text_config: Record<string, unknown> };
const cfg = () => qwenSynthConfig(QWEN_SYNTH) as Cfg;

describe('Qwen3.5 config.json', () => {
  it('reads the geometry of both layer types, rope and the MTP fields', () => {
    const c = parseQwen35Config(cfg());
    expect(c.layerTypes.join(',')).toBe('linear,full,linear,full');
    expect(c.attention).toMatchObject({
      numHeads: 4,
      numKvHeads: 2,
      headDim: 16,
      rope: { theta: 1e7, partialRotary: 0.25, rotaryDim: 4 },
    });
    expect(c.linear).toEqual({
      numKeyHeads: 2,
      numValueHeads: 4,
      keyHeadDim: 8,
      valueHeadDim: 8,
      convKernel: 4,
      keyDim: 16,
      valueDim: 32,
      convDim: 64,
    });
    expect(c.mtp).toEqual({ numLayers: 1, dedicatedEmbeddings: false });
    expect(c.tieWordEmbeddings).toBe(false);
  });

  it('derives layer types from full_attention_interval when layer_types is absent; text-only root layout', () => {
    const c = cfg();
    const tc = { ...c.text_config };
    delete tc.layer_types;
    tc.full_attention_interval = 4;
    tc.num_hidden_layers = 8;
    expect(
      parseQwen35Config(tc)
        .layerTypes.map((t) => t[0])
        .join(''),
    ).toBe('lllflllf');
  });

  it('refuses an unknown layer type, naming the entry', () => {
    const c = cfg();
    (c.text_config.layer_types as string[])[2] = 'mamba';
    expect(() => parseQwen35Config(c)).toThrow(
      'config.json: text_config.layer_types[2] is "mamba", an unknown layer type (expected "linear_attention" or "full_attention")',
    );
  });

  it('refuses MoE, biased attention, other activations, scaled RoPE', () => {
    const moe = cfg();
    moe.text_config.num_experts = 64;
    expect(() => parseQwen35Config(moe)).toThrow(/mixture-of-experts .*num_experts = 64/);
    expect(() => parseQwen35Config({ ...cfg(), model_type: 'qwen3_5_moe' })).toThrow(
      /mixture-of-experts\) is not supported/,
    );
    const bias = cfg();
    bias.text_config.attention_bias = true;
    expect(() => parseQwen35Config(bias)).toThrow(/attention_bias = true/);
    const act = cfg();
    act.text_config.hidden_act = 'gelu';
    expect(() => parseQwen35Config(act)).toThrow(/hidden_act = "gelu"/);
    const yarn = cfg();
    yarn.text_config.rope_parameters = { rope_type: 'yarn', factor: 4 };
    expect(() => parseQwen35Config(yarn)).toThrow(/rope_type "yarn" \(scaled RoPE\)/);
    expect(() => parseQwen35Config({ model_type: 'gemma4' })).toThrow(/not a Qwen3.5 target/);
  });
});

describe('Qwen3.5 checkpoint', () => {
  it('describes every layer of an MLX-layout checkpoint with its MTP head', async () => {
    const ck = await openQwen35Checkpoint(qwenSynthFiles(), 'synth');
    const d = ck.description;
    expect(d.layers.map((l) => l.type).join(',')).toBe('linear,full,linear,full');
    const l0 = d.layers[0];
    if (l0.type !== 'linear') throw new Error('layer 0');
    expect(l0.inProjQkv).toMatchObject({ kind: 'dense', outFeatures: 64, inFeatures: 32 });
    expect(l0.conv.shape).toEqual([64, 4, 1]);
    expect(l0.gatedNorm.shape).toEqual([8]);
    const l1 = d.layers[1];
    if (l1.type !== 'full') throw new Error('layer 1');
    expect(l1.qProj.outFeatures).toBe(2 * 4 * 16);
    expect(d.lmHead).not.toBe(d.embed);
    expect(d.mtpUnavailable).toBeNull();
    expect(d.mtp).toMatchObject({ source: 'target', fc: { outFeatures: 32, inFeatures: 64 } });
    expect(d.mtp!.layer.qProj.weight.name).toBe('mtp.layers.0.self_attn.q_proj.weight');
  });

  it('loads without mtp.* and says why MTP drafting is unavailable', async () => {
    const ck = await openQwen35Checkpoint(qwenSynthFiles(QWEN_SYNTH, { withMtp: false }), 'no-mtp');
    expect(ck.description.mtp).toBeNull();
    expect(ck.description.mtpUnavailable).toMatch(
      /^no-mtp: no mtp\.\* tensors in model\.safetensors, so MTP drafting with the target's own head is unavailable .*oracle drafts, and the probe and the trace do not need drafts$/,
    );
  });

  it('accepts language_model.mtp.* names and a tied LM head', async () => {
    const files = qwenSynthFiles(
      { ...QWEN_SYNTH, tie: true },
      {
        editTensors: (t) => {
          for (const [k, v] of [...t]) if (k.startsWith('mtp.')) t.delete(k), t.set(`language_model.${k}`, v);
        },
      },
    );
    const d = (await openQwen35Checkpoint(files)).description;
    expect(d.lmHead).toBe(d.embed);
    expect(d.mtp?.fc.weight.name).toBe('language_model.mtp.fc.weight');
  });

  it('refuses a conv kernel that disagrees with linear_conv_kernel_dim', async () => {
    const e = await formatError(
      openQwen35Checkpoint(
        qwenSynthFiles(QWEN_SYNTH, { editConfig: (c) => ((c as Cfg).text_config.linear_conv_kernel_dim = 3) }),
      ),
    );
    expect(e.message).toBe(
      'checkpoint: model.safetensors: tensor "language_model.model.layers.0.linear_attn.conv1d.weight" has a conv kernel of 4 taps (shape [64,4,1]) but config.json says linear_conv_kernel_dim = 3 (expected [64,3,1]); the checkpoint and its config disagree',
    );
    expect(e.subject).toBe('language_model.model.layers.0.linear_attn.conv1d.weight');
  });

  it('refuses a transformers-layout conv weight with the reason', async () => {
    const files = qwenSynthFiles(QWEN_SYNTH, {
      editTensors: (t) => {
        const n = 'language_model.model.layers.2.linear_attn.conv1d.weight';
        t.set(n, { ...t.get(n)!, shape: [64, 1, 4] });
      },
    });
    expect((await formatError(openQwen35Checkpoint(files))).message).toMatch(
      /layers\.2\.linear_attn\.conv1d\.weight" has shape \[64,1,4\], transformers' layout \[C, 1, K\]; .*mlx_lm\.convert/,
    );
  });

  it('names a missing tensor, its expected shape and the file set', async () => {
    const files = qwenSynthFiles(QWEN_SYNTH, {
      editTensors: (t) => t.delete('language_model.model.layers.0.linear_attn.A_log'),
    });
    expect((await formatError(openQwen35Checkpoint(files))).message).toBe(
      'checkpoint: missing tensor "layers.0.linear_attn.A_log" (A_log of shape [4]) in model.safetensors',
    );
    const noHead = qwenSynthFiles(QWEN_SYNTH, { editTensors: (t) => t.delete('mtp.norm.weight') });
    expect((await formatError(openQwen35Checkpoint(noHead))).message).toBe(
      'checkpoint: missing tensor "mtp.norm.weight" (MTP final norm weight of shape [32]) in model.safetensors',
    );
  });

  it('names a tensor of the wrong shape and what was expected', async () => {
    const files = qwenSynthFiles(QWEN_SYNTH, {
      editTensors: (t) => {
        const n = 'language_model.model.layers.1.self_attn.q_proj.weight';
        const w = t.get(n)!;
        t.set(n, { shape: [64, 32], data: w.data.subarray(0, 64 * 32) });
      },
    });
    expect((await formatError(openQwen35Checkpoint(files))).message).toBe(
      'checkpoint: model.safetensors: tensor "language_model.model.layers.1.self_attn.q_proj.weight" has shape [64,32], expected [128,32] (dense weight of layers.1.self_attn.q_proj)',
    );
  });

  it('says when layer_types and the stored layers disagree', async () => {
    const files = qwenSynthFiles(QWEN_SYNTH, {
      editConfig: (c) => {
        const tc = (c as Cfg).text_config;
        tc.layer_types = ['linear_attention', 'linear_attention', 'linear_attention', 'full_attention'];
        // layer_types alone (as transformers writes it): beside full_attention_interval 2, the config would be
        // refused first for disagreeing with itself (bad-input-families.test.ts)
        delete tc.full_attention_interval;
      },
    });
    expect((await formatError(openQwen35Checkpoint(files))).message).toMatch(
      /^checkpoint: layer 1 is "linear_attention" in config.json but model.safetensors has a full-attention layer there/,
    );
  });

  it('refuses leftovers (a second MTP layer) and stray tensors', async () => {
    const files = qwenSynthFiles(QWEN_SYNTH, {
      editTensors: (t) => t.set('mtp.layers.1.input_layernorm.weight', { shape: [32], data: new Float64Array(32) }),
    });
    expect((await formatError(openQwen35Checkpoint(files))).message).toMatch(
      /1 unexpected language-model tensor that this qwen3_5 description does not use: "mtp.layers.1.input_layernorm.weight"/,
    );
  });

  it('says why MTP drafting is unavailable for heads it cannot run', async () => {
    const files = qwenSynthFiles(QWEN_SYNTH, { editConfig: (c) => ((c as Cfg).text_config.mtp_num_hidden_layers = 2) });
    const d = (await openQwen35Checkpoint(files, 'two')).description;
    expect(d.mtp).toBeNull();
    expect(d.mtpUnavailable).toMatch(/mtp_num_hidden_layers = 2; only one MTP layer is supported yet/);
  });
});

const FIXTURE = path.resolve(process.cwd(), 'test/fixtures/qwen-tiny');
describe('qwen-tiny fixture (tools/make_qwen_fixtures.py)', () => {
  it('opens as 4-bit MLX with its MTP head', async () => {
    const ck = await openQwen35Checkpoint(await nodeFolderSources(path.join(FIXTURE, 'target')), 'qwen-tiny');
    const d = ck.description;
    expect(d.layers.map((l) => l.type[0]).join('')).toBe('llfllf');
    expect(d.embed).toMatchObject({ kind: 'affine', bits: 4, groupSize: 64 });
    expect(d.lmHead).toMatchObject({ kind: 'affine', bits: 4 });
    expect(d.mtp?.fc).toMatchObject({ kind: 'affine', outFeatures: 128, inFeatures: 256 });
    const l0 = d.layers[0];
    expect(l0.type === 'linear' && l0.aLog.dtype).toBe('F32');
  });
});
