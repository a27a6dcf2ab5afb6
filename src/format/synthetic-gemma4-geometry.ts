/**
 * The geometry of a synthetic Gemma 4 checkpoint, any member: the dense geometry (synthetic-geometry.ts) and, for
 * an E-series or MoE preset, what that member adds. Its own module because synthetic.ts and the members' planners
 * (synthetic-gemma4-family.ts, synthetic-gemma4-moe.ts), which synthetic.ts calls, all name it.
 */
import type { ESeriesSynth } from './synthetic-gemma4-family-presets.ts';
import type { MoeSynth } from './synthetic-gemma4-moe-presets.ts';
import type { DenseSynthGeometry } from './synthetic-geometry.ts';

export interface SynthGeometry extends DenseSynthGeometry {
  /** E2B / E4B: per-layer inputs, KV sharing, a centroid-head assistant (planned by synthetic-gemma4-family.ts). */
  eSeries?: ESeriesSynth;
  /** 26B-A4B: router and stacked experts beside the dense MLP (planned by synthetic-gemma4-moe.ts). */
  moe?: MoeSynth;
}
