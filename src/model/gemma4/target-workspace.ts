import type { TargetDescription } from '../../format/model-description.ts';
import { storageBuffer } from '../../gpu/buffers.ts';
import { createAttentionScratch } from '../attention-op.ts';
import { RopeTables } from '../rope-tables.ts';
import * as op from '../ops.ts';
import type { TargetOptions } from '../target.ts';

/**
 * The buffers a Gemma 4 target forward records into (TargetCore): per-row buffers as wide as the widest layer,
 * the LM head's rows, the ids / argmax buffers, the attention scratch and the RoPE tables. Every engine of the
 * family names and sizes these the same way; a family adds its own (per-layer inputs, MoE) with add().
 */
export class TargetWorkspace {
  /** Rows of every per-row buffer: a prefill chunk or a verify block, whichever is larger. */
  readonly rows: number;
  /** Rows the stacked q, k, v output (`qkvraw`, op.stackedQkvMatmul) holds: a verify block's. */
  readonly qkvRows: number;
  readonly buf: Record<string, GPUBuffer> = {};
  /** Bound where a kernel's optional input is absent. */
  readonly dummy: GPUBuffer;
  readonly ropes: RopeTables;
  readonly attnScratch: ReturnType<typeof createAttentionScratch>;

  /** `mlpWidth`: the widest gate/up projection (E2B's shared layers are twice as wide as the others). */
  constructor(
    private readonly device: GPUDevice,
    d: TargetDescription,
    opts: TargetOptions,
    mlpWidth: number,
  ) {
    this.ropes = new RopeTables(device, opts.maxContext);
    const R = (this.rows = Math.max(opts.prefillChunk, opts.maxBlock));
    const qw = Math.max(...d.layers.map((l) => l.numHeads * l.headDim));
    const kvw = Math.max(...d.layers.map((l) => l.numKvHeads * l.headDim));
    const heads = Math.max(...d.layers.map((l) => l.numHeads));
    // Prefill rows (any chunk up to R) reduce in one segment each, step rows in up to SEG_MAX.
    this.attnScratch = createAttentionScratch(
      device,
      { heads, qWidth: qw, maxKeys: Math.max(d.window, opts.maxContext), prefillRows: R, stepRows: opts.maxBlock },
      'attn',
    );
    this.add('h', R * d.hidden);
    this.add('xn', R * d.hidden);
    this.add('q', R * qw);
    this.add('kraw', R * kvw);
    this.add('vraw', R * kvw);
    this.add('k', R * kvw);
    this.add('v', R * kvw);
    this.add('attn', R * qw);
    // A layer's stacked q, k and v projections at op.stackedQkvBlocks' places (decode steps and verify blocks).
    this.qkvRows = opts.maxBlock;
    const stack = op.stackedQkvBlocks(this.qkvRows, [qw, kvw, kvw]);
    this.add('qkvraw', stack[2].offset + stack[2].floats);
    this.add('a', R * d.hidden);
    this.add('g', R * mlpWidth);
    this.add('u', R * mlpWidth);
    this.add('y', R * d.hidden);
    // The LM head runs on at most maxBlock rows at a time (bounds the [rows, V] logits buffer).
    this.add('headIn', opts.maxBlock * d.hidden);
    this.add('logits', opts.maxBlock * d.vocab);
    this.buf.ids = storageBuffer(device, R * 4, 'ids');
    this.buf.argmax = storageBuffer(device, opts.maxBlock * 4, 'argmax');
    this.dummy = storageBuffer(device, 16, 'dummy');
  }

  /** Allocates the f32 buffer `name` of `floats` values (freed by destroy()). */
  add(name: string, floats: number): GPUBuffer {
    if (this.buf[name]) throw new Error(`workspace buffer ${name} allocated twice`);
    return (this.buf[name] = storageBuffer(this.device, floats * 4, name));
  }

  destroy(): void {
    Object.values(this.buf).forEach((b) => b.destroy());
    this.attnScratch.buffers.forEach((b) => b.destroy());
    this.ropes.destroy();
    this.dummy.destroy();
  }
}
