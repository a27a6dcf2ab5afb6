/**
 * KV sharing of Gemma 4 E2B / E4B (and of every assistant layer): the last `numShared` layers have no k/v
 * projections and attend to the K/V of the last non-shared layer of their own type (the "donor").
 * transformers: Gemma4TextAttention.__init__ (is_kv_shared_layer, store_full_length_kv); mlx-lm:
 * gemma4_text.py Gemma4TextModel.previous_kvs and Model.make_cache (only the first L - N layers own caches).
 * Double-wide MLP: Gemma4TextMLP / MLP, `use_double_wide_mlp and layer >= first_shared > 0`.
 */
import type { LayerType } from '../../format/layer-type.ts';
import { firstKvSharedLayer, kvDonors } from '../../format/kv-sharing.ts';

// The structure (donors, owners, widths) is the format layer's; re-exported for the reference's callers.
export {
  firstKvSharedLayer,
  isKvSharedLayer,
  kvDonors,
  cacheOwners,
  storedKvLayers,
  mlpWidth,
} from '../../format/kv-sharing.ts';

/**
 * A reference KV cache with sharing: per owner layer, the K/V rows in chronological order. `kv(layer)` gives the
 * arrays a layer reads (its donor's); `append(layer, k, v)` refuses a shared layer. A target forward in the
 * reference's layer loop calls append for owners before any query of the step reads (as src/reference/gemma4/target.ts
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
