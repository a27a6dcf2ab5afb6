import type { Checkpoint } from '../format/checkpoint.ts';
import type { Qwen35Checkpoint } from '../format/qwen3_5/checkpoint.ts';
import type { Linear } from '../format/model-description.ts';
import type { CheckpointInfo } from './report.ts';

/** The model summary shown on the page and recorded in report provenance. */
export function checkpointInfo(ck: Checkpoint): CheckpointInfo {
  const d = ck.description;
  return {
    label: ck.label,
    modelType: ck.modelType,
    digest: ck.digest,
    layers: d.layers.length,
    hidden: d.hidden,
    heads: d.layers[0]?.numHeads ?? 0,
    window: d.window,
    vocab: d.vocab,
    quantization: describeQuantization([d.embed, ...d.layers.flatMap((l) => [l.qProj, l.oProj, l.gate, l.up, l.down])]),
    bytes: ck.totalBytes,
  };
}

function describeQuantization(linears: Linear[]): string {
  const kinds = new Map<string, number>();
  for (const l of linears) {
    const k = l.kind === 'affine' ? `affine ${l.bits}-bit g${l.groupSize}` : `${l.weight.dtype} dense`;
    kinds.set(k, (kinds.get(k) ?? 0) + 1);
  }
  return [...kinds.entries()]
    .sort((a, b) => b[1] - a[1])
    .map(([k, n]) => `${k} (${n})`)
    .join(', ');
}

/** The same summary for a Qwen3.5 target (no sliding window: `window` 0; heads of its full-attention layers). */
export function qwenCheckpointInfo(ck: Qwen35Checkpoint): CheckpointInfo {
  const d = ck.description;
  const linears = d.layers.flatMap((l) =>
    l.type === 'full' ? [l.qProj, l.oProj, l.gate, l.up, l.down] : [l.inProjQkv, l.outProj, l.gate, l.up, l.down],
  );
  return {
    label: ck.label,
    modelType: d.modelType,
    digest: ck.digest,
    layers: d.layers.length,
    hidden: d.hidden,
    heads: d.config.attention.numHeads,
    window: 0,
    vocab: d.vocab,
    quantization: describeQuantization([d.embed, ...linears]),
    bytes: ck.totalBytes,
  };
}
