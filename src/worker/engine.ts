/**
 * The engine as the page sees it: every method runs inside the Worker and owns all GPU objects.
 * Nothing here touches the DOM. Long operations take a job id (for `cancel(jobId)`, checked between
 * GPU steps) and a progress callback (a comlink proxy).
 */
import { createGpuContext, type AdapterReport, type GpuContext } from '../gpu/device.ts';
import { parseLimitProfile } from '../gpu/limit-profiles.ts';
import { runSelfTest, type SelfTestResult } from '../gpu/selftest.ts';
import { parseWgslFuzz, setWgslFuzz } from '../gpu/wgsl-fuzz/config.ts';
import { CancelToken, type ProgressFn } from '../util/cancel.ts';
import { blobSource } from '../format/bytesource.ts';
import { checkpointFamily, openFamilyCheckpoint } from '../format/open-target.ts';
import { uploadWeights, type GpuWeights } from '../model/gpu-weights.ts';
import { uploadQwenWeights } from '../model/qwen3_5/weights.ts';
import type { TargetDescription } from '../format/model-description.ts';
import type { CheckpointInfo, PerformanceSummary, ProbeReport, SelfTestRecord } from '../parity/report.ts';
import { pageBenchOptions, runBench, type BenchReport } from '../bench/run.ts';
import { runProbe, type ProbeOptions } from '../parity/probe.ts';
import { policyMenu, type PolicyFamily } from '../model/policy-registry.ts';
import { runTrace, type TraceOptions, type TraceReport } from '../parity/trace.ts';
import { FormatError } from '../format/errors.ts';
import {
  destroyLoaded,
  familyFacts,
  loadedInfo,
  type FamilyFacts,
  type LoadedCheckpoint,
  type LoadedTarget,
} from './loaded-checkpoint.ts';
import { checkPairing, type Role } from './checkpoint-pairing.ts';
import { runGenerationJob, type GenerationOptions, type GenerationRun } from './generation-job.ts';
import { attachQwen35Drafter, QWEN35_MTP_DRAFTER_TYPE } from '../format/qwen3_5/drafter.ts';
import {
  attachedTo,
  attachPageDrafter,
  configModelType,
  draftingWeights,
  openPageDrafter,
  type LoadedDrafter,
} from './qwen-drafter.ts';
import { parseKernelFault, type KernelFault } from '../gpu/kernel-fault.ts';
import { exactnessSelfTestFor, SELFTEST_PHASE } from '../parity/exactness-gate.ts';
import type { ExactnessSelfTestSummary } from '../parity/report.ts';
import { indexedDbExactnessStore } from './exactness-store.ts';
import { checkBlockOption } from './run-options.ts';

export type { GenerationDrafter, GenerationOptions, GenerationProvenance, GenerationRun } from './generation-job.ts';

export type { Role };

/** Files of one dropped or picked folder: `path` relative to the folder (e.g. "model-00001-of-00002.safetensors"). */
export interface FolderFiles {
  label: string;
  files: { path: string; file: Blob }[];
}

export interface LoadedSummary extends CheckpointInfo, FamilyFacts {
  role: Role;
  tensors: number;
  ignoredTensors: number;
  hasTokenizer: boolean;
  loadMs: number;
  /**
   * What this load did to the other zone's checkpoint, which its zone then shows: a split Qwen3.5 MTP drafter that
   * attached to the new target (or was dropped, with attachQwen35Drafter's message), a target whose MTP line now
   * names the drafter.
   */
  other?: OtherZone;
}

/** The other zone's new summary, or the message that says why its checkpoint was dropped. */
export type OtherZone = { role: Role; summary: LoadedSummary } | { role: Role; error: string };

/** Loads replace checkpoints; runs read them (Engine.startJob keeps the two apart). */
type JobKind = 'load' | 'run';

export class Engine {
  private ctx: GpuContext | undefined;
  private readonly jobs = new Map<string, { token: CancelToken; kind: JobKind }>();
  protected checkpoints: { target?: LoadedTarget; assistant?: LoadedCheckpoint } = {};
  /** The page's ?limits= value: the browser limit profile the device is to be capped to (src/gpu/limit-profiles.ts). */
  private limitSetting: string | undefined;

  /**
   * Names the browser limit profile the device is created under (the page passes its ?limits= parameter before
   * anything else). Checked when the device is made, so that an unknown name is refused where the adapter shows.
   */
  useLimitProfile(name: string): void {
    if (this.ctx && name !== this.limitSetting)
      throw new Error(
        `the limit profile must be chosen before the GPU device is created (it was, under "${this.limitSetting ?? 'none'}")`,
      );
    this.limitSetting = name;
  }

  /**
   * Turns the compiler fuzzer on (MODE:SEED, as RINGSIDE_WGSL_FUZZ in Node) for the pipelines created from now on;
   * the page passes its `?wgsl-fuzz=` parameter here before anything else (src/ui/common/engine-client.ts).
   */
  async setWgslFuzz(spec: string): Promise<void> {
    try {
      await setWgslFuzz(parseWgslFuzz(spec, 'the page parameter wgsl-fuzz'));
    } catch (e) {
      // the device is then refused with this message (gpu()), rather than run without the fuzzer asked for
      this.wgslFuzzError = e as Error;
      throw e;
    }
  }
  private wgslFuzzError: Error | undefined;

  /** Acquires the adapter and device (once). Throws a GpuError with an actionable message. */
  async init(): Promise<AdapterReport> {
    return (await this.gpu()).report;
  }

  protected async gpu(): Promise<GpuContext> {
    if (this.wgslFuzzError) throw this.wgslFuzzError;
    if (!this.ctx) {
      const gpu = (globalThis.navigator as Navigator | undefined)?.gpu;
      const limits = parseLimitProfile(this.limitSetting, "the page's ?limits= parameter");
      const ctx = await createGpuContext(gpu, { limits });
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

  /** The last self-test of this page, which every report made after it names in its provenance. */
  private lastSelfTest: SelfTestRecord | undefined;

  async selfTest(): Promise<SelfTestResult> {
    const r = await runSelfTest(await this.gpu());
    this.lastSelfTest = {
      ok: r.ok,
      checks: r.checks.length,
      failed: r.checks.filter((c) => !c.ok).length,
      skipped: r.checks.filter((c) => c.skipped !== undefined).length,
      at: new Date().toISOString(),
    };
    return r;
  }

  /** A fault the exactness self-test injects (the page's `?selftest-fault=` test hook; undefined: none). */
  private selfTestFault: KernelFault | undefined;

  /**
   * Injects `name` (src/gpu/kernel-fault.ts) into the exactness self-test's kernels from now on, so that a test can
   * see the page's warning; undefined removes it. Refuses a name it does not know.
   */
  setSelfTestFault(name: string | undefined): void {
    this.selfTestFault = name === undefined ? undefined : parseKernelFault(name, 'selftest-fault');
  }

  /**
   * The exactness self-test before a verdict: run on this adapter's first probe, trace or generation of the visit
   * (its result kept in memory and in IndexedDB, per adapter, browser and shader build; exactness-gate.ts), read
   * from there after. Its progress is one line of the run's phases.
   */
  private async exactnessSelfTest(
    ctx: GpuContext,
    token: CancelToken,
    onProgress?: ProgressFn,
  ): Promise<ExactnessSelfTestSummary> {
    const { summary } = await exactnessSelfTestFor(ctx, {
      compiler: "this browser's shader compiler",
      fault: this.selfTestFault,
      store: indexedDbExactnessStore(),
      cancel: token,
      onProgress: (p) => onProgress?.({ phase: p.phase, done: p.done, total: p.total, detail: SELFTEST_PHASE }),
    });
    return summary;
  }

  /**
   * Opens a checkpoint folder (config + headers, validated) with its family's opener (Gemma 4 or Qwen3.5, from
   * config.json's model_type: src/format/open-target.ts), checks it has the expected role and fits with the
   * other one, and streams its weights to the GPU. Replaces a previous one of the role.
   */
  async loadCheckpoint(
    role: Role,
    folder: FolderFiles,
    jobId: string,
    onProgress?: ProgressFn,
  ): Promise<LoadedSummary> {
    const t0 = performance.now();
    const token = this.startJob(jobId, 'load');
    try {
      const ctx = await this.gpu();
      const sources = folder.files.map((f) => blobSource(f.path, f.file));
      onProgress?.({ phase: 'open', done: 0, total: 1, detail: 'reading config.json and safetensors headers' });
      const family = await checkpointFamily(sources);
      // A Qwen3.5 folder on the assistant zone is a split MTP drafter (src/worker/qwen-drafter.ts).
      if (role === 'assistant' && family === 'qwen3_5')
        return await this.loadQwenDrafter(ctx, sources, folder.label, t0, token, onProgress);
      if (role === 'target' && (await configModelType(sources)) === QWEN35_MTP_DRAFTER_TYPE)
        throw new FormatError(
          `${folder.label}: a split Qwen3.5 MTP drafter (model_type "${QWEN35_MTP_DRAFTER_TYPE}") on the target zone. Drop it on the MTP assistant zone: it drafts for the Qwen3.5 target loaded here, in place of the target's own mtp.* head.`,
          'config.json',
          'model_type',
        );
      const opened = await openFamilyCheckpoint(sources, folder.label);
      const other = this.checkpoints[role === 'target' ? 'assistant' : 'target'];
      const unloadAssistant = checkPairing(role, opened, other, folder);
      destroyLoaded(this.checkpoints[role]);
      delete this.checkpoints[role];
      // A drafter attached to the target being replaced drafts for it no more.
      const drafter = this.drafter();
      if (role === 'target' && drafter?.attached) {
        drafter.attached.upload.destroy();
        drafter.attached = null;
      }
      let loaded: LoadedTarget | LoadedCheckpoint;
      if (opened.family === 'gemma4') {
        const ck = opened.checkpoint;
        const weights = await uploadWeights(ctx.device, ck.description, onProgress, token);
        loaded = { family: 'gemma4', ck, weights, loadMs: performance.now() - t0 };
      } else {
        const ck = opened.checkpoint;
        const weights = await uploadQwenWeights(ctx.device, ck.description, onProgress, token);
        loaded = { family: 'qwen3_5', ck, weights, loadMs: performance.now() - t0 };
      }
      if (role === 'target') this.checkpoints.target = loaded as LoadedTarget;
      else this.checkpoints.assistant = loaded;
      if (unloadAssistant) {
        destroyLoaded(this.checkpoints.assistant);
        delete this.checkpoints.assistant;
      }
      // A drafter waiting on the assistant zone attaches to a new Qwen3.5 target now, or says why it cannot.
      const consequence: OtherZone | undefined = unloadAssistant
        ? { role: 'assistant', error: unloadAssistant }
        : role === 'target' && drafter
          ? await this.attachWaitingDrafter(ctx, drafter, token, onProgress)
          : undefined;
      return {
        ...this.summaryOf(role)!,
        loadMs: performance.now() - t0,
        ...(consequence ? { other: consequence } : {}),
      };
    } finally {
      this.endJob(jobId);
    }
  }

  /**
   * A split Qwen3.5 MTP drafter folder dropped on the assistant zone: opened and, with a Qwen3.5 target loaded,
   * checked against it (attachQwen35Drafter's message when it does not fit, leaving the previous assistant) and its
   * head alone uploaded; without a target it waits. Refused beside a Gemma 4 target.
   */
  private async loadQwenDrafter(
    ctx: GpuContext,
    sources: ReturnType<typeof blobSource>[],
    label: string,
    t0: number,
    token: CancelToken,
    onProgress?: ProgressFn,
  ): Promise<LoadedSummary> {
    const ck = await openPageDrafter(sources, label);
    const target = this.checkpoints.target;
    if (target?.family === 'gemma4')
      throw new Error(
        `${label}: a split Qwen3.5 MTP drafter (model_type "${QWEN35_MTP_DRAFTER_TYPE}") cannot draft for the loaded Gemma 4 target ${target.ck.label}; load a Qwen3.5 target first (the drafter attaches to it).`,
      );
    // Checked before anything is replaced, so a drafter that does not fit leaves the previous assistant loaded.
    if (target) attachQwen35Drafter(target.ck.description, target.ck.label, ck);
    destroyLoaded(this.checkpoints.assistant);
    delete this.checkpoints.assistant;
    const attached = target ? await attachPageDrafter(ctx.device, target.ck, ck, onProgress, token) : null;
    this.checkpoints.assistant = { family: 'qwen3_5_mtp', ck, attached, loadMs: performance.now() - t0 };
    // The target's summary changes too: its MTP line names the drafter.
    const targetSummary = target ? this.summaryOf('target') : undefined;
    return {
      ...this.summaryOf('assistant')!,
      ...(targetSummary ? { other: { role: 'target' as const, summary: targetSummary } } : {}),
    };
  }

  /**
   * Attaches the waiting drafter to the target just loaded. A Qwen3.5 target it does not fit drops it (the message is
   * attachQwen35Drafter's); beside a Gemma 4 target it keeps waiting.
   */
  private async attachWaitingDrafter(
    ctx: GpuContext,
    drafter: LoadedDrafter,
    token: CancelToken,
    onProgress?: ProgressFn,
  ): Promise<OtherZone> {
    const target = this.checkpoints.target;
    if (target?.family === 'qwen3_5') {
      try {
        drafter.attached = await attachPageDrafter(ctx.device, target.ck, drafter.ck, onProgress, token);
      } catch (e) {
        if (!(e instanceof FormatError)) throw e;
        destroyLoaded(drafter);
        delete this.checkpoints.assistant;
        return { role: 'assistant', error: e.message };
      }
    }
    return { role: 'assistant', summary: this.summaryOf('assistant')! };
  }

  /** The summary a zone shows for its checkpoint now (undefined when the zone is empty). */
  private summaryOf(role: Role): LoadedSummary | undefined {
    const l = this.checkpoints[role];
    if (!l) return undefined;
    const counts =
      l.family === 'qwen3_5_mtp'
        ? { tensors: l.ck.tensors.size, ignoredTensors: 0, hasTokenizer: false }
        : {
            tensors: l.ck.tensors.size,
            ignoredTensors: l.ck.ignoredTensors,
            hasTokenizer: l.ck.tokenizer !== undefined,
          };
    return {
      ...loadedInfo(l),
      ...familyFacts(l, this.drafter()),
      role,
      ...counts,
      loadMs: l.loadMs,
    };
  }

  /** The split Qwen3.5 MTP drafter on the assistant zone, if that is what it holds. */
  private drafter(): LoadedDrafter | undefined {
    const a = this.checkpoints.assistant;
    return a?.family === 'qwen3_5_mtp' ? a : undefined;
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
        gateUp4bitBwRatio: s.gateUp4bitBwRatio,
        prefillFlopRatio: s.prefillFlopRatio,
        prefillRows: s.prefillRows,
        e2eModel: s.e2eModel,
        msPerChainToken: s.msPerChainToken,
        chainTokensPerSecond: s.chainTokensPerSecond,
        dispatchesPerToken: s.dispatchesPerToken,
        warmupFmaRatio: s.e2eWarmupFmaRatio,
        breakdown: s.breakdown,
      };
      return report;
    } finally {
      this.endJob(jobId);
    }
  }

  /**
   * The numerics policies (exact and the inexact variants) a family's targets take, for the run panel; 'gemma4-moe':
   * a Gemma 4 MoE target's (every Gemma 4 policy and moe-grouped).
   */
  policies(family: PolicyFamily = 'gemma4'): { name: string; description: string }[] {
    return policyMenu(family);
  }

  /** Runs the block-versus-chain probe on the loaded target. */
  async runProbe(opts: ProbeOptions, jobId: string, onProgress?: ProgressFn): Promise<ProbeReport> {
    checkBlockOption(opts.block, 1);
    const target = this.requireTarget();
    const token = this.startJob(jobId);
    try {
      const ctx = await this.gpu();
      const exactnessSelfTest = await this.exactnessSelfTest(ctx, token, onProgress);
      const report = await runProbe(
        {
          ctx,
          exactnessSelfTest,
          weights: this.targetWeights(target),
          target: loadedInfo(target),
          // The assistant or split drafter that drafts for this target, recorded in the provenance (a Gemma
          // assistant beside a Qwen3.5 target, or a drafter beside a Gemma 4 one, plays no part in its runs).
          assistant: this.drafterInfoFor(target),
          platform: typeof navigator !== 'undefined' ? navigator.userAgent : 'unknown',
          onProgress,
          cancel: token,
        },
        opts,
      );
      report.timings.loadMs = target.loadMs;
      if (this.performance) report.performance = this.performance;
      if (this.lastSelfTest) report.provenance.selfTest = this.lastSelfTest;
      return report;
    } finally {
      this.endJob(jobId);
    }
  }

  /** Teacher-forced trace on the loaded target. */
  async runTrace(opts: TraceOptions, jobId: string, onProgress?: ProgressFn): Promise<TraceReport> {
    checkBlockOption(opts.block, 1);
    const target = this.requireTarget();
    const token = this.startJob(jobId);
    try {
      const ctx = await this.gpu();
      const exactnessSelfTest = await this.exactnessSelfTest(ctx, token, onProgress);
      const report = await runTrace(
        {
          ctx,
          exactnessSelfTest,
          weights: this.targetWeights(target),
          target: loadedInfo(target),
          platform: navigator.userAgent,
          onProgress,
          cancel: token,
        },
        opts,
      );
      if (this.lastSelfTest) report.provenance.selfTest = this.lastSelfTest;
      return report;
    } finally {
      this.endJob(jobId);
    }
  }

  /**
   * Free generation of one prompt, classic then MTP, and their diff. MTP drafts come from the family's
   * drafter (Gemma 4: the loaded assistant; Qwen3.5: a split MTP drafter attached on the assistant zone, else the
   * target's own mtp.* head), or with `drafts: 'oracle'`
   * from the classic run's own tokens with a fixed third of them wrong (generation-setup.ts), which needs no
   * drafter. The prompt is token ids, or text when the target folder has a tokenizer.json.
   */
  async runGeneration(opts: GenerationOptions, jobId: string, onProgress?: ProgressFn): Promise<GenerationRun> {
    checkBlockOption(opts.block, 2);
    const target = this.requireTarget();
    const assistant = this.assistantFor(target);
    const oracle = opts.drafts === 'oracle';
    if (!oracle && target.family === 'gemma4' && !assistant)
      throw new Error('Load the MTP assistant too (drop its folder on the assistant zone), or choose oracle drafts.');
    const qwenWeights = target.family === 'qwen3_5' ? draftingWeights(target, this.drafter()) : undefined;
    if (!oracle && target.family === 'qwen3_5' && !qwenWeights?.mtp)
      throw new Error(
        `${target.ck.description.mtpUnavailable ?? `${target.ck.label} has no MTP head`}. Drop a split MTP drafter folder (qwen3_5_mtp) on the assistant zone, or choose oracle drafts to run MTP generation without a head.`,
      );
    const token = this.startJob(jobId);
    try {
      const ctx = await this.gpu();
      const exactnessSelfTest = await this.exactnessSelfTest(ctx, token, onProgress);
      return await runGenerationJob(
        opts,
        {
          ctx,
          token,
          target,
          assistant,
          qwenWeights,
          oracle,
          exactnessSelfTest,
          drafter: () => this.drafter(),
          drafterInfo: () => this.drafterInfoFor(target),
          lastSelfTest: () => this.lastSelfTest,
        },
        onProgress,
      );
    } finally {
      this.endJob(jobId);
    }
  }

  /**
   * The loaded target's weights in the form the probe and the trace take (either family's); a Qwen3.5 target's with
   * the attached drafter's head, as the command line uploads `--target T --draft D`.
   */
  private targetWeights(t: LoadedTarget) {
    return t.family === 'qwen3_5' ? draftingWeights(t, this.drafter()) : (t.weights as GpuWeights<TargetDescription>);
  }

  /** The assistant that drafts for this target: a Gemma 4 target's loaded Gemma 4 assistant; none for Qwen3.5. */
  private assistantFor(t: LoadedTarget): Extract<LoadedCheckpoint, { family: 'gemma4' }> | undefined {
    const a = this.checkpoints.assistant;
    return t.family === 'gemma4' && a?.family === 'gemma4' ? a : undefined;
  }

  /** The provenance entry of what drafts for `t`: its Gemma 4 assistant, or the split drafter attached to it. */
  private drafterInfoFor(t: LoadedTarget): CheckpointInfo | undefined {
    const a = this.assistantFor(t);
    if (a) return loadedInfo(a);
    const d = this.drafter();
    return t.family === 'qwen3_5' && d && attachedTo(t.ck, d) ? loadedInfo(d) : undefined;
  }

  private requireTarget() {
    const target = this.checkpoints.target;
    if (!target) throw new Error('Load a target checkpoint first (drop its folder on the target zone).');
    return target;
  }

  unload(role: Role): void {
    destroyLoaded(this.checkpoints[role]);
    delete this.checkpoints[role];
    // A drafter attached to the unloaded target waits for the next one.
    const d = this.drafter();
    if (role === 'target' && d?.attached) {
      d.attached.upload.destroy();
      d.attached = null;
    }
  }

  /**
   * Registers a cancellable job; the token is checked between GPU steps. A load never runs beside a run (probe,
   * trace, generation, measurement), nor a run beside a load or another run: a load replaces the buffers a running
   * job reads (a folder chosen mid-trace would make the trace fail with "used in submit while destroyed"), and
   * two runs would time each other.
   */
  protected startJob(jobId: string, kind: JobKind = 'run'): CancelToken {
    const kinds = [...this.jobs.values()].map((j) => j.kind);
    if (kind === 'load' && kinds.includes('run'))
      throw new Error('A run is in progress: wait for it to finish or cancel it, then load the checkpoint.');
    if (kind === 'run' && kinds.includes('load'))
      throw new Error('A checkpoint is loading: wait for it to finish (or cancel it), then start the run.');
    if (kind === 'run' && kinds.includes('run'))
      throw new Error('Another run is in progress: wait for it to finish or cancel it.');
    const token = new CancelToken();
    this.jobs.set(jobId, { token, kind });
    return token;
  }

  protected endJob(jobId: string): void {
    this.jobs.delete(jobId);
  }

  cancel(jobId: string): boolean {
    const job = this.jobs.get(jobId);
    job?.token.cancel();
    return job !== undefined;
  }
}
