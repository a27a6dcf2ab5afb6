import type { TargetDescription } from '../../format/model-description.ts';
import { storageBuffer } from '../../gpu/buffers.ts';
import type { Recorder } from '../../gpu/recorder.ts';

/** Invocations per workgroup of kv_commit.wgsl (one per element of a committed row). */
const KV_COMMIT_WG = 256;

/**
 * The target's K/V caches (docs/MODEL.md section 4).
 *
 * Sliding layers: a ring of W slots in mlxcel's physical layout. Position `pos` lives in slot
 * `(pos - base) mod W`: base is 0 after a prefill of P <= W tokens and P after a longer one (the
 * prefill is stored linearly and trimmed to the last W; the first decode write lands in slot 0).
 * A decode step or verify block never writes the ring directly: its rows go to per-layer staging
 * rows, which attention reads in place of the slots they will overwrite, and `commit(n)` writes the
 * first n (accepted) rows into their slots (one kv_commit.wgsl dispatch per layer). Rejected rows
 * are simply never committed: that is the rollback, and it leaves ring contents and slot order
 * exactly as a chain-only run would.
 *
 * Full layers: a linear cache, row = position. Block rows are written at their positions before
 * attention; rollback only moves `nextPos` back (rows past it are never read and get overwritten).
 *
 * Each ring also keeps the entry its last write evicted (position nextPos - 1 - W) in `kEvicted` /
 * `vEvicted`: transformers' assistant reads W + 1 sliding keys (|q - kv| <= W), one more than the
 * ring holds. Ring contents and slot order are unaffected.
 */
export interface LayerKv {
  type: 'sliding' | 'full';
  /** Floats per cached token (kv_heads * head_dim). */
  rowFloats: number;
  slots: number;
  k: GPUBuffer;
  v: GPUBuffer;
  /** Staging rows of the current step/block (sliding layers; full layers stage into k/v directly). */
  kStage: GPUBuffer;
  vStage: GPUBuffer;
  /** One row: the entry evicted by the most recent write (sliding layers). */
  kEvicted: GPUBuffer;
  vEvicted: GPUBuffer;
}

export interface CacheState {
  /** Next position to be written (= tokens in the sequence so far). */
  nextPos: number;
  /** Ring layout offset: slot = (pos - base) mod W. */
  base: number;
}

export interface CacheSnapshot {
  state: CacheState;
  k: GPUBuffer[];
  v: GPUBuffer[];
  kEvicted: GPUBuffer[];
  vEvicted: GPUBuffer[];
  destroy(): void;
}

export class KvCache {
  readonly layers: LayerKv[];
  readonly window: number;
  state: CacheState = { nextPos: 0, base: 0 };

  constructor(
    private readonly device: GPUDevice,
    desc: TargetDescription,
    readonly maxContext: number,
    readonly maxBlock: number,
  ) {
    this.window = desc.window;
    this.layers = desc.layers.map((l, i) => {
      const rowFloats = l.numKvHeads * l.headDim;
      const slots = l.type === 'sliding' ? desc.window : maxContext;
      const stageRows = l.type === 'sliding' ? maxBlock : 1;
      return {
        type: l.type,
        rowFloats,
        slots,
        k: storageBuffer(device, slots * rowFloats * 4, `k.${i}`),
        v: storageBuffer(device, slots * rowFloats * 4, `v.${i}`),
        kStage: storageBuffer(device, stageRows * rowFloats * 4, `kstage.${i}`),
        vStage: storageBuffer(device, stageRows * rowFloats * 4, `vstage.${i}`),
        kEvicted: storageBuffer(device, rowFloats * 4, `kevicted.${i}`),
        vEvicted: storageBuffer(device, rowFloats * 4, `vevicted.${i}`),
      };
    });
  }

  /** Physical ring slot of a position (sliding layers). */
  slotOf(pos: number): number {
    return (((pos - this.state.base) % this.window) + this.window) % this.window;
  }

  /**
   * Records the copies that commit the first `accepted` staged rows of the block that started at
   * `blockStart` (sliding layers) and advances nextPos.
   */
  commit(rec: Recorder, blockStart: number, accepted: number): void {
    if (accepted > 0) {
      for (const l of this.layers) {
        if (l.type !== 'sliding') continue;
        // One kv_commit.wgsl dispatch per layer: the last committed row overwrites position (its
        // position - W), whose entry is kept in k/vEvicted first; then the staged rows go to their slots.
        const params = rec.params('kv_commit.wgsl', {
          rows: accepted,
          row_floats: l.rowFloats,
          slot0: this.slotOf(blockStart),
          slots: l.slots,
          save_evicted: true,
        });
        const bindings = [params, l.k, l.v, l.kStage, l.vStage, l.kEvicted, l.vEvicted];
        rec.run(
          'kv_commit.wgsl',
          'main',
          { WG: KV_COMMIT_WG },
          bindings,
          Math.ceil((accepted * l.rowFloats) / KV_COMMIT_WG),
        );
      }
    }
    this.state = { ...this.state, nextPos: blockStart + accepted };
  }

  /**
   * Writes `rows` chunk rows (positions p .. p+rows-1) from a prefill staging buffer into the ring of
   * one sliding layer, during prefill (base 0). Only the last W rows can survive, and they map to
   * distinct slots.
   */
  commitPrefillRows(rec: Recorder, layer: number, kSrc: GPUBuffer, vSrc: GPUBuffer, p: number, rows: number): void {
    const l = this.layers[layer];
    const bytes = l.rowFloats * 4;
    // Entry evicted once this chunk is in: position p + rows - 1 - W, in the chunk or in the ring.
    if (rows > this.window) {
      rec.copy(kSrc, (rows - 1 - this.window) * bytes, l.kEvicted, 0, bytes);
      rec.copy(vSrc, (rows - 1 - this.window) * bytes, l.vEvicted, 0, bytes);
    } else {
      const slot = (p + rows - 1) % this.window;
      rec.copy(l.k, slot * bytes, l.kEvicted, 0, bytes);
      rec.copy(l.v, slot * bytes, l.vEvicted, 0, bytes);
    }
    for (let t = Math.max(0, rows - this.window); t < rows; t++) {
      const slot = (p + t) % this.window;
      rec.copy(kSrc, t * bytes, l.k, slot * bytes, bytes);
      rec.copy(vSrc, t * bytes, l.v, slot * bytes, bytes);
    }
  }

  /**
   * After a prefill of P tokens stored with base 0: when P > W, rotate every ring so that base = P
   * (mlxcel's layout: position P-W in slot 0, the first decode write lands in slot 0).
   */
  finishPrefill(rec: Recorder, P: number): void {
    if (P > this.window) {
      const shift = P % this.window; // new slot s holds old slot (s + P) mod W
      for (const l of this.layers) {
        if (l.type !== 'sliding') continue;
        const bytes = l.rowFloats * 4;
        for (const buf of [l.k, l.v]) {
          const tmp = storageBuffer(this.device, l.slots * bytes, 'ring-rotate');
          rec.temporaries.push(tmp);
          rec.copy(buf, shift * bytes, tmp, 0, (this.window - shift) * bytes);
          rec.copy(buf, 0, tmp, (this.window - shift) * bytes, shift * bytes);
          rec.copy(tmp, 0, buf, 0, this.window * bytes);
        }
      }
      this.state = { nextPos: P, base: P };
    } else {
      this.state = { nextPos: P, base: 0 };
    }
  }

  reset(): void {
    this.state = { nextPos: 0, base: 0 };
  }

  /** GPU copies of every cache buffer plus the layout state. */
  snapshot(rec: Recorder): CacheSnapshot {
    const copyOf = (src: GPUBuffer, size: number) => {
      const b = storageBuffer(this.device, size, `snap-${src.label}`);
      rec.copy(src, 0, b, 0, size);
      return b;
    };
    const size = (l: LayerKv) => l.slots * l.rowFloats * 4;
    const k = this.layers.map((l) => copyOf(l.k, size(l)));
    const v = this.layers.map((l) => copyOf(l.v, size(l)));
    const kEvicted = this.layers.map((l) => copyOf(l.kEvicted, l.rowFloats * 4));
    const vEvicted = this.layers.map((l) => copyOf(l.vEvicted, l.rowFloats * 4));
    return {
      state: { ...this.state },
      k,
      v,
      kEvicted,
      vEvicted,
      destroy: () => [...k, ...v, ...kEvicted, ...vEvicted].forEach((b) => b.destroy()),
    };
  }

  restore(rec: Recorder, s: CacheSnapshot): void {
    this.layers.forEach((l, i) => {
      const size = l.slots * l.rowFloats * 4;
      rec.copy(s.k[i], 0, l.k, 0, size);
      rec.copy(s.v[i], 0, l.v, 0, size);
      rec.copy(s.kEvicted[i], 0, l.kEvicted, 0, l.rowFloats * 4);
      rec.copy(s.vEvicted[i], 0, l.vEvicted, 0, l.rowFloats * 4);
    });
    this.state = { ...s.state };
  }
}
