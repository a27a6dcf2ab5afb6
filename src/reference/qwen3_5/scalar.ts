/** Scalar functions of the Qwen3.5 float64 reference (model.ts, gdn-ops.ts), in float64. */
export const silu = (x: number): number => x / (1 + Math.exp(-x));
export const sigmoid = (x: number): number => 1 / (1 + Math.exp(-x));
/** torch.nn.functional.softplus (beta 1, threshold 20). */
export const softplus = (x: number): number => (x > 20 ? x : Math.log1p(Math.exp(x)));
