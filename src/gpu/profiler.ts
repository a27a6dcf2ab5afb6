/**
 * GPU time per kernel, from timestamp queries: while a Recorder has a profiler, every dispatch runs
 * in a compute pass of its own whose beginning and end are timestamped (which adds a little GPU time
 * per dispatch: profile apart from timed runs). Times are grouped by kernel (shader.entry) and say
 * where a decode step's GPU time goes. Needs the 'timestamp-query' feature.
 */
export interface KernelTime {
  kernel: string;
  ms: number;
  dispatches: number;
}

const PAIRS = 2048; // dispatches per query set (4096 queries, the spec's limit per set)

interface Pending {
  labels: string[];
  readback: GPUBuffer;
}

export class KernelProfiler {
  private readonly sets: GPUQuerySet[] = [];
  private readonly resolveBuf: GPUBuffer;
  private labels: string[] = [];
  private pending: Pending[] = [];
  private readonly totals = new Map<string, { ns: number; dispatches: number }>();
  /** Set when the timestamps looked unusable (all zero, or decreasing). */
  problem?: string;

  constructor(private readonly device: GPUDevice) {
    if (!device.features.has('timestamp-query')) throw new Error('kernel profiling needs the timestamp-query feature');
    this.resolveBuf = device.createBuffer({
      label: 'profile-resolve',
      size: PAIRS * 16,
      usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC,
    });
  }

  /** The timestampWrites of the next dispatch's pass. */
  slot(label: string): GPUComputePassTimestampWrites {
    const i = this.labels.length;
    if (i >= PAIRS * 16) throw new Error('profiler: too many dispatches in one submit');
    const set = Math.floor(i / PAIRS);
    while (this.sets.length <= set) this.sets.push(this.device.createQuerySet({ type: 'timestamp', count: 2 * PAIRS }));
    this.labels.push(label);
    const j = i % PAIRS;
    return { querySet: this.sets[set], beginningOfPassWriteIndex: 2 * j, endOfPassWriteIndex: 2 * j + 1 };
  }

  /** Resolves this submit's timestamps into a buffer read back later (called by Recorder.submit). */
  resolve(enc: GPUCommandEncoder): void {
    if (!this.labels.length) return;
    const n = this.labels.length;
    const readback = this.device.createBuffer({
      label: 'profile-read',
      size: n * 16,
      usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.MAP_READ,
    });
    for (let s = 0; s * PAIRS < n; s++) {
      const count = Math.min(PAIRS, n - s * PAIRS);
      enc.resolveQuerySet(this.sets[s], 0, 2 * count, this.resolveBuf, 0);
      enc.copyBufferToBuffer(this.resolveBuf, 0, readback, s * PAIRS * 16, count * 16);
    }
    this.pending.push({ labels: this.labels, readback });
    this.labels = [];
  }

  /** Reads every submitted profile back and adds it to the totals. */
  async collect(): Promise<void> {
    const pending = this.pending.splice(0);
    for (const p of pending) {
      await p.readback.mapAsync(GPUMapMode.READ);
      const ts = new BigUint64Array(p.readback.getMappedRange().slice(0));
      p.readback.unmap();
      p.readback.destroy();
      p.labels.forEach((label, i) => {
        const d = Number(ts[2 * i + 1] - ts[2 * i]);
        if (!(d >= 0) || ts[2 * i + 1] < ts[2 * i]) this.problem = 'a timestamp interval was negative';
        const t = this.totals.get(label) ?? { ns: 0, dispatches: 0 };
        t.ns += Math.max(0, d);
        t.dispatches++;
        this.totals.set(label, t);
      });
    }
    const all = [...this.totals.values()];
    if (all.length && all.every((t) => t.ns === 0)) this.problem = 'every timestamp interval read as zero';
  }

  /** Totals per kernel divided by `per` (e.g. tokens), largest first. */
  times(per = 1): KernelTime[] {
    return [...this.totals.entries()]
      .map(([kernel, t]) => ({ kernel, ms: t.ns / 1e6 / per, dispatches: t.dispatches / per }))
      .sort((a, b) => b.ms - a.ms);
  }

  reset(): void {
    this.totals.clear();
  }

  destroy(): void {
    this.sets.forEach((s) => s.destroy());
    this.resolveBuf.destroy();
    this.pending.forEach((p) => p.readback.destroy());
  }
}
