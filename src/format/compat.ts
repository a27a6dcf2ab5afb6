import { FormatError } from './errors.ts';
import type { AssistantDescription, DecoderLayer, TargetDescription } from './model-description.ts';

/**
 * Checks that an assistant can draft for a target: it reads the target's hidden state and embeddings and
 * attends to the K/V of the target's last sliding and last full layer that own a cache (on E-series targets the
 * donors of the KV-shared layers), so those geometries must agree.
 * Throws a FormatError listing every mismatch.
 */
export function checkCompatibility(target: TargetDescription, assistant: AssistantDescription): void {
  const problems: string[] = [];
  if (assistant.backboneHidden !== target.hidden) {
    problems.push(`assistant backbone_hidden_size ${assistant.backboneHidden} != target hidden_size ${target.hidden}`);
  }
  if (assistant.vocab !== target.vocab)
    problems.push(`assistant vocab_size ${assistant.vocab} != target vocab_size ${target.vocab}`);
  for (const a of assistant.layers) {
    const t = lastOfType(target.layers, a.type);
    if (!t) {
      problems.push(`assistant layer ${a.index} is ${a.type} but the target has no ${a.type} layer to read K/V from`);
      continue;
    }
    const where = `assistant layer ${a.index} (${a.type}) vs target layer ${t.index}`;
    if (a.headDim !== t.headDim) problems.push(`${where}: head dim ${a.headDim} != ${t.headDim}`);
    if (a.numKvHeads !== t.numKvHeads) problems.push(`${where}: KV heads ${a.numKvHeads} != ${t.numKvHeads}`);
    if (a.numHeads % t.numKvHeads !== 0)
      problems.push(`${where}: ${a.numHeads} query heads not a multiple of the target's ${t.numKvHeads} KV heads`);
    if (
      a.rope.theta !== t.rope.theta ||
      a.rope.partialRotary !== t.rope.partialRotary ||
      a.rope.ropeType !== t.rope.ropeType
    ) {
      problems.push(`${where}: RoPE ${fmtRope(a)} != ${fmtRope(t)}`);
    }
  }
  if (assistant.layers.some((l) => l.type === 'sliding') && assistant.window !== target.window) {
    problems.push(`assistant sliding_window ${assistant.window} != target sliding_window ${target.window}`);
  }
  if (problems.length > 0) {
    throw new FormatError(
      `assistant (${assistant.modelType}) does not fit target (${target.modelType}): ${problems.join('; ')}`,
    );
  }
}

/** The target layer whose K/V the assistant reads for a layer type: the last one that owns its cache. */
function lastOfType(layers: DecoderLayer[], type: DecoderLayer['type']): DecoderLayer | undefined {
  for (let i = layers.length - 1; i >= 0; i--)
    if (layers[i].type === type && layers[i].kvDonor === undefined) return layers[i];
  return undefined;
}

function fmtRope(l: DecoderLayer): string {
  return `${l.rope.ropeType} theta ${l.rope.theta} partial ${l.rope.partialRotary}`;
}
