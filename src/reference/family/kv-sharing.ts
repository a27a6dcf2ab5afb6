/**
 * KV sharing of Gemma 4 E2B / E4B (and of every assistant layer): the last `numShared` layers have no k/v
 * projections and attend to the K/V of the last non-shared layer of their own type (the "donor").
 * transformers: Gemma4TextAttention.__init__ (is_kv_shared_layer, store_full_length_kv); mlx-lm:
 * gemma4_text.py Gemma4TextModel.previous_kvs and Model.make_cache (only the first L - N layers own caches).
 * Double-wide MLP: Gemma4TextMLP / MLP, `use_double_wide_mlp and layer >= first_shared > 0`.
 */
import type { LayerType } from '../../format/config.ts';

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

/** The donor layers the transformers target exports as `shared_kv_states` (what the assistant reads). */
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

/**
 * A reference KV cache with sharing: per owner layer, the K/V rows in chronological order. `kv(layer)` gives the
 * arrays a layer reads (its donor's); `append(layer, k, v)` refuses a shared layer. A target forward in the
 * reference's layer loop calls append for owners before any query of the step reads (as src/reference/target.ts
 * does per layer), then kv(layer) for every layer.
 */
export class SharedKvCache {
  readonly donors: number[];
  readonly keys: Float64Array[][];
  readonly values: Float64Array[][];

  constructor(types: readonly LayerType[], numShared: number) {
    this.donors = kvDonors(types, numShared);
    const owners = firstKvSharedLayer(types.length, numShared);
    this.keys = Array.from({ length: owners }, () => []);
    this.values = Array.from({ length: owners }, () => []);
  }

  append(layer: number, k: Float64Array, v: Float64Array): void {
    if (this.donors[layer] !== layer) throw new Error(`layer ${layer} is KV-shared: it has no cache of its own`);
    this.keys[layer].push(k);
    this.values[layer].push(v);
  }

  kv(layer: number): { keys: Float64Array[]; values: Float64Array[] } {
    const d = this.donors[layer];
    return { keys: this.keys[d], values: this.values[d] };
  }

  /** Roll every owner back to `length` rows (rejected drafts); shared layers follow their donors. */
  truncate(length: number): void {
    for (let i = 0; i < this.keys.length; i++) {
      this.keys[i].length = Math.min(this.keys[i].length, length);
      this.values[i].length = Math.min(this.values[i].length, length);
    }
  }
}
