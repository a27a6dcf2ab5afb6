/**
 * The trace's classification thresholds (docs/MODEL.md section 8), in a module with no engine imports so
 * the page can share them without bundling GPU code.
 */
/** Chain top-1 minus top-2 logit gap from which a position counts as decided. */
export const DECIDED_GAP = 2.0;
/** Gap buckets [0,.5) [.5,1) [1,2) [2,5) [5,10) [10,inf). */
export const GAP_BUCKETS = [0, 0.5, 1, 2, 5, 10, Infinity] as const;
