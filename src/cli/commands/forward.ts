import { writeFile } from 'node:fs/promises';
import { nodeGpuContext } from '../node-gpu.ts';
import { openGemmaDir } from '../load-models.ts';
import { uploadWeights } from '../../model/gpu-weights.ts';
import { TargetModel, type ForwardResult } from '../../model/target.ts';
import { familyFeatures, type TargetDescription } from '../../format/model-description.ts';
import { writeSafetensors, type TensorToWrite } from '../../format/safetensors-writer.ts';
import { choice, intList, intOption, requireOutputFile, requireString } from '../args.ts';
import type { Command } from '../command.ts';
import { checkPositions, MAX_POSITIONS, MAX_VOCAB } from '../bounds.ts';

/** Capture names of the engine -> tensor names of the fixtures' golden.safetensors. */
function activationNames(layers: number): Map<string, string> {
  const m = new Map<string, string>();
  for (let i = 0; i < layers; i++) for (const s of ['attn', 'mlp', 'layer']) m.set(`${s}.${i}`, `act.${s}.${i}`);
  m.set('final_norm', 'act.final_norm');
  return m;
}

export const forward: Command = {
  name: 'forward',
  summary: 'Run the target over given tokens and write logits (and activations) to a safetensors file.',
  usage:
    'forward --model DIR|ORG/NAME --tokens 1,2,3 --out FILE.safetensors [--precision f32|bf16] [--activations] [--chain | --block K] [--prefill-chunk N]',
  options: {
    model: {
      type: 'string',
      help: 'target checkpoint folder (MLX), or a Hub id in the local Hugging Face cache',
      checkpoint: 'target',
    },
    tokens: { type: 'string', help: 'comma-separated token ids' },
    out: {
      type: 'string',
      help: 'output .safetensors (logits F32 [T, V]; with --activations also act.* F32 [T, hidden])',
    },
    precision: { type: 'string', help: 'f32 | bf16', default: 'f32' },
    activations: { type: 'boolean', help: 'also write act.attn.i, act.mlp.i, act.layer.i, act.final_norm' },
    chain: { type: 'boolean', help: 'one token per forward (classic decode, M = 1)' },
    block: { type: 'string', help: 'K tokens per forward (verify blocks, M = K)' },
    'prefill-chunk': { type: 'string', help: 'default mode: prefill chunk size (default: all tokens)' },
  },
  async run({ values }, io) {
    const tokens = intList(values, 'tokens', { min: 0, max: MAX_VOCAB - 1, count: MAX_POSITIONS });
    if (!tokens?.length) throw new Error('--tokens is required');
    const out = requireOutputFile(values, 'out');
    const precision = choice(values, 'precision', ['f32', 'bf16'] as const)!;
    const block = intOption(values, 'block', 1, 64);
    if (values.chain && block) throw new Error('--chain and --block are exclusive');
    if ((values.chain || block) && values['prefill-chunk'] !== undefined)
      throw new Error('--prefill-chunk applies to the default mode (one prefill), not to --chain or --block');
    const modelDir = requireString(values, 'model');
    const ck = await openGemmaDir(modelDir, 'target');
    const desc = ck.description as TargetDescription;
    // forward writes the dense fixtures' tensors (logits, act.*) from the dense engine only
    const family = familyFeatures(desc);
    if (family.length)
      throw new Error(
        `${modelDir}: forward runs dense Gemma 4 targets only, and this one uses ${family.join(', ')}; probe, trace, generate and compare run it`,
      );
    for (const t of tokens)
      if (t >= desc.vocab) throw new Error(`token ${t} is outside the vocabulary (${desc.vocab})`);
    checkPositions(tokens.length, `--tokens ${tokens.length} tokens`, desc.config.maxPositions, ck.label);
    const ctx = await nodeGpuContext();
    const weights = await uploadWeights(ctx.device, desc);
    const rowsPerForward = values.chain ? 1 : (block ?? 0);
    const chunk = intOption(values, 'prefill-chunk', 1, MAX_POSITIONS) ?? tokens.length;
    const model = new TargetModel(ctx, weights, {
      maxContext: tokens.length,
      maxBlock: Math.max(rowsPerForward, 1),
      prefillChunk: Math.min(chunk, tokens.length),
      precision,
    });
    const captures = values.activations ? new Set(activationNames(desc.layers.length).keys()) : undefined;
    const parts: ForwardResult[] = [];
    if (rowsPerForward === 0) {
      parts.push(await model.prefill(tokens, { logits: 'all', captures }));
    } else {
      for (let i = 0; i < tokens.length; i += rowsPerForward) {
        const rows = tokens.slice(i, i + rowsPerForward);
        parts.push(await model.step(rows, { captures }));
        model.commit(rows.length);
      }
    }
    const cat = (arrays: Float32Array[]) => {
      const o = new Float32Array(arrays.reduce((a, x) => a + x.length, 0));
      arrays.reduce((off, x) => (o.set(x, off), off + x.length), 0);
      return o;
    };
    const f32 = (name: string, shape: number[], data: Float32Array): TensorToWrite => ({
      name,
      dtype: 'F32',
      shape,
      data: new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
    });
    const tensors: TensorToWrite[] = [f32('logits', [tokens.length, desc.vocab], cat(parts.map((p) => p.logits!)))];
    if (captures) {
      for (const [cap, name] of activationNames(desc.layers.length))
        tensors.push(f32(name, [tokens.length, desc.hidden], cat(parts.map((p) => p.captures.get(cap)!))));
    }
    const mode =
      rowsPerForward === 0
        ? `prefill chunk ${Math.min(chunk, tokens.length)}`
        : rowsPerForward === 1
          ? 'chain'
          : `block ${rowsPerForward}`;
    await writeFile(
      out,
      writeSafetensors(tensors, { source: 'ringside forward', precision, mode, target_digest: ck.digest }),
    );
    io.out(`wrote ${tensors.length} tensors for ${tokens.length} tokens (${mode}, ${precision}) to ${out}`);
    model.destroy();
    weights.destroy();
    ctx.destroy();
    return 0;
  },
};
