/**
 * The engine as the page sees it: every method runs inside the Worker and owns all GPU objects.
 * Nothing here touches the DOM. Long operations take a job id (for `cancel(jobId)`, checked between
 * GPU steps) and a progress callback (a comlink proxy).
 */
import { createGpuContext, type AdapterReport, type GpuContext } from '../gpu/device.ts';
import { runSelfTest, type SelfTestResult } from '../gpu/selftest.ts';
import { CancelToken, type ProgressFn } from '../util/cancel.ts';
import { blobSource } from '../format/bytesource.ts';
import { openCheckpoint, type Checkpoint } from '../format/checkpoint.ts';
import { checkCompatibility } from '../format/compat.ts';
import { uploadWeights, type GpuWeights } from '../model/gpu-weights.ts';
import type { AssistantDescription, TargetDescription } from '../format/model-description.ts';
import { checkpointInfo } from '../parity/summary.ts';
import type { CheckpointInfo, PerformanceSummary, ProbeReport } from '../parity/report.ts';
import { pageBenchOptions, runBench, type BenchReport } from '../bench/run.ts';
import { runProbe, type ProbeOptions } from '../parity/probe.ts';
import { POLICIES, policyByName } from '../model/policy.ts';
import { runTrace, type TraceOptions, type TraceReport } from '../parity/trace.ts';
import { TargetModel } from '../model/target.ts';
import { AssistantModel, type DraftConvention } from '../model/assistant.ts';
import { assistantSource, generateClassic, generateMtp, type GenerateResult } from '../model/generate.ts';
import { diffGenerations, type GenerationDiff } from '../parity/generation-diff.ts';
import { loadTokenizer } from '../format/tokenizer.ts';

export type Role = 'target' | 'assistant';

/** Files of one dropped or picked folder: `path` relative to the folder (e.g. "model-00001-of-00002.safetensors"). */
export interface FolderFiles {
  label: string;
  files: { path: string; file: Blob }[];
}

export interface LoadedSummary extends CheckpointInfo {
  role: Role;
  tensors: number;
  ignoredTensors: number;
  hasTokenizer: boolean;
  loadMs: number;
}

export class Engine {
  private ctx: GpuContext | undefined;
  private readonly jobs = new Map<string, CancelToken>();
  protected checkpoints: Partial<Record<Role, { ck: Checkpoint; weights: GpuWeights; loadMs: number }>> = {};

  /** Acquires the adapter and device (once). Throws a GpuError with an actionable message. */
  async init(): Promise<AdapterReport> {
    return (await this.gpu()).report;
  }

  protected async gpu(): Promise<GpuContext> {
    if (!this.ctx) {
      const gpu = (globalThis.navigator as Navigator | undefined)?.gpu;
      const ctx = await createGpuContext(gpu);
      this.ctx = ctx;
      void ctx.lost.then((e) => {
        if (this.ctx === ctx) this.ctx = undefined;
        this.checkpoints = {};
        this.onDeviceLost?.(e.message);
      });
    }
    return this.ctx;
  }

  /** Set by the host to hear about a lost device (called with the user-facing message). */
  onDeviceLost: ((message: string) => void) | undefined;

  async selfTest(): Promise<SelfTestResult> {
    return runSelfTest(await this.gpu());
  }

  /**
   * Opens a checkpoint folder (config + headers, validated), checks it has the expected role and
   * fits with the other one, and streams its weights to the GPU. Replaces a previous one of the role.
   */
  async loadCheckpoint(
    role: Role,
    folder: FolderFiles,
    jobId: string,
    onProgress?: ProgressFn,
  ): Promise<LoadedSummary> {
    const t0 = performance.now();
    const token = this.startJob(jobId);
    try {
      const ctx = await this.gpu();
      const sources = folder.files.map((f) => blobSource(f.path, f.file));
      onProgress?.({ phase: 'open', done: 0, total: 1, detail: 'reading config.json and safetensors headers' });
      const ck = await openCheckpoint(sources, folder.label);
      const actual: Role = ck.description.role;
      if (actual !== role) {
        throw new Error(
          `${folder.label}: this is ${actual === 'target' ? 'a target model' : 'an MTP assistant'} (model_type "${ck.modelType}"), not ${role === 'target' ? 'a target' : 'an assistant'}. Drop it on the ${actual} zone.`,
        );
      }
      const other = this.checkpoints[role === 'target' ? 'assistant' : 'target'];
      if (other) {
        const [t, a] = role === 'target' ? [ck, other.ck] : [other.ck, ck];
        checkCompatibility(t.description as TargetDescription, a.description as AssistantDescription);
      }
      this.checkpoints[role]?.weights.destroy();
      delete this.checkpoints[role];
      const weights = await uploadWeights(ctx.device, ck.description, onProgress, token);
      this.checkpoints[role] = { ck, weights, loadMs: performance.now() - t0 };
      return {
        ...checkpointInfo(ck),
        role,
        tensors: ck.tensors.size,
        ignoredTensors: ck.ignoredTensors,
        hasTokenizer: ck.tokenizer !== undefined,
        loadMs: performance.now() - t0,
      };
    } finally {
      this.endJob(jobId);
    }
  }

  /** Whether a checkpoint of this role is loaded: after a failed load, the previous one survives only if the
   * failure came before its upload started. */
  isLoaded(role: Role): boolean {
    return this.checkpoints[role] !== undefined;
  }

  /** The last "Measure this GPU" figures; attached to the probe reports that follow. */
  private performance: PerformanceSummary | undefined;

  /** The benchmark's short form on this GPU (kernels at 12B shapes, ratios to its own limits). */
  async runBench(jobId: string, onProgress?: ProgressFn): Promise<BenchReport> {
    const token = this.startJob(jobId);
    try {
      const ctx = await this.gpu();
      let lines = 0;
      const report = await runBench(ctx, {
        ...pageBenchOptions(),
        log: (line) => onProgress?.({ phase: 'bench', done: ++lines, total: 26, detail: line }),
      });
      token.throwIfCancelled();
      const s = report.summary;
      this.performance = {
        timing: report.timing,
        copyGBps: s.copyGBps,
        fmaF32Gflops: s.fmaF32Gflops,
        fmaF16Gflops: s.fmaF16Gflops,
        matvec4bitBwRatio: s.matvec4bitBwRatio,
        k4VsM1: s.k4VsM1,
        prefillFlopRatio: s.prefillFlopRatio,
        prefillRows: s.prefillRows,
        e2eModel: s.e2eModel,
        msPerChainToken: s.msPerChainToken,
        chainTokensPerSecond: s.chainTokensPerSecond,
        dispatchesPerToken: s.dispatchesPerToken,
        breakdown: s.breakdown,
      };
      return report;
    } finally {
      this.endJob(jobId);
    }
  }

  /** The numerics policies (exact and the inexact variants), for the run panel. */
  policies(): { name: string; description: string }[] {
    return POLICIES.map((p) => ({ name: p.name, description: p.description }));
  }

  /** Runs the block-versus-chain probe on the loaded target. */
  async runProbe(opts: ProbeOptions, jobId: string, onProgress?: ProgressFn): Promise<ProbeReport> {
    const target = this.requireTarget();
    const token = this.startJob(jobId);
    try {
      const ctx = await this.gpu();
      const report = await runProbe(
        {
          ctx,
          weights: target.weights as GpuWeights<TargetDescription>,
          target: checkpointInfo(target.ck),
          assistant: this.checkpoints.assistant ? checkpointInfo(this.checkpoints.assistant.ck) : undefined,
          platform: typeof navigator !== 'undefined' ? navigator.userAgent : 'unknown',
          onProgress,
          cancel: token,
        },
        opts,
      );
      report.timings.loadMs = target.loadMs;
      if (this.performance) report.performance = this.performance;
      return report;
    } finally {
      this.endJob(jobId);
    }
  }

  /** Teacher-forced trace on the loaded target. */
  async runTrace(opts: TraceOptions, jobId: string, onProgress?: ProgressFn): Promise<TraceReport> {
    const target = this.requireTarget();
    const token = this.startJob(jobId);
    try {
      const ctx = await this.gpu();
      return await runTrace(
        {
          ctx,
          weights: target.weights as GpuWeights<TargetDescription>,
          target: checkpointInfo(target.ck),
          platform: navigator.userAgent,
          onProgress,
          cancel: token,
        },
        opts,
      );
    } finally {
      this.endJob(jobId);
    }
  }

  /**
   * Free generation of one prompt, classic then MTP with the loaded assistant, and their diff. The
   * prompt is token ids, or text when the target folder has a tokenizer.json.
   */
  async runGeneration(
    opts: {
      prompt: number[] | string;
      chat?: boolean;
      maxNew: number;
      block: number;
      policy: string;
      precision: 'f32' | 'bf16';
      draftPosition: DraftConvention;
    },
    jobId: string,
    onProgress?: ProgressFn,
  ): Promise<{
    classic: GenerateResult;
    mtp: GenerateResult;
    diff: GenerationDiff;
    classicText?: string;
    mtpText?: string;
  }> {
    const target = this.requireTarget();
    const assistant = this.checkpoints.assistant;
    if (!assistant) throw new Error('Load the MTP assistant too (drop its folder on the assistant zone).');
    const token = this.startJob(jobId);
    try {
      const ctx = await this.gpu();
      const tokenizer = target.ck.tokenizer ? await loadTokenizer(target.ck.tokenizer) : undefined;
      let prompt: number[];
      if (typeof opts.prompt === 'string') {
        if (!tokenizer)
          throw new Error(`${target.ck.label} has no tokenizer.json: give the prompt as token ids (e.g. 2,105,2364).`);
        prompt = tokenizer.encode(opts.prompt, opts.chat === true);
      } else prompt = opts.prompt;
      const desc = target.weights.desc as TargetDescription;
      const bad = prompt.find((t) => !Number.isInteger(t) || t < 0 || t >= desc.vocab);
      if (bad !== undefined || !prompt.length)
        throw new Error(
          `The prompt must be token ids between 0 and ${desc.vocab - 1}${bad !== undefined ? ` (found ${bad})` : ''}.`,
        );
      const model = new TargetModel(ctx, target.weights as GpuWeights<TargetDescription>, {
        maxContext: prompt.length + opts.maxNew + opts.block,
        maxBlock: opts.block,
        prefillChunk: Math.min(prompt.length, 512),
        precision: opts.precision,
      });
      const asst = new AssistantModel(
        ctx,
        assistant.weights as GpuWeights<AssistantDescription>,
        model,
        opts.draftPosition,
        opts.precision,
      );
      try {
        const base = { maxNew: opts.maxNew, eosIds: desc.eosIds, policy: policyByName(opts.policy), cancel: token };
        const classic = await generateClassic(model, prompt, {
          ...base,
          onProgress: (p) => onProgress?.({ ...p, phase: 'classic decode' }),
        });
        const mtp = await generateMtp(model, assistantSource(asst), prompt, opts.block, {
          ...base,
          draftPosition: opts.draftPosition,
          onProgress: (p) => onProgress?.({ ...p, phase: 'MTP decode' }),
        });
        return {
          classic,
          mtp,
          diff: diffGenerations(classic, mtp),
          classicText: tokenizer?.decode(classic.tokens),
          mtpText: tokenizer?.decode(mtp.tokens),
        };
      } finally {
        asst.destroy();
        model.destroy();
      }
    } finally {
      this.endJob(jobId);
    }
  }

  private requireTarget() {
    const target = this.checkpoints.target;
    if (!target) throw new Error('Load a target checkpoint first (drop its folder on the target zone).');
    return target;
  }

  unload(role: Role): void {
    this.checkpoints[role]?.weights.destroy();
    delete this.checkpoints[role];
  }

  /** Registers a cancellable job; the token is checked between GPU steps. */
  protected startJob(jobId: string): CancelToken {
    const token = new CancelToken();
    this.jobs.set(jobId, token);
    return token;
  }

  protected endJob(jobId: string): void {
    this.jobs.delete(jobId);
  }

  cancel(jobId: string): boolean {
    const token = this.jobs.get(jobId);
    token?.cancel();
    return token !== undefined;
  }
}
