/**
 * The models one generation run needs, for either family: the target model, the policy it takes, and the
 * MTP drafter (Gemma 4: the assistant checkpoint; Qwen3.5: the target's own `mtp.*` head). The command line's
 * `generate` and the page's engine Worker build them here, so both draft and verify the same way.
 */
import type { AssistantDescription, TargetDescription } from '../format/model-description.ts';
import type { GpuContext } from '../gpu/device.ts';
import type { KernelCacheOptions } from '../gpu/kernels.ts';
import { AssistantModel, type DraftConvention } from './gemma4/assistant.ts';
import { buildTarget, hasRouter, targetPolicy } from './build-target.ts';
import type { GpuRouterOrder } from './gemma4/moe/moe-ops.ts';
import { assistantSource, type DraftSource, type GenerateTarget, oracleSource } from './generate.ts';
import type { GpuWeights } from './gpu-weights.ts';
import type { Policy } from './policy.ts';
import { QwenMtpHead, qwenHeadSource } from './qwen3_5/mtp.ts';
import type { QwenGpuWeights } from './qwen3_5/weights.ts';
import type { Precision } from './target.ts';

export type GenerationWeights =
  | { family: 'gemma4'; target: GpuWeights<TargetDescription>; assistant?: GpuWeights<AssistantDescription> }
  | { family: 'qwen3_5'; target: QwenGpuWeights };

export interface GenerationSetupOptions {
  promptLength: number;
  maxNew: number;
  /** Verify block width K (the models are sized for it; classic runs use 1 row of it). */
  block: number;
  policy: string;
  precision: Precision;
  /** Gemma 4 assistants only: the drafter's position convention. */
  draftPosition?: DraftConvention;
  /** Gemma 4 mixture-of-experts targets only: the router convention (default MLX's; refused on other targets). */
  router?: GpuRouterOrder;
  /** The target's kernel cache options (the bench's coop tuning); unset: a cache of the device's class. */
  kernels?: KernelCacheOptions;
}

export interface MtpDrafter {
  source: DraftSource;
  /** The draft position convention recorded with the result (Gemma 4 assistants). */
  position?: DraftConvention;
  done(): void;
}

export interface GenerationModels {
  target: GenerateTarget;
  policy: Policy;
  vocab: number;
  eosIds: number[];
  /** The router convention the target runs (mixture-of-experts targets; absent on targets without a router). */
  router?: GpuRouterOrder;
  /** Why this target cannot draft with an MTP drafter (no assistant loaded, no `mtp.*` head), or null. */
  mtpUnavailable: string | null;
  /** The MTP drafter; throws with `mtpUnavailable` when there is none. Call done() after the run. */
  mtpDrafter(): MtpDrafter;
  destroy(): void;
}

/** Builds the target model (sized for the prompt, the new tokens and K) and its MTP drafter factory. */
export function generationModels(ctx: GpuContext, w: GenerationWeights, o: GenerationSetupOptions): GenerationModels {
  // A Gemma 4 MoE target (26B-A4B) also takes moe-grouped (moe-policies.ts).
  const policy = targetPolicy(w.target, o.policy);
  const router = hasRouter(w.target) ? (o.router ?? 'mlx') : undefined;
  const modelOpts = {
    maxContext: o.promptLength + o.maxNew + o.block,
    maxBlock: o.block,
    prefillChunk: Math.min(o.promptLength, 512),
    precision: o.precision,
    router: o.router,
    ...(o.kernels ? { kernels: o.kernels } : {}),
  };
  if (w.family === 'qwen3_5') {
    const target = buildTarget(ctx, w.target, modelOpts);
    const why = w.target.mtp ? null : (w.target.desc.mtpUnavailable ?? `${w.target.desc.modelType}: no MTP head`);
    return {
      target,
      policy,
      vocab: w.target.desc.vocab,
      eosIds: w.target.desc.eosIds,
      mtpUnavailable: why,
      mtpDrafter() {
        if (why) throw new Error(why);
        const head = new QwenMtpHead(target);
        return { source: qwenHeadSource(head, o.block), done: () => head.destroy() };
      },
      destroy: () => target.destroy(),
    };
  }
  // E2B / E4B run in their own engine (per-layer embeddings, KV sharing); their assistants read its donors' caches.
  // 26B-A4B runs in the MoE engine (router and experts beside the dense MLP); its assistant is a dense one.
  const target = buildTarget(ctx, w.target, modelOpts);
  const assistant = w.assistant;
  const why = assistant ? null : 'no MTP assistant is loaded (Gemma 4 targets draft with an assistant checkpoint)';
  const position = o.draftPosition ?? 'hf';
  return {
    target,
    policy,
    ...(router ? { router } : {}),
    vocab: w.target.desc.vocab,
    eosIds: w.target.desc.eosIds,
    mtpUnavailable: why,
    mtpDrafter() {
      if (!assistant) throw new Error(why!);
      const asst = new AssistantModel(ctx, assistant, target, position, o.precision);
      return { source: assistantSource(asst), position, done: () => asst.destroy() };
    },
    destroy: () => target.destroy(),
  };
}

/**
 * Oracle drafts for a run without an MTP drafter: the classic run's own tokens, with a fixed pseudo-random
 * third of them replaced by a wrong token, so rounds accept every length from 0 to K-1 drafts and the verify
 * rolls back each time (the state rollback is what such a run checks; the output must stay classic's).
 */
export function pageOracleSource(classic: readonly number[], vocab: number): DraftSource {
  return oracleSource(classic, vocab, oracleWrong);
}

/** Whether the page's oracle gets the draft for emitted index i wrong (a fixed hash: one index in three). */
export function oracleWrong(i: number): boolean {
  return (Math.imul(i + 1, 0x9e3779b1) >>> 0) % 3 === 0;
}
