import type { Checkpoint } from '../format/checkpoint.ts';
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
