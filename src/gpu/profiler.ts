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
  /**
   * The same time by workgroup count, largest first: one kernel serves linears of several shapes (q, k,
   * v, o, gate/up, down all run matmul_coop's main), and the workgroup count tells most of them apart.
   */
  byWorkgroups: { workgroups: number; ms: number; dispatches: number }[];
}

const PAIRS = 2048; // dispatches per query set (4096 queries, the spec's limit per set)

interface Slot {
  label: string;
  workgroups: number;
}

interface Pending {
  slots: Slot[];
  readback: GPUBuffer;
}

interface Total {
  ns: number;
  dispatches: number;
}

export class KernelProfiler {
  private readonly sets: GPUQuerySet[] = [];
  private readonly resolveBuf: GPUBuffer;
  private slots: Slot[] = [];
  private pending: Pending[] = [];
  /** Per kernel label, per workgroup count. */
  private readonly totals = new Map<string, Map<number, Total>>();
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

  /** The timestampWrites of the next dispatch's pass (`workgroups`: its workgroup count). */
  slot(label: string, workgroups: number): GPUComputePassTimestampWrites {
    const i = this.slots.length;
    if (i >= PAIRS * 16) throw new Error('profiler: too many dispatches in one submit');
    const set = Math.floor(i / PAIRS);
    while (this.sets.length <= set) this.sets.push(this.device.createQuerySet({ type: 'timestamp', count: 2 * PAIRS }));
    this.slots.push({ label, workgroups });
    const j = i % PAIRS;
    return { querySet: this.sets[set], beginningOfPassWriteIndex: 2 * j, endOfPassWriteIndex: 2 * j + 1 };
  }

  /** Resolves this submit's timestamps into a buffer read back later (called by Recorder.submit). */
  resolve(enc: GPUCommandEncoder): void {
    if (!this.slots.length) return;
    const n = this.slots.length;
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
    this.pending.push({ slots: this.slots, readback });
    this.slots = [];
  }

  /** Reads every submitted profile back and adds it to the totals. */
  async collect(): Promise<void> {
    const pending = this.pending.splice(0);
    for (const p of pending) {
      await p.readback.mapAsync(GPUMapMode.READ);
      const ts = new BigUint64Array(p.readback.getMappedRange().slice(0));
      p.readback.unmap();
      p.readback.destroy();
      p.slots.forEach(({ label, workgroups }, i) => {
        const d = Number(ts[2 * i + 1] - ts[2 * i]);
        if (!(d >= 0) || ts[2 * i + 1] < ts[2 * i]) this.problem = 'a timestamp interval was negative';
        let byWg = this.totals.get(label);
        if (!byWg) this.totals.set(label, (byWg = new Map()));
        const t = byWg.get(workgroups) ?? { ns: 0, dispatches: 0 };
        t.ns += Math.max(0, d);
        t.dispatches++;
        byWg.set(workgroups, t);
      });
    }
    const all = [...this.totals.values()].flatMap((m) => [...m.values()]);
    if (all.length && all.every((t) => t.ns === 0)) this.problem = 'every timestamp interval read as zero';
  }

  /** Totals per kernel divided by `per` (e.g. tokens), largest first. */
  times(per = 1): KernelTime[] {
    return [...this.totals.entries()]
      .map(([kernel, byWg]) => {
        const byWorkgroups = [...byWg.entries()]
          .map(([workgroups, t]) => ({ workgroups, ms: t.ns / 1e6 / per, dispatches: t.dispatches / per }))
          .sort((a, b) => b.ms - a.ms);
        const sum = (k: 'ms' | 'dispatches') => byWorkgroups.reduce((a, w) => a + w[k], 0);
        return { kernel, ms: sum('ms'), dispatches: sum('dispatches'), byWorkgroups };
      })
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
