/**
 * The bad-input suite of the families added after dense Gemma 4 (bad-input.test.ts covers tiny-a and the
 * format in general): Qwen3.5 (qwen-tiny, Gated DeltaNet layers and an MTP head), Gemma 4 E-series
 * (gemma4-e-tiny, per-layer inputs and a centroid-head assistant) and the 26B-A4B MoE (gemma4-moe-tiny,
 * router and experts). Each case corrupts a copy of the fixture folder on disk, one fault at a time, and opens
 * it the way the command line does (src/cli/qwen-target.ts, src/cli/load-models.ts), asserting the message:
 * which folder or file, which tensor or key, and what was expected.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cp, mkdtemp, readFile, rm, stat, truncate, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { probe } from '../../src/cli/commands/probe.ts';
import { openGemmaDir, openGemmaPair } from '../../src/cli/load-models.ts';
import { openQwenTargetDir } from '../../src/cli/qwen-target.ts';
import { nodeFolderSources } from '../../src/node/file-source.ts';
import { GEMMA4_E_TINY, GEMMA4_MOE_TINY } from '../support/fixtures.ts';
import { splitQwenDrafter, writeFolder } from '../support/qwen-drafter-folder.ts';
import { refusal as formatRefusal } from '../support/refusal.ts';

const QWEN_TINY = path.resolve(process.cwd(), 'test/fixtures/qwen-tiny');
const LM = 'language_model.model';

let tmp: string;
let cases = 0;
/** The qwen-tiny split MTP drafter folder (mlx-vlm's qwen3_5_mtp layout), written once. */
let qwenDrafter: string;
beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'ringside-bad-families-'));
  const { drafter } = await splitQwenDrafter(await nodeFolderSources(path.join(QWEN_TINY, 'target')));
  qwenDrafter = writeFolder(path.join(tmp, 'qwen-drafter'), drafter);
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

/**
 * The refusal's message after the folder the command line puts first (src/cli/load-models.ts namingFolder: the path
 * as typed, since every fixture names its folders target/ and assistant/), which must be there.
 */
async function refusal(p: Promise<unknown> | (() => unknown)): Promise<string> {
  const message = await formatRefusal(p);
  const head = /^(\/[^\s:]+): /.exec(message);
  expect(head, message).not.toBeNull();
  return message.slice(head![0].length);
}

/** The folder at the head of a refusal's message. */
async function refusedFolder(p: Promise<unknown> | (() => unknown)): Promise<string> {
  return /^(\/[^\s:]+): /.exec(await formatRefusal(p))?.[1] ?? '';
}

/** A fresh copy of a checkpoint folder in the temp dir, named like the original (labels are folder names). */
async function copy(src: string): Promise<string> {
  const dir = path.join(tmp, `case-${cases++}`, path.basename(src));
  await cp(src, dir, { recursive: true });
  return dir;
}

interface HeaderEntry {
  dtype: string;
  shape: number[];
  data_offsets: [number, number];
}
type Header = Record<string, HeaderEntry>;

/**
 * Rewrites model.safetensors' header JSON (and its length); the data section is kept up to the new last tensor's
 * end, so offsets stay valid and no bytes trail it (those are refused on their own: safetensors.ts).
 */
async function editHeader(dir: string, f: (h: Header) => void): Promise<string> {
  const file = path.join(dir, 'model.safetensors');
  const b = await readFile(file);
  const n = Number(b.readBigUInt64LE(0));
  const h = JSON.parse(b.subarray(8, 8 + n).toString('utf8')) as Header;
  f(h);
  const end = Math.max(...Object.entries(h).map(([k, e]) => (k === '__metadata__' ? 0 : e.data_offsets[1])));
  const json = Buffer.from(JSON.stringify(h), 'utf8');
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.byteLength));
  await writeFile(file, Buffer.concat([len, json, b.subarray(8 + n, 8 + n + end)]));
  return dir;
}
const without =
  (...names: string[]) =>
  (h: Header) => {
    for (const n of names) {
      expect(h[n], n).toBeDefined();
      delete h[n];
    }
  };
/** A new shape of no more bytes than the old (the entry's end offset moves in, leaving a gap). */
const reshaped = (name: string, shape: number[]) => (h: Header) => {
  const e = h[name];
  const bytes = (e.data_offsets[1] - e.data_offsets[0]) / e.shape.reduce((a, d) => a * d, 1);
  const size = shape.reduce((a, d) => a * d, 1) * bytes;
  expect(e.data_offsets[0] + size).toBeLessThanOrEqual(e.data_offsets[1]);
  e.shape = shape;
  e.data_offsets = [e.data_offsets[0], e.data_offsets[0] + size];
};

/** Edits config.json of a folder (the text_config of targets and assistants alike, or the root). */
async function editConfig(dir: string, f: (c: any) => void): Promise<string> {
  const file = path.join(dir, 'config.json');
  const c = JSON.parse(await readFile(file, 'utf8'));
  f(c);
  await writeFile(file, JSON.stringify(c));
  return dir;
}

/** Cuts model.safetensors in the middle of its data section; returns the header's size and the data left. */
async function truncateData(dir: string): Promise<{ headerBytes: number; dataLeft: number }> {
  const file = path.join(dir, 'model.safetensors');
  const b = await readFile(file);
  const headerBytes = 8 + Number(b.readBigUInt64LE(0));
  const dataLeft = Math.floor((b.byteLength - headerBytes) / 2);
  await truncate(file, headerBytes + dataLeft);
  return { headerBytes, dataLeft };
}

/** Sets the 8-byte header length to the file's own size: the header would run past the end. */
async function headerPastEnd(dir: string): Promise<number> {
  const file = path.join(dir, 'model.safetensors');
  const b = await readFile(file);
  b.writeBigUInt64LE(BigInt(b.byteLength));
  await writeFile(file, b);
  return (await stat(file)).size;
}

/** The first tensor (in header order) whose data ends past `dataLeft`: the one a truncated file's check names. */
async function firstCut(dir: string, dataLeft: number): Promise<[string, HeaderEntry]> {
  const b = await readFile(path.join(dir, 'model.safetensors'));
  const h = JSON.parse(b.subarray(8, 8 + Number(b.readBigUInt64LE(0))).toString('utf8')) as Header;
  return Object.entries(h).find(([k, e]) => k !== '__metadata__' && e.data_offsets[1] > dataLeft)!;
}

async function expectTruncationRefused(dir: string, open: () => Promise<unknown>): Promise<void> {
  const { headerBytes, dataLeft } = await truncateData(dir);
  const [name, e] = await firstCut(dir, dataLeft);
  expect(await refusal(open())).toBe(
    `model.safetensors: tensor "${name}" data_offsets [${e.data_offsets[0]}, ${e.data_offsets[1]}] run past the end of the data section (${dataLeft} bytes after the ${headerBytes}-byte header)`,
  );
}

async function expectHeaderPastEndRefused(dir: string, open: () => Promise<unknown>): Promise<void> {
  const size = await headerPastEnd(dir);
  expect(await refusal(open())).toBe(
    `model.safetensors: safetensors header length ${size} runs past the end of the file (8 + ${size} > ${size} bytes)`,
  );
}

describe('bad input: Qwen3.5 (qwen-tiny target, its split MTP drafter)', () => {
  const target = () => copy(path.join(QWEN_TINY, 'target'));
  const openQwen = (dir: string, draft?: string) => openQwenTargetDir(dir, draft);

  it('a target or drafter file cut short, or whose header length runs past the end', async () => {
    const t = await target();
    await expectTruncationRefused(t, () => openQwen(t));
    const t2 = await target();
    await expectHeaderPastEndRefused(t2, () => openQwen(t2));
    const d = await copy(qwenDrafter);
    await expectTruncationRefused(d, () => openQwen(path.join(QWEN_TINY, 'target'), d));
    const d2 = await copy(qwenDrafter);
    await expectHeaderPastEndRefused(d2, () => openQwen(path.join(QWEN_TINY, 'target'), d2));
  });

  it('a Gated DeltaNet or MTP head tensor missing', async () => {
    const missing = async (...names: string[]) =>
      refusal(openQwen(await editHeader(await target(), without(...names))));
    expect(await missing(`${LM}.layers.0.linear_attn.in_proj_qkv.weight`)).toBe(
      'missing tensor "layers.0.linear_attn.in_proj_qkv.weight" (packed U32 weight; "layers.0.linear_attn.in_proj_qkv.scales" exists) in model.safetensors',
    );
    expect(await missing(`${LM}.layers.3.linear_attn.A_log`)).toBe(
      'missing tensor "layers.3.linear_attn.A_log" (A_log of shape [4]) in model.safetensors',
    );
    expect(await missing(`${LM}.layers.1.linear_attn.conv1d.weight`)).toBe(
      'missing tensor "layers.1.linear_attn.conv1d.weight" (depthwise conv1d weight, 4 taps of shape [256,4,1]) in model.safetensors',
    );
    expect(await missing('mtp.fc.weight')).toBe(
      'missing tensor "mtp.fc.weight" (packed U32 weight; "mtp.fc.scales" exists) in model.safetensors',
    );
    expect(await missing('mtp.norm.weight')).toBe(
      'missing tensor "mtp.norm.weight" (MTP final norm weight of shape [128]) in model.safetensors',
    );
    // the scales of a packed linear: before, the packed codes were read as a dense weight of the wrong dtype
    expect(await missing(`${LM}.layers.0.linear_attn.out_proj.scales`)).toBe(
      'missing tensor "layers.0.linear_attn.out_proj.scales" (scales of layers.0.linear_attn.out_proj, group size 64 of shape [128,2]; "layers.0.linear_attn.out_proj.weight" holds packed U32 codes) in model.safetensors',
    );
  });

  it('a Gated DeltaNet or MTP head tensor of the wrong shape', async () => {
    const shaped = async (name: string, shape: number[]) =>
      refusal(openQwen(await editHeader(await target(), reshaped(name, shape))));
    expect(await shaped(`${LM}.layers.0.linear_attn.A_log`, [2, 2])).toBe(
      `model.safetensors: tensor "${LM}.layers.0.linear_attn.A_log" has shape [2,2], expected [4] (A_log)`,
    );
    expect(await shaped(`${LM}.layers.0.linear_attn.dt_bias`, [2])).toBe(
      `model.safetensors: tensor "${LM}.layers.0.linear_attn.dt_bias" has shape [2], expected [4] (dt_bias)`,
    );
    expect(await shaped(`${LM}.layers.0.linear_attn.conv1d.weight`, [128, 8, 1])).toBe(
      `model.safetensors: tensor "${LM}.layers.0.linear_attn.conv1d.weight" has shape [128,8,1], expected [256,4,1] (depthwise conv1d weight, 4 taps)`,
    );
    expect(await shaped(`${LM}.layers.0.linear_attn.in_proj_a.weight`, [2, 32])).toBe(
      `model.safetensors: tensor "${LM}.layers.0.linear_attn.in_proj_a.weight" has shape [2,32], expected [4,16] (4 x 128 at 4 bits)`,
    );
    expect(await shaped('mtp.fc.weight', [256, 16])).toBe(
      'model.safetensors: tensor "mtp.fc.weight" has shape [256,16], expected [128,32] (128 x 256 at 4 bits)',
    );
  });

  it('linear_num_value_heads missing or absurd', async () => {
    const cfg = async (f: (tc: any) => void) =>
      refusal(openQwen(await editConfig(await target(), (c) => f(c.text_config))));
    expect(
      await cfg((tc) => {
        delete tc.linear_num_value_heads;
      }),
    ).toBe('config.json: text_config.linear_num_value_heads must be a positive integer, found nothing');
    expect(
      await cfg((tc) => {
        tc.linear_num_value_heads = 0;
      }),
    ).toBe('config.json: text_config.linear_num_value_heads must be a positive integer, found 0');
    expect(
      await cfg((tc) => {
        tc.linear_num_value_heads = 3;
      }),
    ).toBe('config.json: text_config.linear_num_value_heads 3 is not a multiple of linear_num_key_heads 2');
    expect(
      await cfg((tc) => {
        tc.linear_num_value_heads = 8;
      }),
    ).toBe(
      `model.safetensors: tensor "${LM}.layers.0.linear_attn.in_proj_qkv.weight" has shape [256,16], expected [384,16] (384 x 128 at 4 bits)`,
    );
  });

  it('full_attention_interval of 0, or disagreeing with layer_types (mlx-lm reads the one, transformers the other)', async () => {
    const cfg = async (f: (tc: any) => void) => openQwen(await editConfig(await target(), (c) => f(c.text_config)));
    // before: both opened, and the probe ran on layer_types alone
    expect(
      await refusal(
        cfg((tc) => {
          tc.full_attention_interval = 0;
        }),
      ),
    ).toBe('config.json: text_config.full_attention_interval must be a positive integer, found 0');
    expect(
      await refusal(
        cfg((tc) => {
          tc.full_attention_interval = 4;
        }),
      ),
    ).toBe(
      'config.json: text_config.layer_types[2] is "full_attention" but full_attention_interval 4 makes layer 2 linear attention (mlx-lm builds its layers from full_attention_interval, transformers from layer_types; the two must agree)',
    );
    // without layer_types the interval decides, and the tensors must follow it
    expect(
      await refusal(
        cfg((tc) => {
          delete tc.layer_types;
          tc.full_attention_interval = 7;
        }),
      ),
    ).toBe(
      'layer 2 is "linear_attention" in config.json but model.safetensors has a full-attention layer there (layers.2.self_attn.*); check layer_types / full_attention_interval',
    );
    // either one alone, agreeing with the tensors, opens
    for (const drop of ['layer_types', 'full_attention_interval']) {
      const ck = await cfg((tc) => {
        delete tc[drop];
      });
      expect(ck.description.config.layerTypes.join(',')).toBe('linear,linear,full,linear,linear,full');
    }
  });

  it('a split drafter with a head tensor missing or of the wrong shape', async () => {
    const t = path.join(QWEN_TINY, 'target');
    const d = await editHeader(await copy(qwenDrafter), without('layers.0.self_attn.q_norm.weight'));
    expect(await refusedFolder(openQwen(t, d))).toBe(d);
    expect(await refusal(openQwen(t, d))).toBe(
      'the split MTP drafter does not fit target target: missing tensor "layers.0.self_attn.q_norm.weight" (q norm weight of shape [64]) in model.safetensors',
    );
    const d2 = await editHeader(await copy(qwenDrafter), reshaped('fc.weight', [256, 16]));
    expect(await refusal(openQwen(t, d2))).toBe(
      'the split MTP drafter does not fit target target: model.safetensors: tensor "fc.weight" has shape [256,16], expected [128,32] (128 x 256 at 4 bits)',
    );
  });

  it('a Gemma 4 assistant or target given as the Qwen target --draft', async () => {
    const t = path.join(QWEN_TINY, 'target');
    for (const fixture of [GEMMA4_E_TINY, GEMMA4_MOE_TINY]) {
      expect(await refusedFolder(openQwen(t, path.join(fixture, 'assistant')))).toBe(path.join(fixture, 'assistant'));
      expect(await refusal(openQwen(t, path.join(fixture, 'assistant')))).toBe(
        'config.json declares model_type "gemma4_assistant", not a Qwen3.5 MTP drafter (expected "qwen3_5_mtp", as mlx-vlm\'s qwen3_5_mtp splitter writes)',
      );
    }
    expect(await refusal(openQwen(t, path.join(GEMMA4_E_TINY, 'target')))).toBe(
      'config.json declares model_type "gemma4", not a Qwen3.5 MTP drafter (expected "qwen3_5_mtp", as mlx-vlm\'s qwen3_5_mtp splitter writes)',
    );
  });
});

describe('bad input: Gemma 4 E-series (gemma4-e-tiny target and centroid-head assistant)', () => {
  const target = () => copy(path.join(GEMMA4_E_TINY, 'target'));
  const assistant = () => copy(path.join(GEMMA4_E_TINY, 'assistant'));
  const withAssistant = (t: string, a = path.join(GEMMA4_E_TINY, 'assistant')) => openGemmaPair(t, a);
  const forTarget = (a: string) => openGemmaPair(path.join(GEMMA4_E_TINY, 'target'), a);

  it('a target or assistant file cut short, or whose header length runs past the end', async () => {
    const t = await target();
    await expectTruncationRefused(t, () => withAssistant(t));
    const a = await assistant();
    await expectTruncationRefused(a, () => forTarget(a));
    const t2 = await target();
    await expectHeaderPastEndRefused(t2, () => withAssistant(t2));
    const a2 = await assistant();
    await expectHeaderPastEndRefused(a2, () => forTarget(a2));
  });

  it('a per-layer input tensor missing', async () => {
    const missing = async (...names: string[]) =>
      refusal(withAssistant(await editHeader(await target(), without(...names))));
    expect(await missing(`${LM}.embed_tokens_per_layer.weight`)).toBe(
      'missing tensor "embed_tokens_per_layer.weight" (packed U32 weight; "embed_tokens_per_layer.scales" exists) in model.safetensors',
    );
    expect(
      await missing(
        `${LM}.embed_tokens_per_layer.weight`,
        `${LM}.embed_tokens_per_layer.scales`,
        `${LM}.embed_tokens_per_layer.biases`,
      ),
    ).toBe(
      'missing tensor "embed_tokens_per_layer.weight" (dense weight of embed_tokens_per_layer of shape [512,640]) in model.safetensors',
    );
    expect(await missing(`${LM}.layers.3.per_layer_projection.weight`)).toBe(
      'missing tensor "layers.3.per_layer_projection.weight" (packed U32 weight; "layers.3.per_layer_projection.scales" exists) in model.safetensors',
    );
    expect(await missing(`${LM}.layers.7.per_layer_input_gate.weight`)).toBe(
      'missing tensor "layers.7.per_layer_input_gate.weight" (packed U32 weight; "layers.7.per_layer_input_gate.scales" exists) in model.safetensors',
    );
    expect(await missing(`${LM}.per_layer_projection_norm.weight`)).toBe(
      'missing tensor "per_layer_projection_norm.weight" (per-layer projection norm weight of shape [64]) in model.safetensors',
    );
    // before: 'tensor "...per_layer_model_projection.weight" should be F32, F16 or BF16 (dense weight ...) but is U32'
    expect(await missing(`${LM}.per_layer_model_projection.scales`)).toBe(
      'missing tensor "per_layer_model_projection.scales" (scales of per_layer_model_projection, group size 64 of shape [640,2]; "per_layer_model_projection.weight" holds packed U32 codes) in model.safetensors',
    );
    expect(await missing(`${LM}.per_layer_model_projection.weight`, `${LM}.per_layer_model_projection.scales`)).toBe(
      'missing tensor "per_layer_model_projection.scales" (scales of per_layer_model_projection; "per_layer_model_projection.biases" exists) in model.safetensors',
    );
  });

  it("the assistant's centroid head tensors missing", async () => {
    const missing = async (...names: string[]) =>
      refusal(forTarget(await editHeader(await assistant(), without(...names))));
    expect(await missing('masked_embedding.centroids.weight')).toBe(
      'missing tensor "masked_embedding.centroids.weight" (packed U32 weight; "masked_embedding.centroids.scales" exists) in model.safetensors',
    );
    expect(await missing('masked_embedding.token_ordering')).toBe(
      'missing tensor "masked_embedding.token_ordering" (the centroid head\'s token ordering, I32 or I64 of shape [512]) in model.safetensors',
    );
  });

  it('a per-layer input or centroid head tensor of the wrong shape', async () => {
    const t = async (name: string, shape: number[]) =>
      refusal(withAssistant(await editHeader(await target(), reshaped(name, shape))));
    const a = async (name: string, shape: number[]) =>
      refusal(forTarget(await editHeader(await assistant(), reshaped(name, shape))));
    expect(await t(`${LM}.embed_tokens_per_layer.weight`, [1024, 40])).toBe(
      `model.safetensors: tensor "${LM}.embed_tokens_per_layer.weight" has shape [1024,40], expected [512,80] (512 x 640 at 4 bits)`,
    );
    expect(await t(`${LM}.layers.0.per_layer_projection.weight`, [64, 16])).toBe(
      `model.safetensors: tensor "${LM}.layers.0.per_layer_projection.weight" has shape [64,16], expected [128,8] (128 x 64 at 4 bits)`,
    );
    expect(await a('masked_embedding.centroids.weight', [8, 16])).toBe(
      'model.safetensors: tensor "masked_embedding.centroids.weight" has shape [8,16], expected [16,8] (16 x 64 at 4 bits)',
    );
    expect(await a('masked_embedding.token_ordering', [256])).toBe(
      'model.safetensors: tensor "masked_embedding.token_ordering" has shape [256], expected [512] (the centroid head\'s token ordering)',
    );
  });

  it('hidden_size_per_layer_input or num_kv_shared_layers missing or absurd', async () => {
    const cfg = async (f: (tc: any) => void) =>
      refusal(withAssistant(await editConfig(await target(), (c) => f(c.text_config))));
    expect(
      await cfg((tc) => {
        delete tc.hidden_size_per_layer_input;
      }),
    ).toBe(
      'model.safetensors: the checkpoint has per-layer embeddings ("embed_tokens_per_layer") but config.json has no text_config.hidden_size_per_layer_input > 0 to say their width',
    );
    expect(
      await cfg((tc) => {
        tc.hidden_size_per_layer_input = 32;
      }),
    ).toBe(
      `model.safetensors: tensor "${LM}.layers.0.per_layer_input_gate.weight" has shape [64,16], expected [32,16] (32 x 128 at 4 bits)`,
    );
    expect(
      await cfg((tc) => {
        tc.num_kv_shared_layers = 20;
      }),
    ).toBe('config.json: text_config.num_kv_shared_layers is 20, more than the 10 layers (num_hidden_layers)');
    expect(
      await cfg((tc) => {
        tc.num_kv_shared_layers = 10;
      }),
    ).toBe(
      'config.json: text_config.num_kv_shared_layers = 10 makes every layer of a target KV-shared, so no layer computes K/V',
    );
    expect(
      await cfg((tc) => {
        tc.num_kv_shared_layers = 9;
      }),
    ).toBe(
      'config.json: text_config.layer_types / num_kv_shared_layers = 9: KV-shared layer 4 (full) has no earlier full layer to read from',
    );
  });

  it("the assistant's num_centroids or centroid_intermediate_top_k absurd", async () => {
    const cfg = async (f: (c: any) => void) => refusal(forTarget(await editConfig(await assistant(), f)));
    expect(
      await cfg((c) => {
        c.num_centroids = 7;
      }),
    ).toBe(
      'config.json: vocab_size 512 is not a multiple of num_centroids 7 (each centroid owns vocab / num_centroids tokens)',
    );
    expect(
      await cfg((c) => {
        c.centroid_intermediate_top_k = 100;
      }),
    ).toBe('config.json: centroid_intermediate_top_k 100 is more than num_centroids 16');
  });

  it('another family, or a target, given as --draft (before: the probe compared a target as an assistant)', async () => {
    // the MoE fixture's assistant reads 2 KV heads; the E-series target has 1
    expect(await refusedFolder(forTarget(path.join(GEMMA4_MOE_TINY, 'assistant')))).toBe(
      path.join(GEMMA4_MOE_TINY, 'assistant'),
    );
    expect(await refusal(forTarget(path.join(GEMMA4_MOE_TINY, 'assistant')))).toMatch(
      /^assistant \(gemma4_assistant\) does not fit target \(gemma4\): assistant layer 0 \(sliding\) vs target layer 5: KV heads 2 != 1;/,
    );
    expect(await refusal(forTarget(path.join(GEMMA4_MOE_TINY, 'target')))).toBe(
      'config.json declares model_type "gemma4", a target model, not an MTP assistant (expected a Gemma 4 MTP assistant: gemma4_assistant, gemma4_unified_assistant)',
    );
    expect(await refusal(forTarget(qwenDrafter))).toBe(
      `config.json declares a Qwen3.5 model_type, which cannot be used to draft for the Gemma 4 target "${path.join(GEMMA4_E_TINY, 'target')}" (expected a Gemma 4 MTP assistant: gemma4_assistant, gemma4_unified_assistant)`,
    );
    // the probe command itself refuses it, before any GPU work (never with "backbone_hidden_size undefined")
    const io = { out: () => {}, err: () => {} };
    const values = {
      target: path.join(GEMMA4_E_TINY, 'target'),
      draft: path.join(GEMMA4_MOE_TINY, 'target'),
      report: path.join(tmp, 'never-written.json'),
      block: '4',
      precision: 'f32',
      policy: 'exact',
    };
    expect(await refusal(probe.run({ values, positionals: [] } as never, io as never))).toBe(
      'config.json declares model_type "gemma4", a target model, not an MTP assistant (expected a Gemma 4 MTP assistant: gemma4_assistant, gemma4_unified_assistant)',
    );
  });
});

describe('bad input: Gemma 4 26B-A4B MoE (gemma4-moe-tiny target)', () => {
  const target = () => copy(path.join(GEMMA4_MOE_TINY, 'target'));
  const withAssistant = (t: string) => openGemmaPair(t, path.join(GEMMA4_MOE_TINY, 'assistant'));

  it('a target file cut short, or whose header length runs past the end', async () => {
    const t = await target();
    await expectTruncationRefused(t, () => withAssistant(t));
    const t2 = await target();
    await expectHeaderPastEndRefused(t2, () => withAssistant(t2));
  });

  it('a router or experts tensor missing', async () => {
    const missing = async (...names: string[]) =>
      refusal(withAssistant(await editHeader(await target(), without(...names))));
    expect(await missing(`${LM}.layers.0.router.proj.weight`)).toBe(
      'missing tensor "layers.0.router.proj.weight" (packed U32 weight; "layers.0.router.proj.scales" exists) in model.safetensors',
    );
    expect(await missing(`${LM}.layers.1.router.per_expert_scale`)).toBe(
      'missing tensor "layers.1.router.per_expert_scale" (router per-expert scale of shape [8]) in model.safetensors',
    );
    expect(await missing(`${LM}.layers.1.router.scale`)).toBe(
      'missing tensor "layers.1.router.scale" (router scale of shape [128]) in model.safetensors',
    );
    expect(await missing(`${LM}.layers.2.experts.switch_glu.gate_proj.weight`)).toBe(
      'missing tensor "layers.2.experts.switch_glu.gate_proj.weight" (packed U32 weight; "layers.2.experts.switch_glu.gate_proj.scales" exists) in model.safetensors',
    );
    const down = `${LM}.layers.2.experts.switch_glu.down_proj`;
    expect(await missing(`${down}.weight`, `${down}.scales`, `${down}.biases`)).toBe(
      'missing tensor "layers.2.experts.switch_glu.down_proj.weight" (dense weight of layers.2.experts.switch_glu.down_proj of shape [8,128,64]) in model.safetensors',
    );
    // the router's 8-bit scales: the expected shape follows the per-module quantization override
    expect(await missing(`${LM}.layers.0.router.proj.scales`)).toBe(
      'missing tensor "layers.0.router.proj.scales" (scales of layers.0.router.proj, group size 64 of shape [8,2]; "layers.0.router.proj.weight" holds packed U32 codes) in model.safetensors',
    );
    expect(await missing(`${down}.scales`)).toBe(
      'missing tensor "layers.2.experts.switch_glu.down_proj.scales" (scales of layers.2.experts.switch_glu.down_proj, group size 64 of shape [8,128,1]; "layers.2.experts.switch_glu.down_proj.weight" holds packed U32 codes) in model.safetensors',
    );
  });

  it('a router or experts tensor of the wrong shape', async () => {
    const shaped = async (name: string, shape: number[]) =>
      refusal(withAssistant(await editHeader(await target(), reshaped(name, shape))));
    expect(await shaped(`${LM}.layers.0.router.proj.weight`, [16, 16])).toBe(
      `model.safetensors: tensor "${LM}.layers.0.router.proj.weight" has shape [16,16], expected [8,32] (8 x 128 at 8 bits)`,
    );
    expect(await shaped(`${LM}.layers.0.router.per_expert_scale`, [4])).toBe(
      `model.safetensors: tensor "${LM}.layers.0.router.per_expert_scale" has shape [4], expected [8] (router per-expert scale)`,
    );
    expect(await shaped(`${LM}.layers.0.experts.switch_glu.gate_proj.weight`, [8, 32, 32])).toBe(
      `model.safetensors: tensor "${LM}.layers.0.experts.switch_glu.gate_proj.weight" has shape [8,32,32], expected [8,64,16] (8 x 64 x 128 at 4 bits)`,
    );
  });

  it('num_experts 0, top_k_experts 0 or above num_experts, num_experts or moe_intermediate_size not the stored ones', async () => {
    const cfg = async (f: (c: any) => void) => refusal(withAssistant(await editConfig(await target(), f)));
    expect(
      await cfg((c) => {
        c.text_config.num_experts = 0;
      }),
    ).toBe('config.json: text_config.num_experts must be a positive integer, found 0');
    expect(
      await cfg((c) => {
        c.text_config.top_k_experts = 9;
      }),
    ).toBe('config.json: text_config.top_k_experts 9 is more than num_experts 8');
    expect(
      await cfg((c) => {
        c.text_config.top_k_experts = 0;
      }),
    ).toBe('config.json: text_config.top_k_experts must be a positive integer, found 0');
    expect(
      await cfg((c) => {
        c.text_config.num_experts = 4;
      }),
    ).toBe(
      `model.safetensors: tensor "${LM}.layers.0.router.proj.weight" has shape [8,32], expected [4,32] (4 x 128 at 8 bits)`,
    );
    expect(
      await cfg((c) => {
        delete c.text_config.moe_intermediate_size;
      }),
    ).toBe('config.json: text_config.moe_intermediate_size is required with enable_moe_block and is missing');
    expect(
      await cfg((c) => {
        for (const q of [c.quantization, c.quantization_config]) delete q[`${LM}.layers.0.router.proj`];
      }),
    ).toBe(
      `model.safetensors: tensor "${LM}.layers.0.router.proj.weight" has shape [8,32], expected [8,16] (8 x 128 at 4 bits; the stored shape fits 8 bits — check config.json "quantization")`,
    );
  });

  it('a Qwen3.5 drafter, a Qwen3.5 target or the E-series assistant given as --draft; a Qwen3.5 target given to routers', async () => {
    const t = path.join(GEMMA4_MOE_TINY, 'target');
    // before: 'config.json: model_type "qwen3_5_mtp" is not supported (...)', naming neither folder
    expect(await refusal(openGemmaPair(t, qwenDrafter))).toBe(
      `config.json declares a Qwen3.5 model_type, which cannot be used to draft for the Gemma 4 target "${t}" (expected a Gemma 4 MTP assistant: gemma4_assistant, gemma4_unified_assistant)`,
    );
    expect(await refusal(openGemmaPair(t, path.join(QWEN_TINY, 'target')))).toBe(
      `config.json declares a Qwen3.5 model_type, which cannot be used to draft for the Gemma 4 target "${t}" (expected a Gemma 4 MTP assistant: gemma4_assistant, gemma4_unified_assistant)`,
    );
    expect(await refusal(openGemmaPair(t, path.join(GEMMA4_E_TINY, 'assistant')))).toMatch(
      /^assistant \(gemma4_assistant\) does not fit target \(gemma4\): assistant layer 0 \(sliding\) vs target layer 4: KV heads 1 != 2;/,
    );
    // routers takes a Gemma 4 target only
    expect(await refusal(openGemmaDir(path.join(QWEN_TINY, 'target'), 'target'))).toBe(
      "config.json declares a Qwen3.5 model_type, which cannot be used as this command's target (expected a Gemma 4 target: gemma4, gemma4_unified, gemma4_text, gemma4_unified_text)",
    );
    expect(await refusal(openGemmaDir(path.join(GEMMA4_MOE_TINY, 'assistant'), 'target'))).toBe(
      'config.json declares model_type "gemma4_assistant", an MTP assistant, not a target model (expected a Gemma 4 target: gemma4, gemma4_unified, gemma4_text, gemma4_unified_text)',
    );
  });
});
