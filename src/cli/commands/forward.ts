import { writeFile } from 'node:fs/promises';
import { nodeGpuContext } from '../node-gpu.ts';
import { openGemmaDir } from '../load-models.ts';
import { isQwenDir, openQwenTargetDir } from '../qwen-target.ts';
import { ROUTER_OPTION, routerOption, routerRefused } from '../router-option.ts';
import { uploadWeights } from '../../model/gpu-weights.ts';
import { uploadQwenWeights } from '../../model/qwen3_5/weights.ts';
import { buildTarget, type AnyTargetWeights } from '../../model/build-target.ts';
import { isMoeTarget } from '../../model/gemma4/moe/moe-target.ts';
import type { ForwardResult } from '../../model/target.ts';
import type { TargetDescription } from '../../format/model-description.ts';
import { writeSafetensors, type TensorToWrite } from '../../format/safetensors-writer.ts';
import { choice, intList, intOption, requireOutputFile, requireString } from '../args.ts';
import type { Command } from '../command.ts';
import { checkPositions, MAX_POSITIONS, MAX_VOCAB } from '../bounds.ts';

/**
 * The tensor name of a stage's capture in the output: the fixtures' golden.safetensors names (act.attn.0,
 * act.gdn.recurrence.0, act.ple.0, act.final_norm, ...), which are the capture names with `act.`; a MoE layer's
 * router scores are captured as router.i and named act.router_scores.i there.
 */
function activationName(capture: string): string {
  const router = /^router\.(\d+)$/.exec(capture);
  return router ? `act.router_scores.${router[1]}` : `act.${capture}`;
}

export const forward: Command = {
  name: 'forward',
  summary: 'Run the target over given tokens and write logits (and activations) to a safetensors file.',
  usage:
    'forward --model DIR|ORG/NAME --tokens 1,2,3 --out FILE.safetensors [--precision f32|bf16] [--activations] [--chain | --block K] [--prefill-chunk N] [--router mlx|transformers]',
  options: {
    model: {
      type: 'string',
      help: 'target checkpoint folder (MLX: Gemma 4 dense, E-series, MoE, or Qwen3.5), or a Hub id in the local Hugging Face cache',
      checkpoint: 'target',
    },
    tokens: { type: 'string', help: 'comma-separated token ids' },
    out: {
      type: 'string',
      help: 'output .safetensors (logits F32 [T, V]; with --activations also act.* F32 [T, width], one per stage)',
    },
    precision: { type: 'string', help: 'f32 | bf16', default: 'f32' },
    activations: {
      type: 'boolean',
      help: "also write every stage of the target's family in execution order (act.q.i ... act.layer.i, act.final_norm; MoE act.router_scores.i, act.experts.i; E-series act.ple.i; Qwen3.5 act.gdn.*.i)",
    },
    chain: { type: 'boolean', help: 'one token per forward (classic decode, M = 1)' },
    block: { type: 'string', help: 'K tokens per forward (verify blocks, M = K)' },
    'prefill-chunk': { type: 'string', help: 'default mode: prefill chunk size (default: all tokens)' },
    router: ROUTER_OPTION,
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
    const router = routerOption(values);
    const modelDir = requireString(values, 'model');
    // Either family's opener (config and headers only); every family runs through buildTarget's engine for it.
    const qwen = (await isQwenDir(modelDir)) ? await openQwenTargetDir(modelDir) : undefined;
    const ck = qwen ?? (await openGemmaDir(modelDir, 'target'));
    const moe = !qwen && isMoeTarget(ck.description as TargetDescription);
    if (router && !moe) throw routerRefused(modelDir);
    const vocab = ck.description.vocab;
    for (const t of tokens) if (t >= vocab) throw new Error(`token ${t} is outside the vocabulary (${vocab})`);
    checkPositions(tokens.length, `--tokens ${tokens.length} tokens`, ck.description.config.maxPositions, ck.label);
    const ctx = await nodeGpuContext();
    const weights: AnyTargetWeights = qwen
      ? await uploadQwenWeights(ctx.device, qwen.description)
      : await uploadWeights(ctx.device, ck.description as TargetDescription);
    const rowsPerForward = values.chain ? 1 : (block ?? 0);
    const chunk = intOption(values, 'prefill-chunk', 1, MAX_POSITIONS) ?? tokens.length;
    const model = buildTarget(ctx, weights, {
      maxContext: tokens.length,
      maxBlock: Math.max(rowsPerForward, 1),
      prefillChunk: Math.min(chunk, tokens.length),
      precision,
      ...(moe ? { router: router ?? 'mlx' } : {}),
    });
    // the family's stages in execution order; the last, the logits, is the output's `logits`
    const stages = model.stageOrder().filter((s) => s.stage !== 'logits');
    const captures = values.activations ? new Set(stages.map((s) => s.capture)) : undefined;
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
    const T = tokens.length;
    const tensors: TensorToWrite[] = [f32('logits', [T, vocab], cat(parts.map((p) => p.logits!)))];
    if (captures) {
      for (const { capture } of stages) {
        const rows = cat(
          parts.map((p) => {
            const c = p.captures.get(capture);
            if (!c) throw new Error(`the target did not return stage capture ${capture}`);
            return c;
          }),
        );
        tensors.push(f32(activationName(capture), [T, rows.length / T], rows));
      }
    }
    const mode =
      rowsPerForward === 0
        ? `prefill chunk ${Math.min(chunk, tokens.length)}`
        : rowsPerForward === 1
          ? 'chain'
          : `block ${rowsPerForward}`;
    await writeFile(
      out,
      writeSafetensors(tensors, {
        source: 'ringside forward',
        precision,
        mode,
        target_digest: ck.digest,
        ...(moe ? { router: router ?? 'mlx' } : {}),
      }),
    );
    io.out(`wrote ${tensors.length} tensors for ${tokens.length} tokens (${mode}, ${precision}) to ${out}`);
    model.destroy();
    weights.destroy();
    ctx.destroy();
    return 0;
  },
};
