// The per-chunk arithmetic the exact affine matmuls share (matmul_lanes.wgsl lanes/tile and
// matmul_coop.wgsl): a chunk of 32 weights and 32 x values as eight vec4, its fixed product tree, and
// the Neumaier step of the per-feature totals. One source, so the kernels sum a group alike.
// 32 consecutive values as eight vec4: a chunk of one row of x (x_chunk, defined by the including
// entry-point file) or one chunk of one feature's weights (unpack_chunk), in the same order.
// Relaxed-math exactness: one stream. The arithmetic its includers share; each includer says how its rows reach it.
struct V8 { a0: vec4<f32>, a1: vec4<f32>, a2: vec4<f32>, a3: vec4<f32>, a4: vec4<f32>, a5: vec4<f32>, a6: vec4<f32>, a7: vec4<f32> }

// q * x over one chunk, as a vec4 (component i: the weights with k % 4 == i), summed as a fixed
// binary tree: three levels of rounding instead of a chain of eight.
fn chunk_dot(W: V8, X: V8) -> vec4<f32> {
  return ((W.a0 * X.a0 + W.a1 * X.a1) + (W.a2 * X.a2 + W.a3 * X.a3)) + ((W.a4 * X.a4 + W.a5 * X.a5) + (W.a6 * X.a6 + W.a7 * X.a7));
}
fn hsum(a: vec4<f32>) -> f32 { return (a.x + a.y) + (a.z + a.w); }

// Neumaier step on four independent sums (one per feature).
fn ksum4_add(s: ptr<function, vec4<f32>>, c: ptr<function, vec4<f32>>, v: vec4<f32>) {
  let t = *s + v;
  *c = *c + select((v - t) + *s, (*s - t) + v, abs(*s) >= abs(v));
  *s = t;
}


// Codes are used CENTRED, q - 2^(BITS-1) (exact small integers), with the group's bias adjusted to
// bias + 2^(BITS-1) * scale, the same real weights. Why: MLX's bias is about -2^(BITS-1) * scale,
// so scale * sum(q x) and bias * sum(x) are two large terms that cancel, and every rounding inside
// sum(q x) is amplified by that cancellation; with centred codes the partial sums stay small. (The
// adjusted bias is usually exact: Sterbenz, |bias| within a factor 2 of 2^(BITS-1) * scale.)
fn half_code() -> f32 { return f32(1u << (BITS - 1u)); }
