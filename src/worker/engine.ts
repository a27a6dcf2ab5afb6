/**
 * The engine as the page sees it: every method runs inside the Worker and owns all GPU objects.
 * Nothing here touches the DOM. Long operations take a progress callback and a job id that
 * `cancel(jobId)` can stop between GPU steps.
 */
import { createGpuContext, type AdapterReport, type GpuContext } from '../gpu/device.ts';
import { runSelfTest, type SelfTestResult } from '../gpu/selftest.ts';
import { CancelToken } from '../util/cancel.ts';

export class Engine {
  private ctx: GpuContext | undefined;
  private readonly jobs = new Map<string, CancelToken>();

  /** Acquires the adapter and device (once). Throws a GpuError with an actionable message. */
  async init(): Promise<AdapterReport> {
    if (!this.ctx) {
      const gpu = (globalThis.navigator as Navigator | undefined)?.gpu;
      this.ctx = await createGpuContext(gpu);
      this.ctx.lost.then((e) => {
        this.ctx = undefined;
        this.onDeviceLost?.(e.message);
      });
    }
    return this.ctx.report;
  }

  /** Set by the host to hear about a lost device (called with the user-facing message). */
  onDeviceLost: ((message: string) => void) | undefined;

  async selfTest(): Promise<SelfTestResult> {
    await this.init();
    return runSelfTest(this.ctx!);
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
