//#include "common.wgsl"
// affine_lanes: the engine's exact quantized matmul, y[m, n] = sum_k x[m, k] * W[n, k], for affine
// 4-bit and 8-bit weights with group_size % 32 == 0 and K % 32 == 0 (ops.matmul falls back to
// matmul.wgsl `affine` otherwise; that choice depends on the linear, never on M).
//
// Layout of the work: one invocation computes FOUR output features n, n + WG, n + 2 WG, n + 3 WG
// (consecutive invocations take consecutive features) for every row m of x, one row after another.
// Weights are read as vec4<u32> (32 4-bit or 16 8-bit weights per load); x is read in chunks of 32
// values (8 vec4) that all invocations of the workgroup share, either loaded by each invocation
// (matmul_lanes_loadx.wgsl) or loaded once per subgroup and broadcast (matmul_lanes_subgroupx.wgsl):
// the VALUES are the same either way, only how they reach the invocation differs.
//
// Exactness: the arithmetic of one output (m, n) is a fixed sequence that depends only on x[m, :],
// W[n, :] and K: per group, a vec4 accumulator takes fma(q, x, acc) over the group's weights in
// order (component i sums the weights with k % 4 == i), the four components are added as
// (c0 + c1) + (c2 + c3), then scale * qx and bias * sx (sx = the group's compensated x sum from
// affine_xsum) are added to a Neumaier-compensated total over groups. Nothing depends on M, on
// where row m sits, or on which of the four features n is. Reading each weight from memory once per
// row (not once per block of rows) is what this costs on compute-bound adapters; on GPUs the rows
// of a verify block re-read the same weights from cache.
override BITS: u32 = 4u;
override WG: u32 = 64u;

struct Params {
  M: u32,          // rows of x
  N: u32,          // output features in this part
  K: u32,          // input features
  group_size: u32, // affine quantization group size (multiple of 32)
  n_offset: u32,   // first output feature of this part (tensors split across bindings)
  x_stride: u32,   // elements between rows of x (multiple of 4)
  y_stride: u32,   // elements between rows of y
  round: u32,      // 1: round the output to bf16 (bf16 activation mode)
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read> scales: array<u32>; // bf16 pairs
@group(0) @binding(5) var<storage, read> biases: array<u32>; // bf16 pairs
@group(0) @binding(6) var<storage, read> xs: array<f32>;     // [M, groups] from matmul.wgsl affine_xsum
@group(0) @binding(7) var<storage, read> x4: array<vec4<f32>>;
@group(0) @binding(8) var<storage, read> w4: array<vec4<u32>>;

// 32 consecutive x values of one row (x_chunk is defined by the including entry-point file).
struct X8 { a0: vec4<f32>, a1: vec4<f32>, a2: vec4<f32>, a3: vec4<f32>, a4: vec4<f32>, a5: vec4<f32>, a6: vec4<f32>, a7: vec4<f32> }

fn bf16_at(arr_is_bias: bool, i: u32) -> f32 {
  let word = select(scales[i >> 1u], biases[i >> 1u], arr_is_bias);
  return bf16_to_f32(u16_at(word, i));
}

// 4-bit: weights 0-3 and 4-7 of one packed word (LSB first) as floats.
fn nib_lo(wd: u32) -> vec4<f32> { return vec4<f32>((vec4<u32>(wd) >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(15u)); }
fn nib_hi(wd: u32) -> vec4<f32> { return vec4<f32>((vec4<u32>(wd) >> vec4<u32>(16u, 20u, 24u, 28u)) & vec4<u32>(15u)); }
// 8-bit: the four weights of one word.
fn bytes4(wd: u32) -> vec4<f32> { return vec4<f32>((vec4<u32>(wd) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(255u)); }

// One chunk of 32 weights of one feature: v (4-bit: one vec4<u32>) or v, u (8-bit: two).
fn chunk4(acc: vec4<f32>, v: vec4<u32>, X: X8) -> vec4<f32> {
  var a = acc;
  a = fma(nib_lo(v.x), X.a0, a); a = fma(nib_hi(v.x), X.a1, a);
  a = fma(nib_lo(v.y), X.a2, a); a = fma(nib_hi(v.y), X.a3, a);
  a = fma(nib_lo(v.z), X.a4, a); a = fma(nib_hi(v.z), X.a5, a);
  a = fma(nib_lo(v.w), X.a6, a); a = fma(nib_hi(v.w), X.a7, a);
  return a;
}
fn chunk8(acc: vec4<f32>, v: vec4<u32>, u: vec4<u32>, X: X8) -> vec4<f32> {
  var a = acc;
  a = fma(bytes4(v.x), X.a0, a); a = fma(bytes4(v.y), X.a1, a);
  a = fma(bytes4(v.z), X.a2, a); a = fma(bytes4(v.w), X.a3, a);
  a = fma(bytes4(u.x), X.a4, a); a = fma(bytes4(u.y), X.a5, a);
  a = fma(bytes4(u.z), X.a6, a); a = fma(bytes4(u.w), X.a7, a);
  return a;
}
fn chunk(acc: vec4<f32>, row: u32, c: u32, X: X8) -> vec4<f32> {
  if (BITS == 4u) { return chunk4(acc, w4[row + c], X); }
  return chunk8(acc, w4[row + 2u * c], w4[row + 2u * c + 1u], X);
}
fn hsum(a: vec4<f32>) -> f32 { return (a.x + a.y) + (a.z + a.w); }

// Neumaier step on four independent sums (one per feature).
fn ksum4_add(s: ptr<function, vec4<f32>>, c: ptr<function, vec4<f32>>, v: vec4<f32>) {
  let t = *s + v;
  *c = *c + select((v - t) + *s, (*s - t) + v, abs(*s) >= abs(v));
  *s = t;
}

// The body of the entry points. lane: this invocation's index in its subgroup (0 when x is loaded
// per invocation). Control flow is uniform (no early return), as subgroup broadcasts require.
fn lanes_body(wid: vec3<u32>, nwg: vec3<u32>, lid: u32, lane: u32) {
  let n = vec4<u32>(linear_workgroup(wid, nwg) * 4u * WG + lid) + vec4<u32>(0u, WG, 2u * WG, 3u * WG);
  let nc = min(n, vec4<u32>(P.N - 1u)); // features past N compute a valid row and are not stored
  let chunks_per_group = P.group_size / 32u;
  let groups = P.K / P.group_size;
  let v4_per_row = (P.K / 32u) * (BITS / 4u);
  let row = nc * v4_per_row;
  for (var m = 0u; m < P.M; m++) {
    let xr = m * (P.x_stride / 4u);
    var s = vec4<f32>(0.0);
    var c = vec4<f32>(0.0);
    for (var g = 0u; g < groups; g++) {
      var q0 = vec4<f32>(0.0);
      var q1 = vec4<f32>(0.0);
      var q2 = vec4<f32>(0.0);
      var q3 = vec4<f32>(0.0);
      for (var j = 0u; j < chunks_per_group; j++) {
        let ci = g * chunks_per_group + j;
        let X = x_chunk(xr + 8u * ci, lane);
        q0 = chunk(q0, row.x, ci, X);
        q1 = chunk(q1, row.y, ci, X);
        q2 = chunk(q2, row.z, ci, X);
        q3 = chunk(q3, row.w, ci, X);
      }
      let gi = nc * groups + vec4<u32>(g);
      let scale = vec4<f32>(bf16_at(false, gi.x), bf16_at(false, gi.y), bf16_at(false, gi.z), bf16_at(false, gi.w));
      let bias = vec4<f32>(bf16_at(true, gi.x), bf16_at(true, gi.y), bf16_at(true, gi.z), bf16_at(true, gi.w));
      ksum4_add(&s, &c, scale * vec4<f32>(hsum(q0), hsum(q1), hsum(q2), hsum(q3)));
      ksum4_add(&s, &c, bias * xs[m * groups + g]);
    }
    let out = s + c;
    let yr = m * P.y_stride + P.n_offset;
    for (var f = 0u; f < 4u; f++) {
      if (n[f] < P.N) { y[yr + n[f]] = select(out[f], round_bf16(out[f]), P.round == 1u); }
    }
  }
}
