import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { bytesSource, type ByteSource } from '../../src/format/bytesource.ts';
import {
  attachQwen35Drafter,
  openQwen35Checkpoint,
  openQwen35Drafter,
  qwenMtpHeadText,
} from '../../src/format/qwen3_5/index.ts';
import { nodeFolderSources } from '../../src/node/file-source.ts';
import { asSources, splitQwenDrafter } from '../support/qwen-drafter-folder.ts';
import {
  QWEN_SYNTH,
  qwenSynthConfig,
  qwenSynthFiles,
  qwenSynthTensors,
  safetensorsBytes,
  type QwenSynthGeometry,
} from '../support/qwen-synth.ts';
import { formatError } from '../support/refusal.ts';

/**
 * Split Qwen3.5 MTP drafter folders (src/format/qwen3_5/drafter.ts, docs/QWEN35.md section 8): mlx-vlm's
 * qwen3_5_mtp layout opens and its head replaces the target's; every other layout and every misfit is refused
 * with the file, the tensor or key, and what was expected.
 */
type Cfg = Record<string, unknown> & { text_config: Record<string, unknown> };
type Tensors = Map<string, { shape: number[]; data: Float64Array }>;

interface DrafterOptions {
  geometry?: Partial<QwenSynthGeometry>;
  /** The head's tensors as written (names without mtp.). */
  editTensors?: (t: Tensors) => void;
  editConfig?: (c: Cfg) => void;
}

/** A synthetic drafter folder in mlx-vlm's layout (dense F32, as qwen-synth writes). */
function drafterFiles(o: DrafterOptions = {}): ByteSource[] {
  const g = { ...QWEN_SYNTH, ...o.geometry };
  const head: Tensors = new Map(
    [...qwenSynthTensors(g, 5, true)].filter(([k]) => k.startsWith('mtp.')).map(([k, v]) => [k.slice(4), v]),
  );
  o.editTensors?.(head);
  const c: Cfg = {
    block_size: 3,
    model_type: 'qwen3_5_mtp',
    text_config: (qwenSynthConfig(g) as Cfg).text_config,
    tie_word_embeddings: false,
  };
  o.editConfig?.(c);
  return [
    bytesSource('config.json', new TextEncoder().encode(JSON.stringify(c))),
    bytesSource('model.safetensors', safetensorsBytes(head)),
  ];
}

async function target(withMtp: boolean) {
  return openQwen35Checkpoint(qwenSynthFiles(QWEN_SYNTH, { withMtp }), 't');
}

describe('split Qwen3.5 MTP drafter folder (mlx-vlm qwen3_5_mtp)', () => {
  it('opens, and its head drafts for a target without mtp.* and in place of a target own head', async () => {
    const dr = await openQwen35Drafter(drafterFiles(), 'Qwen-MTP');
    expect(dr).toMatchObject({ role: 'drafter', blockSize: 3, configFile: 'config.json' });
    expect(dr.config.hidden).toBe(QWEN_SYNTH.hidden);

    const bare = await target(false);
    expect(bare.description.mtp).toBeNull();
    const d = attachQwen35Drafter(bare.description, bare.label, dr);
    expect(d.mtp).toMatchObject({ source: 'drafter', label: 'Qwen-MTP' });
    expect(d.mtp!.fc).toMatchObject({ kind: 'dense', outFeatures: 32, inFeatures: 64 });
    expect(d.mtp!.layer.qProj.name).toBe('layers.0.self_attn.q_proj');
    expect(d.mtpUnavailable).toBeNull();
    expect(d.layers).toBe(bare.description.layers);
    expect(qwenMtpHeadText(d, 't', false)).toBe(
      'the split MTP drafter Qwen-MTP drafts (t has no usable mtp.* head of its own)',
    );

    const own = await target(true);
    expect(qwenMtpHeadText(own.description, 't', false)).toBe("t's own mtp.* head drafts");
    const replaced = attachQwen35Drafter(own.description, own.label, dr);
    expect(replaced.mtp!.source).toBe('drafter');
    expect(replaced.mtp!.fc.kind === 'dense' && replaced.mtp!.fc.weight.file.name).toBe('model.safetensors');
    expect(qwenMtpHeadText(replaced, 't', true)).toMatch(/given as --draft, it replaces t's own mtp.\* head/);
  });

  it("qwen-tiny's head split as mlx-vlm does: 4-bit with the source's quantization, same tensors as in the target", async () => {
    const dir = path.resolve(process.cwd(), 'test/fixtures/qwen-tiny/target');
    const files = await nodeFolderSources(dir);
    const { drafter, bareTarget } = await splitQwenDrafter(files);
    const dr = await openQwen35Drafter(asSources(drafter), 'qwen-tiny-MTP');
    expect(dr.tensors.size).toBe(31); // 15 head tensors, 8 of them linears with scales and biases
    const own = (await openQwen35Checkpoint(files, 'qwen-tiny')).description.mtp!;
    const bare = await openQwen35Checkpoint(asSources(bareTarget), 'bare');
    const head = attachQwen35Drafter(bare.description, bare.label, dr).mtp!;
    expect(head.fc).toMatchObject({ kind: 'affine', bits: 4, groupSize: 64, outFeatures: 128, inFeatures: 256 });
    const shapes = (h: typeof head) =>
      [h.preFcNormEmbedding, h.preFcNormHidden, h.norm, h.layer.qNorm, h.layer.kNorm].map((t) => [
        t.dtype,
        t.shape,
        t.byteLength,
      ]);
    expect(shapes(head)).toEqual(shapes(own));
  });

  it('refuses the HF layout: mtp.-prefixed names in a drafter folder, and a bare mtp.safetensors', async () => {
    const prefixed = drafterFiles({ editTensors: (t) => renameAll(t, (n) => `mtp.${n}`) });
    expect((await formatError(openQwen35Drafter(prefixed, 'hf'))).message).toMatch(
      /^hf: model.safetensors names the head's tensors with the mtp. prefix \("mtp.pre_fc_norm_embedding.weight", 14 more\), the HF checkpoint's layout, whose RMSNorm weights are zero-centred .*mlx_vlm.speculative.drafters.qwen3_5_mtp.split/,
    );
    const head: Tensors = new Map([...qwenSynthTensors(QWEN_SYNTH, 5, true)].filter(([k]) => k.startsWith('mtp.')));
    const bare = [bytesSource('mtp.safetensors', safetensorsBytes(head))];
    const e = await formatError(openQwen35Drafter(bare, 'lifted'));
    expect(e.message).toMatch(
      /^lifted: no config.json, and mtp.safetensors holds the head as named in the HF checkpoint \("mtp.pre_fc_norm_embedding.weight": mtp.\* names, zero-centred norms\)/,
    );
    expect(e.subject).toBe('mtp.pre_fc_norm_embedding.weight');
  });

  it('refuses configs that are not a qwen3_5_mtp drafter, with the reason', async () => {
    const cases: [(c: Cfg) => void, RegExp][] = [
      [
        (c) => (c.model_type = 'qwen3_5'),
        /^d: config.json declares model_type "qwen3_5", a Qwen3.5 target, not a split MTP drafter .*given as --target, without --draft/,
      ],
      [
        (c) => (c.model_type = 'gemma4_assistant'),
        /^d: config.json declares model_type "gemma4_assistant", not a Qwen3.5 MTP drafter \(expected "qwen3_5_mtp"/,
      ],
      [(c) => delete (c as Record<string, unknown>).text_config, /^d: config.json has no "text_config" object/],
      [
        (c) => (c.text_config.num_experts = 8),
        /config.json: mixture-of-experts blocks \(qwen3_5_moe\) \(text_config.num_experts = 8\); this variant is not supported yet/,
      ],
    ];
    for (const [edit, msg] of cases)
      expect((await formatError(openQwen35Drafter(drafterFiles({ editConfig: edit }), 'd'))).message).toMatch(msg);
    const noHead = drafterFiles({ editTensors: (t) => t.delete('fc.weight') });
    expect((await formatError(openQwen35Drafter(noHead, 'd'))).message).toBe(
      'd: model.safetensors has no "fc.weight", so it holds no Qwen3.5 MTP head (expected fc, pre_fc_norm_embedding, pre_fc_norm_hidden, norm and layers.0.*)',
    );
  });

  it('a drafter of another hidden size: the file, the tensor, found and expected, and the config keys', async () => {
    const t = await target(false);
    const dr = await openQwen35Drafter(drafterFiles({ geometry: { hidden: 64 } }), 'wide');
    const e = await formatError(() => attachQwen35Drafter(t.description, t.label, dr));
    expect(e.message).toBe(
      'wide: the split MTP drafter does not fit target t: model.safetensors: tensor "pre_fc_norm_embedding.weight" has shape [64], expected [32] (MTP embedding norm weight); and config.json: text_config.hidden_size is 64, expected 32 (the target\'s)',
    );
    expect([e.file, e.subject]).toEqual(['model.safetensors', 'pre_fc_norm_embedding.weight']);
  });

  it('misfits only the config shows (vocab, eps, RoPE), a missing tensor, a stray one, two MTP layers', async () => {
    const t = await target(false);
    const attach = async (o: DrafterOptions) =>
      (
        await formatError(async () =>
          attachQwen35Drafter(t.description, t.label, await openQwen35Drafter(drafterFiles(o), 'd')),
        )
      ).message;
    expect(
      await attach({
        editConfig: (c) => {
          c.text_config.vocab_size = 4096;
          c.text_config.rms_norm_eps = 1e-5;
          (c.text_config.rope_parameters as Record<string, unknown>).rope_theta = 5e6;
        },
      }),
    ).toBe(
      "d: the split MTP drafter does not fit target t: config.json: text_config.vocab_size is 4096, expected 96 (the target's); config.json: text_config.rms_norm_eps is 0.00001, expected 0.000001 (the target's); config.json: text_config.rope_theta is 5000000, expected 10000000 (the target's)",
    );
    expect(await attach({ editTensors: (x) => x.delete('layers.0.self_attn.k_norm.weight') })).toBe(
      'd: the split MTP drafter does not fit target t: missing tensor "layers.0.self_attn.k_norm.weight" (k norm weight of shape [16]) in model.safetensors',
    );
    expect(
      await attach({ editTensors: (x) => x.set('layers.1.input_layernorm.weight', x.get('norm.weight')!) }),
    ).toMatch(
      /^d: the split MTP drafter does not fit target t: model.safetensors: 1 unexpected language-model tensor that this qwen3_5 MTP drafter description does not use: "layers.1.input_layernorm.weight"/,
    );
    expect(await attach({ editConfig: (c) => (c.text_config.mtp_num_hidden_layers = 2) })).toMatch(
      /^d: the split MTP drafter does not fit target t: d: config.json sets mtp_num_hidden_layers = 2; only one MTP layer is supported yet/,
    );
  });

  it('a quantized head needs its quantization block', async () => {
    const dir = path.resolve(process.cwd(), 'test/fixtures/qwen-tiny/target');
    const files = await nodeFolderSources(dir);
    const { drafter, bareTarget } = await splitQwenDrafter(files, {
      editConfig: (c) => {
        delete c.quantization;
        delete c.quantization_config;
      },
    });
    const bare = await openQwen35Checkpoint(asSources(bareTarget), 'bare');
    const dr = await openQwen35Drafter(asSources(drafter), 'q');
    expect((await formatError(() => attachQwen35Drafter(bare.description, bare.label, dr))).message).toBe(
      'q: the split MTP drafter does not fit target bare: model.safetensors: "fc.scales" exists (quantized weights) but config.json has no "quantization" block',
    );
  });
});

function renameAll(t: Tensors, f: (n: string) => string): void {
  for (const [k, v] of [...t]) {
    t.delete(k);
    t.set(f(k), v);
  }
}
