/**
 * A Gemma 4 layer's attention: sliding-window (its K/V in a ring) or full (a cache as long as the context). Its
 * own module because config.ts (which reads it from `layer_types`) and kv-sharing.ts (which config.ts calls to
 * find each shared layer's donor) both name it.
 */
export type LayerType = 'sliding' | 'full';
