/**
 * The bad-input suite: every way a checkpoint can be wrong that Ringside must refuse, one test per case,
 * each asserting the user-facing message (which file, which tensor, what was expected). This is the one
 * place listing them; positive tests live in safetensors/checkpoint/synthetic tests.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm, stat, truncate } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { bytesSource, type ByteSource } from '../../src/format/bytesource.ts';
import { openCheckpoint } from '../../src/format/checkpoint.ts';
import { checkCompatibility } from '../../src/format/compat.ts';
import { parseConfig } from '../../src/format/config.ts';
import { FormatError } from '../../src/format/errors.ts';
import type { AssistantDescription, TargetDescription } from '../../src/format/model-description.ts';
import { readSafetensorsHeader } from '../../src/format/safetensors.ts';
import { writeSafetensors, type TensorToWrite } from '../../src/format/safetensors-writer.ts';
import { synthGeometry, syntheticCheckpoint } from '../../src/format/synthetic.ts';
import { isGpuError, type GpuError } from '../../src/gpu/errors.ts';
import { checkMemory, planMemory } from '../../src/model/memory-budget.ts';
import { nodeFileSource, openCheckpointDir } from '../../src/node/file-source.ts';
import { writeSynthetic } from '../../src/node/synthetic.ts';
import { TINY_A, fixtureFiles, memoryCheckpoint } from './fixtures.ts';
import { refusal } from '../support/refusal.ts';

/** A safetensors file made of an 8-byte length, header text and `data` zero bytes. */
function stFile(header: unknown, dataBytes = 0, lengthOverride?: bigint): Uint8Array {
  const json = new TextEncoder().encode(typeof header === 'string' ? header : JSON.stringify(header));
  const out = new Uint8Array(8 + json.byteLength + dataBytes);
  new DataView(out.buffer).setBigUint64(0, lengthOverride ?? BigInt(json.byteLength), true);
  out.set(json, 8);
  return out;
}
const header = (bytes: Uint8Array) => refusal(readSafetensorsHeader(bytesSource('model.safetensors', bytes)));
const clone = <T>(x: T): T => JSON.parse(JSON.stringify(x));
const text = (name: string, s: string) => bytesSource(name, new TextEncoder().encode(s));
const F32x2 = { dtype: 'F32', shape: [2], data_offsets: [0, 8] };

let tmp: string;
let target: { config: any; tensors: TensorToWrite[] };
beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'ringside-bad-'));
  target = await fixtureFiles('target');
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

/** The tiny-a target with one tensor changed (or removed when f returns null). */
function edited(f: (t: TensorToWrite) => TensorToWrite | null, config = target.config): ByteSource[] {
  const tensors = target.tensors.map(f).filter((t): t is TensorToWrite => t !== null);
  return memoryCheckpoint(config, tensors);
}
const named = (n: string) => (t: TensorToWrite) => t.name === `language_model.model.${n}`;

describe('bad input: safetensors files', () => {
  it('truncated file (a download cut short, on disk)', async () => {
    const dir = path.join(tmp, 'truncated');
    await writeSynthetic(dir, synthGeometry('tiny', { assistant: null }));
    const file = path.join(dir, 'target/model.safetensors');
    const h = await readSafetensorsHeader(await nodeFileSource(file));
    const last = h.tensors[h.tensors.length - 1];
    const { size } = await stat(file);
    await truncate(file, size - 100);
    const begin = last.offset - h.dataStart;
    expect(await refusal(openCheckpointDir(path.join(dir, 'target')))).toBe(
      `target: model.safetensors: tensor "${last.name}" data_offsets [${begin}, ${begin + last.byteLength}] run past the end of the data section ` +
        `(${size - 100 - h.dataStart} bytes after the ${h.dataStart}-byte header)`,
    );
    await truncate(file, 5);
    expect(await refusal(openCheckpointDir(path.join(dir, 'target')))).toBe(
      'target: model.safetensors: file is 5 bytes, too short for the 8-byte safetensors header length',
    );
  });

  it('header length past the end of the file, zero or absurd', async () => {
    const ok = { x: F32x2 };
    expect(await header(stFile(ok, 8).subarray(0, 20))).toMatch(
      /^model\.safetensors: safetensors header length \d+ runs past the end of the file \(8 \+ \d+ > 20 bytes\)$/,
    );
    expect(await header(stFile(ok, 8, 10_000n))).toBe(
      'model.safetensors: safetensors header length 10000 runs past the end of the file (8 + 10000 > 70 bytes)',
    );
    expect(await header(stFile(ok, 8, 1n << 40n))).toBe(
      'model.safetensors: safetensors header length 1099511627776 exceeds the 104857600-byte cap (not a safetensors file?)',
    );
    expect(await header(stFile(ok, 8, 0n))).toBe('model.safetensors: safetensors header length is 0');
  });

  it('invalid JSON (safetensors header, config.json, index)', async () => {
    expect(await header(stFile('{"x": '))).toMatch(
      /^model\.safetensors: safetensors header is not valid UTF-8 JSON \(/,
    );
    const badUtf8 = stFile('{"x":1}');
    badUtf8[10] = 0xff;
    expect(await header(badUtf8)).toMatch(
      /^model\.safetensors: safetensors header is not valid UTF-8 JSON \(.*(encoded|decode)/i,
    );
    expect(await header(stFile('[1,2]'))).toBe(
      'model.safetensors: safetensors header must be a JSON object, found an array',
    );
    const files = memoryCheckpoint(target.config, target.tensors);
    expect(await refusal(openCheckpoint([text('config.json', '{"model_type": "gemma4",'), files[1]]))).toMatch(
      /^checkpoint: config\.json: not valid JSON \(/,
    );
    expect(
      await refusal(openCheckpoint([files[0], text('model.safetensors.index.json', '{weight_map'), files[1]])),
    ).toMatch(/^checkpoint: model\.safetensors\.index\.json: not valid JSON \(/);
    expect(
      await refusal(openCheckpoint([files[0], text('model.safetensors.index.json', '{"metadata": {}}'), files[1]])),
    ).toBe('checkpoint: model.safetensors.index.json: missing "weight_map" object');
  });

  it('unknown dtype (the error also carries file and tensor for the UI)', async () => {
    const e = await readSafetensorsHeader(
      bytesSource(
        'model.safetensors',
        stFile({ 'w.weight': { dtype: 'F8_E4M3', shape: [2], data_offsets: [0, 2] } }, 2),
      ),
    ).catch((x) => x);
    expect(e).toBeInstanceOf(FormatError);
    expect(e.message).toBe(
      'model.safetensors: tensor "w.weight" has unknown dtype "F8_E4M3" (expected one of F64, F32, F16, BF16, I64, I32, I16, I8, U64, U32, U16, U8, BOOL)',
    );
    expect([e.file, e.subject]).toEqual(['model.safetensors', 'w.weight']);
  });

  it('byte range outside the file', async () => {
    expect(await header(stFile({ x: { dtype: 'F32', shape: [4], data_offsets: [0, 16] } }, 8))).toBe(
      'model.safetensors: tensor "x" data_offsets [0, 16] run past the end of the data section (8 bytes after the 63-byte header)',
    );
    // and a read outside the file, wherever it comes from
    expect(await refusal(bytesSource('model.safetensors', new Uint8Array(10)).read(8, 4))).toBe(
      'model.safetensors: read of 4 bytes at offset 8 is outside the file (10 bytes)',
    );
  });

  it('overlapping ranges', async () => {
    expect(await header(stFile({ a: F32x2, b: { dtype: 'F32', shape: [2], data_offsets: [4, 12] } }, 12))).toBe(
      'model.safetensors: tensor "b" data [4, 12) overlaps tensor "a" data [0, 8)',
    );
  });

  it('shape / byte size mismatch, malformed shape, offsets or metadata', async () => {
    expect(await header(stFile({ 'x.weight': { dtype: 'BF16', shape: [4, 8], data_offsets: [0, 60] } }, 64))).toBe(
      'model.safetensors: tensor "x.weight" has shape [4,8] x BF16 = 64 bytes but its data_offsets span 60 bytes',
    );
    expect(await header(stFile({ w: { dtype: 'F32', shape: [2, -1], data_offsets: [0, 8] } }, 8))).toBe(
      'model.safetensors: tensor "w" shape must be an array of non-negative integers, found [2,-1]',
    );
    expect(await header(stFile({ a: { dtype: 'F32', shape: [2], data_offsets: [8, 0] } }, 8))).toBe(
      'model.safetensors: tensor "a" data_offsets [8, 0] end before they begin',
    );
    expect(await header(stFile({ a: { dtype: 'F32', shape: [2] } }, 8))).toBe(
      'model.safetensors: tensor "a" data_offsets must be [begin, end] non-negative integers, found undefined',
    );
    expect(await header(stFile({ __metadata__: { v: 1 } }))).toBe(
      'model.safetensors: "__metadata__" entry "v" must be a string, found 1',
    );
  });
});

describe('bad input: checkpoint contents', () => {
  it('missing tensor', async () => {
    expect(
      await refusal(openCheckpoint(edited((t) => (named('layers.3.self_attn.k_norm.weight')(t) ? null : t)))),
    ).toBe(
      'checkpoint: missing tensor "layers.3.self_attn.k_norm.weight" (norm weight of shape [64]) in model.safetensors',
    );
    expect(await refusal(openCheckpoint(edited((t) => (named('layers.0.mlp.up_proj.weight')(t) ? null : t))))).toBe(
      'checkpoint: missing tensor "layers.0.mlp.up_proj.weight" (packed U32 weight; "layers.0.mlp.up_proj.scales" exists) in model.safetensors',
    );
    expect(await refusal(openCheckpoint(edited((t) => (named('embed_tokens.biases')(t) ? null : t))))).toBe(
      'checkpoint: missing tensor "embed_tokens.biases" (biases of embed_tokens, group size 64 of shape [1024,4]) in model.safetensors',
    );
  });

  it('unexpected shape, dtype, or tensors the model does not use', async () => {
    expect(
      await refusal(openCheckpoint(edited((t) => (named('norm.weight')(t) ? { ...t, shape: [2, 128] } : t)))),
    ).toBe(
      'checkpoint: model.safetensors: tensor "language_model.model.norm.weight" has shape [2,128], expected [256] (final norm weight)',
    );
    expect(
      await refusal(openCheckpoint(edited((t) => (named('layers.2.layer_scalar')(t) ? { ...t, dtype: 'U16' } : t)))),
    ).toBe(
      'checkpoint: model.safetensors: tensor "language_model.model.layers.2.layer_scalar" should be F32, F16 or BF16 (layer scalar) but is U16',
    );
    expect(
      await refusal(
        openCheckpoint(edited((t) => (named('layers.0.self_attn.q_proj.weight')(t) ? { ...t, dtype: 'I32' } : t))),
      ),
    ).toBe(
      'checkpoint: model.safetensors: tensor "language_model.model.layers.0.self_attn.q_proj.weight" should be U32 packed 4-bit codes but is I32',
    );
    const vproj = target.tensors.find(named('layers.0.self_attn.v_proj.weight'))!;
    const extra = [
      ...target.tensors,
      { ...vproj, name: 'language_model.model.layers.5.self_attn.v_proj.weight' },
      { name: 'lm_head.weight', dtype: 'BF16' as const, shape: [1], data: new Uint8Array(2) },
    ];
    expect(await refusal(openCheckpoint(memoryCheckpoint(target.config, extra)))).toBe(
      'checkpoint: model.safetensors: 2 unexpected language-model tensors that this gemma4 description does not use: "language_model.model.layers.5.self_attn.v_proj.weight", "lm_head.weight"',
    );
  });

  it('missing config.json, missing weights, shards without an index, two checkpoints in one drop', async () => {
    expect(await refusal(openCheckpoint([bytesSource('model.safetensors', new Uint8Array(8))], 'my-model'))).toBe(
      'my-model: no config.json among the 1 files given (model.safetensors)',
    );
    expect(await refusal(openCheckpointDir(TINY_A, 'tiny-a'))).toBe(
      'tiny-a: more than one config.json (assistant/config.json, target/config.json); drop one checkpoint folder at a time',
    );
    expect(await refusal(openCheckpoint([text('config.json', '{}')], 'my-model'))).toBe(
      'my-model: no .safetensors weights among the files given (config.json)',
    );
    const shard = bytesSource('model-00001-of-00002.safetensors', writeSafetensors([]));
    expect(
      await refusal(
        openCheckpoint(
          [text('config.json', '{}'), shard, { ...shard, name: 'model-00002-of-00002.safetensors' }],
          'my-model',
        ),
      ),
    ).toBe('my-model: 2 .safetensors shards but no model.safetensors.index.json to say which tensor is where');
  });

  it('unsupported model_type and Gemma 4 variants this engine cannot run exactly', async () => {
    const variant = (f: (c: any) => void) => {
      const c = clone(target.config);
      f(c);
      return () => parseConfig(c);
    };
    expect(
      await refusal(
        variant((c) => {
          c.model_type = 'llama';
        }),
      ),
    ).toBe(
      'config.json: model_type "llama" is not supported (expected a Gemma 4 text model: gemma4, gemma4_unified, gemma4_text, gemma4_unified_text; or an MTP assistant: gemma4_assistant, gemma4_unified_assistant)',
    );
    expect(
      await refusal(
        variant((c) => {
          delete c.text_config;
        }),
      ),
    ).toBe('config.json: model_type "gemma4" needs a "text_config" object');
    expect(
      await refusal(
        variant((c) => {
          c.text_config.enable_moe_block = true;
          c.text_config.num_experts = 128;
        }),
      ),
    ).toBe(
      // MoE blocks are read; their sizes must be stated
      'config.json: text_config.top_k_experts is required with enable_moe_block and is missing',
    );
    expect(
      await refusal(
        variant((c) => {
          c.text_config.num_local_experts = 8;
        }),
      ),
    ).toMatch(/mixture-of-experts blocks of another scheme .*\(text_config\.num_local_experts = 8\)/);
    expect(
      await refusal(
        variant((c) => {
          c.text_config.hidden_size_per_layer_input = 256;
        }),
      ),
    ).toBe(
      // per-layer embeddings are read; tiny-a's config states no per-layer vocabulary for them
      'config.json: text_config.vocab_size_per_layer_input must be a positive integer for a model with per-layer embeddings (hidden_size_per_layer_input = 256), found 0',
    );
    expect(
      await refusal(
        variant((c) => {
          c.text_config.num_kv_shared_layers = 20;
        }),
      ),
    ).toBe('config.json: text_config.num_kv_shared_layers is 20, more than the 12 layers (num_hidden_layers)');
    expect(
      await refusal(
        variant((c) => {
          c.quantization = { group_size: 32, bits: 4, mode: 'mxfp4' };
        }),
      ),
    ).toBe('config.json: quantization mode "mxfp4" is not supported yet (only "affine")');
    expect(
      await refusal(
        variant((c) => {
          delete c.text_config.hidden_size;
        }),
      ),
    ).toBe('config.json: text_config.hidden_size must be a positive integer, found nothing');
    expect(
      await refusal(
        variant((c) => {
          c.text_config.layer_types = ['sliding_attention'];
        }),
      ),
    ).toBe('config.json: text_config.layer_types must list 12 layer types (num_hidden_layers), found 1 entries');
    expect(
      await refusal(
        variant((c) => {
          c.text_config.global_head_dim = 130;
        }),
      ),
    ).toBe(
      "config.json: layer 5 (full) head dim 130 is not a multiple of 4, which this engine's attention kernels need; this geometry is not supported",
    );
  });

  it('quantization bits / group size that do not match the packed shapes', async () => {
    const cfg = (f: (q: any) => void) => {
      const c = clone(target.config);
      f(c.quantization);
      return c;
    };
    expect(
      await refusal(
        openCheckpoint(
          edited(
            (t) => t,
            cfg((q) => {
              q.bits = 8;
            }),
          ),
        ),
      ),
    ).toBe(
      'checkpoint: model.safetensors: tensor "language_model.model.embed_tokens.weight" has shape [1024,32], expected [1024,64] (1024 x 256 at 8 bits; the stored shape fits 4 bits — check config.json "quantization")',
    );
    expect(
      await refusal(
        openCheckpoint(
          edited(
            (t) => t,
            cfg((q) => {
              q.group_size = 32;
            }),
          ),
        ),
      ),
    ).toBe(
      'checkpoint: model.safetensors: tensor "language_model.model.embed_tokens.scales" has shape [1024,4], expected [1024,8] (scales of embed_tokens, group size 32; the stored shape fits group size 64 — check config.json "quantization")',
    );
    // the 8-bit MLP overrides dropped from config.json
    const noOverrides = cfg((q) => {
      for (const k of Object.keys(q)) if (k.includes('.mlp.')) delete q[k];
    });
    expect(await refusal(openCheckpoint(edited((t) => t, noOverrides)))).toBe(
      'checkpoint: model.safetensors: tensor "language_model.model.layers.0.mlp.gate_proj.weight" has shape [512,64], expected [512,32] (512 x 256 at 4 bits; the stored shape fits 8 bits — check config.json "quantization")',
    );
    expect(
      await refusal(
        openCheckpoint(
          edited(
            (t) => t,
            cfg((q) => {
              q.group_size = 96;
            }),
          ),
        ),
      ),
    ).toBe(
      'checkpoint: model.safetensors: "language_model.model.embed_tokens" has 256 input features, not a multiple of group size 96 and of 8 (for 4-bit packing)',
    );
    const unquantized = clone(target.config);
    delete unquantized.quantization;
    delete unquantized.quantization_config;
    expect(await refusal(openCheckpoint(edited((t) => t, unquantized)))).toBe(
      'checkpoint: model.safetensors: "embed_tokens.scales" exists (quantized weights) but config.json has no "quantization" block',
    );
  });

  it('index naming a missing shard, or disagreeing with the shards', async () => {
    const half = Math.floor(target.tensors.length / 2);
    const shards = [target.tensors.slice(0, half), target.tensors.slice(half)];
    const names = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors'];
    const weightMap: Record<string, string> = {};
    shards.forEach((s, i) =>
      s.forEach((t) => {
        weightMap[t.name] = names[i];
      }),
    );
    const files = (map: Record<string, string>, drop?: string): ByteSource[] => [
      text('config.json', JSON.stringify(target.config)),
      text('model.safetensors.index.json', JSON.stringify({ metadata: {}, weight_map: map })),
      ...shards.map((s, i) => bytesSource(names[i], writeSafetensors(s))).filter((f) => f.name !== drop),
    ];
    expect(await refusal(openCheckpoint(files(weightMap, names[1])))).toBe(
      `checkpoint: model.safetensors.index.json: weight_map points ${shards[1].length} tensors to "model-00002-of-00002.safetensors", which is not among the files given (config.json, model.safetensors.index.json, model-00001-of-00002.safetensors)`,
    );
    const first = target.tensors[0].name;
    expect(await refusal(openCheckpoint(files({ ...weightMap, [first]: names[1] })))).toBe(
      `checkpoint: model.safetensors.index.json: weight_map says tensor "${first}" is in "model-00002-of-00002.safetensors" but it is in model-00001-of-00002.safetensors`,
    );
    expect(await refusal(openCheckpoint(files({ ...weightMap, 'language_model.model.ghost.weight': names[0] })))).toBe(
      'checkpoint: model.safetensors.index.json: weight_map lists tensor "language_model.model.ghost.weight" in "model-00001-of-00002.safetensors" but that file has no such tensor',
    );
    const { [first]: _, ...unlisted } = weightMap;
    expect(await refusal(openCheckpoint(files(unlisted)))).toBe(
      `checkpoint: model-00001-of-00002.safetensors: tensor "${first}" is not listed in model.safetensors.index.json's weight_map`,
    );
  });

  it('target/assistant mismatch', async () => {
    const t = (await openCheckpointDir(path.join(TINY_A, 'target'))).description as TargetDescription;
    // a synthetic tiny assistant built for another target: hidden 512, 4 KV heads on sliding layers
    const other = syntheticCheckpoint(synthGeometry('tiny', { hidden: 512, kvHeads: 4 })).assistant!;
    const a = (await openCheckpoint(other)).description as AssistantDescription;
    expect(await refusal(() => checkCompatibility(t, a))).toBe(
      'assistant (gemma4_assistant) does not fit target (gemma4): assistant backbone_hidden_size 512 != target hidden_size 256; ' +
        'assistant layer 0 (sliding) vs target layer 10: KV heads 4 != 2; assistant layer 1 (sliding) vs target layer 10: KV heads 4 != 2; ' +
        'assistant layer 2 (sliding) vs target layer 10: KV heads 4 != 2',
    );
    const good = (await openCheckpointDir(path.join(TINY_A, 'assistant'))).description as AssistantDescription;
    const badKv = {
      ...good,
      vocab: 2048,
      window: 32,
      layers: good.layers.map((l) => (l.type === 'full' ? { ...l, headDim: 256, numKvHeads: 2 } : l)),
    };
    expect(await refusal(() => checkCompatibility(t, badKv))).toBe(
      'assistant (gemma4_assistant) does not fit target (gemma4): assistant vocab_size 2048 != target vocab_size 1024; ' +
        'assistant layer 3 (full) vs target layer 11: head dim 256 != 128; assistant layer 3 (full) vs target layer 11: KV heads 2 != 1; ' +
        'assistant sliding_window 32 != target sliding_window 16',
    );
  });
});

describe('bad input: not enough GPU memory', () => {
  const lavapipe = { maxBufferSize: 4294967295, maxStorageBufferBindingSize: 134217728 };
  const oom = (f: () => unknown): GpuError => {
    try {
      f();
    } catch (e) {
      expect(isGpuError(e)).toBe(true);
      expect((e as GpuError).kind).toBe('out-of-memory');
      return e as GpuError;
    }
    throw new Error('expected a GpuError');
  };
  let b31: { t: TargetDescription; a: AssistantDescription };
  beforeAll(async () => {
    const pair = syntheticCheckpoint(synthGeometry('31b'));
    b31 = {
      t: (await openCheckpoint(pair.target)).description as TargetDescription,
      a: (await openCheckpoint(pair.assistant!)).description as AssistantDescription,
    };
  });

  it('a 31B plan over the memory budget is refused with the numbers', () => {
    const plan = planMemory(b31.t, { maxContext: 4096, maxBlock: 8, prefillChunk: 64 }, lavapipe, b31.a);
    expect(() => checkMemory(plan, 32e9)).not.toThrow();
    expect(oom(() => checkMemory(plan, 8e9)).message).toMatch(
      new RegExp(
        '^gemma4 \\+ gemma4_assistant needs 18\\.\\d\\d GB for weights \\+ \\d\\.\\d\\d GB KV cache \\(context 4096\\) \\+ 0\\.\\d\\d GB workspace = 20\\.\\d\\d GB, ' +
          'but the memory budget is 8\\.00 GB; this adapter allows buffers of at most 4\\.29 GB \\(maxBufferSize\\) and bindings of at most 0\\.13 GB \\(maxStorageBufferBindingSize\\)\\. ' +
          'Close other GPU-heavy tabs/apps',
      ),
    );
  });

  it('a buffer larger than the adapter allows (a cache at long context, or one weight row)', () => {
    const long = planMemory(b31.t, { maxContext: 32768, maxBlock: 8, prefillChunk: 64 }, lavapipe);
    expect(oom(() => checkMemory(long)).message).toMatch(
      /^gemma4: K cache of layer 5 \(full, 32768 positions x 4 x 512\) needs 268435456 bytes in one buffer, over this adapter's maxStorageBufferBindingSize of 134217728 bytes \(and \d+ more buffers\); the model needs 17\.\d\d GB for weights \+ [\d.]+ GB KV cache \(context 32768\)/,
    );
    const tinyLimits = { maxBufferSize: 4096, maxStorageBufferBindingSize: 1 << 20 };
    const row = planMemory(b31.t, { maxContext: 64, maxBlock: 1, prefillChunk: 1 }, tinyLimits);
    expect(oom(() => checkMemory(row)).message).toMatch(
      /^gemma4: one row of language_model\.model\.layers\.0\.mlp\.down_proj\.weight \(10752 bytes\) needs 10752 bytes in one buffer, over this adapter's maxBufferSize of 4096 bytes \(and \d+ more buffers\)/,
    );
  });
});
