/** Cooperative cancellation for long engine jobs: checked between GPU steps, never mid-submit. */
export class CancelledError extends Error {
  override readonly name = 'CancelledError';
  constructor() {
    super('Cancelled by the user.');
  }
}

export class CancelToken {
  private cancelled = false;
  cancel(): void {
    this.cancelled = true;
  }
  get isCancelled(): boolean {
    return this.cancelled;
  }
  throwIfCancelled(): void {
    if (this.cancelled) throw new CancelledError();
  }
}

/** Progress of a long job, reported to the UI (via comlink) or the CLI (stderr). */
export interface Progress {
  phase: string;
  done: number;
  total: number;
  /** Free text, e.g. "312 MB of 6.7 GB, 850 MB/s, ETA 7 s". */
  detail?: string;
}
export type ProgressFn = (p: Progress) => void;
