import type { Qwen35Config } from '../../format/qwen3_5/config.ts';
import { storageBuffer } from '../../gpu/buffers.ts';
import type { Recorder } from '../../gpu/recorder.ts';
import { type GdnGeometry, gdnConvCommit } from './ops.ts';

/**
 * Decode state of the Qwen3.5 target (docs/QWEN35.md section 5), one contract for every layer kind, as
 * KvCache's for Gemma: a step or verify block stages its rows, commit(n) keeps the first n, snapshot and
 * restore copy everything. Each accepted length leaves the bytes of a chain-only run:
 * - Gated DeltaNet layer: the conv window (the last K-1 raw in_proj_qkv rows) and the recurrent state S.
 *   A block never writes them: its raw rows go to `qkvStage` and the state after each of its tokens to row t
 *   of `sStage` (gated_delta.wgsl recurrence, the chain's per-token arithmetic in order). commit(n) builds
 *   the window after n tokens from [window; staged rows] into the spare window buffer (then swaps) and copies
 *   staged state n-1 into S: the K intermediate states are kept, nothing is replayed.
 * - Full-attention layer: a linear K/V cache, row = position; block rows are written at their positions and
 *   rollback only moves nextPos back (rows past it are never read and get overwritten), as KvCache's full layers.
 */
export interface GdnLayerState {
  kind: 'linear';
  /** [K-1, C], the current window; `spare` receives the next one (commit swaps them). */
  window: GPUBuffer;
  spare: GPUBuffer;
  /** [Hv, Dk, Dv] */
  S: GPUBuffer;
  /** [maxBlock, C] the block's raw rows. */
  qkvStage: GPUBuffer;
  /** [maxBlock, Hv, Dk, Dv] the state after each token of the block. */
  sStage: GPUBuffer;
}

export interface KvLayerState {
  kind: 'full';
  /** [maxContext, kvHeads * headDim] */
  k: GPUBuffer;
  v: GPUBuffer;
}

export type QwenLayerState = GdnLayerState | KvLayerState;

export interface QwenStateSnapshot {
  nextPos: number;
  buffers: GPUBuffer[][];
  destroy(): void;
}

export function gdnGeometry(c: Qwen35Config): GdnGeometry {
  const g = c.linear;
  if (!g) throw new Error('this Qwen3.5 config has no Gated DeltaNet geometry');
  return {
    C: g.convDim,
    K: g.convKernel,
    Hk: g.numKeyHeads,
    Hv: g.numValueHeads,
    Dk: g.keyHeadDim,
    Dv: g.valueHeadDim,
  };
}

export class QwenState {
  readonly layers: QwenLayerState[];
  nextPos = 0;
  private readonly g: GdnGeometry | null;

  constructor(
    private readonly device: GPUDevice,
    c: Qwen35Config,
    readonly maxContext: number,
    readonly maxBlock: number,
  ) {
    this.g = c.linear ? gdnGeometry(c) : null;
    const kvw = c.attention.numKvHeads * c.attention.headDim;
    this.layers = c.layerTypes.map((t, i) => {
      const f = (floats: number, label: string) => storageBuffer(device, Math.max(16, floats * 4), `${label}.${i}`);
      if (t === 'full') return { kind: 'full', k: f(maxContext * kvw, 'k'), v: f(maxContext * kvw, 'v') };
      const g = this.g!;
      const sFloats = g.Hv * g.Dk * g.Dv;
      return {
        kind: 'linear',
        window: f((g.K - 1) * g.C, 'conv-window'),
        spare: f((g.K - 1) * g.C, 'conv-window'),
        S: f(sFloats, 'gdn-state'),
        qkvStage: f(maxBlock * g.C, 'qkv-stage'),
        sStage: f(maxBlock * sFloats, 'gdn-state-stage'),
      };
    });
  }

  /** Zero conv windows and states (fresh buffers are zero; a reset after use must clear them). */
  reset(): void {
    for (const l of this.layers) {
      if (l.kind !== 'linear') continue;
      for (const b of [l.window, l.S]) this.device.queue.writeBuffer(b, 0, new Uint8Array(b.size));
    }
    this.nextPos = 0;
  }

  /**
   * The conv window after `n` rows of `qkv` (a prefill chunk or the accepted rows of a block) follow it:
   * recorded into the spare buffer, which becomes the window.
   */
  advanceWindow(rec: Recorder, l: GdnLayerState, qkv: GPUBuffer, n: number): void {
    if (n === 0 || this.g!.K < 2) return;
    gdnConvCommit(rec, this.g!, { window: l.window, qkv, windowOut: l.spare, n });
    [l.window, l.spare] = [l.spare, l.window];
  }

  /** Keeps the first `accepted` rows of the block that started at `blockStart`. */
  commit(rec: Recorder, blockStart: number, accepted: number): void {
    if (accepted > 0) {
      const g = this.g;
      for (const l of this.layers) {
        if (l.kind !== 'linear' || !g) continue;
        this.advanceWindow(rec, l, l.qkvStage, accepted);
        const bytes = g.Hv * g.Dk * g.Dv * 4;
        rec.copy(l.sStage, (accepted - 1) * bytes, l.S, 0, bytes);
      }
    }
    this.nextPos = blockStart + accepted;
  }

  private buffersOf(l: QwenLayerState): GPUBuffer[] {
    return l.kind === 'linear' ? [l.window, l.S] : [l.k, l.v];
  }

  snapshot(rec: Recorder): QwenStateSnapshot {
    const buffers = this.layers.map((l) =>
      this.buffersOf(l).map((src) => {
        const b = storageBuffer(this.device, src.size, `snap-${src.label}`);
        rec.copy(src, 0, b, 0, src.size);
        return b;
      }),
    );
    return { nextPos: this.nextPos, buffers, destroy: () => buffers.flat().forEach((b) => b.destroy()) };
  }

  restore(rec: Recorder, s: QwenStateSnapshot): void {
    this.layers.forEach((l, i) =>
      this.buffersOf(l).forEach((dst, j) => rec.copy(s.buffers[i][j], 0, dst, 0, dst.size)),
    );
    this.nextPos = s.nextPos;
  }

  destroy(): void {
    for (const l of this.layers) {
      const all = l.kind === 'linear' ? [l.window, l.spare, l.S, l.qkvStage, l.sStage] : [l.k, l.v];
      all.forEach((b) => b.destroy());
    }
  }
}
