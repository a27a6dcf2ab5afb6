/**
 * The layer structure of KV sharing in Gemma 4 E2B / E4B (docs/GEMMA4-FAMILY.md, "KV sharing"): the last
 * `numShared` layers have no k/v projections and attend to the K/V of the last non-shared layer of their own type
 * (the "donor"). transformers: Gemma4TextAttention.__init__ (is_kv_shared_layer, store_full_length_kv); mlx-lm:
 * gemma4_text.py Gemma4TextModel.previous_kvs and Model.make_cache (only the first L - N layers own caches).
 * Double-wide MLP: Gemma4TextMLP / MLP, `use_double_wide_mlp and layer >= first_shared > 0`.
 * These are facts of the checkpoint's structure, so they live in the format layer; the CPU reference
 * (src/reference/gemma4/kv-sharing.ts) and the tensor plan (describe.ts) both read them from here.
 */
import type { LayerType } from './layer-type.ts';

/** Index of the first KV-shared layer (L - N; L when nothing is shared, 0 for an assistant). */
export function firstKvSharedLayer(numLayers: number, numShared: number): number {
  if (!Number.isInteger(numShared) || numShared < 0 || numShared > numLayers)
    throw new Error(`num_kv_shared_layers ${numShared} outside [0, ${numLayers}]`);
  return numLayers - numShared;
}

export function isKvSharedLayer(layer: number, numLayers: number, numShared: number): boolean {
  return layer >= firstKvSharedLayer(numLayers, numShared);
}

/**
 * For each layer, the layer whose K/V it attends to: itself for a cache owner, the last owner of its type for a
 * shared layer. Throws when a shared layer's type has no owner (transformers would fail the same way: its
 * `prev_layers[::-1].index(type)` raises). A model whose layers are all shared (an assistant) has no donors in
 * itself: it reads the target's, and this throws for it; use the target's `kvDonors` there.
 */
export function kvDonors(types: readonly LayerType[], numShared: number): number[] {
  const first = firstKvSharedLayer(types.length, numShared);
  const lastOwner = new Map<LayerType, number>();
  for (let i = 0; i < first; i++) lastOwner.set(types[i], i);
  return types.map((t, i) => {
    if (i < first) return i;
    const d = lastOwner.get(t);
    if (d === undefined) throw new Error(`KV-shared layer ${i} (${t}) has no earlier ${t} layer to read from`);
    return d;
  });
}

/** The layers that own a cache (and roll back with it): 0 .. L - N - 1. */
export function cacheOwners(numLayers: number, numShared: number): number[] {
  return Array.from({ length: firstKvSharedLayer(numLayers, numShared) }, (_, i) => i);
}

/**
 * The donor layers the transformers target exports as `shared_kv_states` (what the assistant reads): the last
 * cache owner of each type. With nothing shared, the last layer of each type.
 */
export function storedKvLayers(types: readonly LayerType[], numShared: number): Partial<Record<LayerType, number>> {
  const first = firstKvSharedLayer(types.length, numShared);
  const out: Partial<Record<LayerType, number>> = {};
  for (let i = 0; i < first; i++) out[types[i]] = i;
  return out;
}

/** MLP width of a layer: 2 x intermediate on KV-shared layers of a model with use_double_wide_mlp. */
export function mlpWidth(
  layer: number,
  numLayers: number,
  numShared: number,
  intermediate: number,
  doubleWide: boolean,
): number {
  const first = firstKvSharedLayer(numLayers, numShared);
  return doubleWide && first > 0 && layer >= first ? 2 * intermediate : intermediate;
}
