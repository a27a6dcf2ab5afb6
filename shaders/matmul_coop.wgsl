//#include "common.wgsl"
// affine_coop: the exact quantized matvec for GPUs (ops.matmul picks it on hardware adapters for
// decode steps and verify blocks; software adapters keep matmul_lanes.wgsl, see src/gpu/kernel-class.ts).
// y[m, n] = sum_k x[m, k] * W[n, k] for affine 4-bit and 8-bit weights with group_size 32 or 64.
//
// Why this shape: on a GPU a matvec is bound by memory bandwidth, so every weight must be read once,
// by many lanes at a time, in wide coalesced loads. A workgroup of WG invocations covers F = WG / T
// output features; the T invocations of one feature split its quantization groups between them
// (slice t takes groups t, t + T, t + 2T, ...). A group's weights are loaded and unpacked ONCE for
// all the rows of the block (up to ROWS per pass): a verify block of K rows reads the weights once,
// not K times.
//
// Exactness by construction: the arithmetic of output (m, n) is a fixed sequence that depends only on
// x[m, :], W[n, :], K, group_size and T (a property of the linear, never of M):
//   1. per group g: four position sums a_j (j = the weight's place within its half word, see
//      `nibbles`), each a chain of fma over the group's words in order; D = (a_0 + a_1 / 16) +
//      (a_2 / 256 + a_3 / 4096) (8-bit: (a_0 + a_2) + (a_1 + a_3) / 256); then the Neumaier steps
//      scale * D and bias' * sx (sx = the group's compensated x sum from matmul.wgsl affine_xsum) into
//      invocation t's partial (s, c), groups in increasing order;
//   2. the T partials of (m, n) are added by ONE invocation in the fixed order t = 0 .. T-1 (a
//      Neumaier sum of the s parts, the c parts summed in the same order and added last).
// Each row has its own accumulators (ROWS of them, in registers) and every row runs the same
// operations on them; no reduction order is left to the driver (no subgroup or atomic reductions).
// Rows past ROWS take another pass over the weights with the same code.
//
// Why this arithmetic: at M = 1 an H200 ran out of instruction issue before bandwidth (about five
// instructions per 4-bit weight: shift, mask, convert, multiply, add). Here a weight costs one
// logic op (mask in place and OR the bits of 2^23: one LOP3 on NVIDIA), one subtract (2^23 plus the
// centring offset, exact) and one fma; the weights of a group are unpacked ONCE and used for all the
// rows of the pass. A code left in place at bit 4j is worth q * 16^j: the 16^j is a power of two,
// so a_j / 16^j is exactly the sum the shifted codes would give, and the scaling costs nothing.
//#include "matmul_affine_io.wgsl"
//#include "matmul_affine_dot.wgsl"
@group(0) @binding(6) var<storage, read> xs: array<f32>;     // [M, groups] from matmul.wgsl affine_xsum
@group(0) @binding(7) var<storage, read> x4: array<vec4<f32>>;
@group(0) @binding(8) var<storage, read> w4: array<vec4<u32>>;
// gate_up only: the up projection's weights, scales and biases (w4, scales, biases hold the gate's).
@group(0) @binding(9) var<storage, read> w4u: array<vec4<u32>>;
@group(0) @binding(10) var<storage, read> scales_u: array<u32>;
@group(0) @binding(11) var<storage, read> biases_u: array<u32>;

// Invocations per output feature (ops.matmul: a function of K / group_size, never of M).
override T: u32 = 32u;
// Weights per quantization group (32 or 64) and the 16-byte words that hold them (1, 2 or 4).
override GS: u32 = 64u;
override WORDS: u32 = GS * BITS / 128u;
// Rows of x one pass over the weights serves.
const ROWS: u32 = 8u;

// Partial (s, c) of row m (of the current pass) for invocation lid: part[m * WG + lid].
var<workgroup> part: array<vec2<f32>, ROWS * WG>;
// Per row of the pass: the current group's position sums, and this invocation's partial (s, c).
// Indexed only by constants once the ROWS loops are unrolled, so they live in registers.
var<private> acc: array<vec4<f32>, ROWS>;
var<private> tot: array<vec2<f32>, ROWS>;

const MAGIC: u32 = 0x4B000000u; // the bits of 2^23
// Codes 0..3 of a half word h (4-bit: bits 0-15) left in place, centred: (q_j - 8) * 16^j exactly.
// (h & mask) | MAGIC is 2^23 + q_j * 16^j (below 2^23, so exact); the subtraction removes 2^23 and
// the centring offset 8 * 16^j in one exact step.
fn nibbles(h: u32) -> vec4<f32> {
  let bits = (vec4<u32>(h) & vec4<u32>(0xFu, 0xF0u, 0xF00u, 0xF000u)) | vec4<u32>(MAGIC);
  return bitcast<vec4<f32>>(bits) - vec4<f32>(8388616.0, 8388736.0, 8390656.0, 8421376.0);
}
// The four 8-bit codes of word w as (q_0 - 128, (q_1 - 128) * 256, q_2 - 128, (q_3 - 128) * 256).
fn bytes8(w: u32) -> vec4<f32> {
  let bits = (vec4<u32>(w, w, w >> 16u, w >> 16u) & vec4<u32>(0xFFu, 0xFF00u, 0xFFu, 0xFF00u)) | vec4<u32>(MAGIC);
  return bitcast<vec4<f32>>(bits) - vec4<f32>(8388736.0, 8421376.0, 8388736.0, 8421376.0);
}
// D of row m: the position sums scaled back (powers of two: exact) and added in a fixed order.
fn group_dot(a: vec4<f32>) -> f32 {
  if (BITS == 4u) { return (a.x + a.y * 0.0625) + (a.z * 0.00390625 + a.w * 0.000244140625); }
  return (a.x + a.z) + (a.y + a.w) * 0.00390625;
}

// One 32-bit word of weights (4-bit: 8 weights, x vec4s xi and xi + 1; 8-bit: 4 weights, x vec4 xi)
// into every row's position sums. The word is unpacked once for all rows.
fn add_word(w: u32, xi: u32, xrow: u32, rows: u32) {
  if (BITS == 4u) {
    let lo = nibbles(w);
    let hi = nibbles(w >> 16u);
    for (var m = 0u; m < ROWS; m++) {
      if (m < rows) { acc[m] = fma(x4[xi + m * xrow + 1u], hi, fma(x4[xi + m * xrow], lo, acc[m])); }
    }
  } else {
    let v = bytes8(w);
    for (var m = 0u; m < ROWS; m++) {
      if (m < rows) { acc[m] = fma(x4[xi + m * xrow], v, acc[m]); }
    }
  }
}

// One packed 16-byte word of matrix `which` (0: w4, 1: w4u; a uniform branch).
fn word(which: u32, i: u32) -> vec4<u32> {
  if (which == 1u) { return w4u[i]; }
  return w4[i];
}
fn scale_of(which: u32, i: u32) -> f32 {
  if (which == 1u) { return bf16_to_f32(u16_at(scales_u[i >> 1u], i)); }
  return scale_at(i);
}
fn bias_of(which: u32, i: u32) -> f32 {
  if (which == 1u) { return bf16_to_f32(u16_at(biases_u[i >> 1u], i)); }
  return bias_at(i);
}

// One pass of feature n's matrix `which` over rows r0 .. r0+rows-1: each invocation's partials into
// `part`, then invocation t < rows returns row t's total (the other invocations return 0).
fn pass_rows(which: u32, f: u32, t: u32, lid: u32, nc: u32, r0: u32, rows: u32) -> f32 {
  let F = WG / T;
  let groups = P.K / GS;
  let xrow = P.x_stride / 4u;
  let xw = 8u / BITS; // x vec4s per 32-bit word of weights: 2 (4-bit) or 1 (8-bit)
  for (var m = 0u; m < ROWS; m++) { tot[m] = vec2<f32>(0.0); }
  for (var g = t; g < groups; g += T) {
    for (var m = 0u; m < ROWS; m++) { acc[m] = vec4<f32>(0.0); }
    let wv = (nc * groups + g) * WORDS; // the group's first 16-byte word
    let x0 = r0 * xrow + g * (GS / 4u); // x vec4 of the group's first weight in row r0
    for (var i = 0u; i < WORDS; i++) {
      let p = word(which, wv + i);
      let xi = x0 + 4u * xw * i;
      add_word(p.x, xi, xrow, rows);
      add_word(p.y, xi + xw, xrow, rows);
      add_word(p.z, xi + 2u * xw, xrow, rows);
      add_word(p.w, xi + 3u * xw, xrow, rows);
    }
    let gi = nc * groups + g;
    let scale = scale_of(which, gi);
    let bias = bias_of(which, gi) + scale * half_code();
    for (var m = 0u; m < ROWS; m++) {
      if (m < rows) {
        let d = scale * group_dot(acc[m]);
        tot[m] = ksum_add(ksum_add(tot[m], d), bias * xs[(r0 + m) * groups + g]);
      }
    }
  }
  for (var m = 0u; m < ROWS; m++) {
    if (m < rows) { part[m * WG + lid] = tot[m]; }
  }
  workgroupBarrier();
  var v = 0.0;
  // Invocation t of feature f totals row t of the pass over the T partials, in order.
  if (t < rows) {
    var s = vec2<f32>(0.0);
    var c = 0.0;
    for (var i = 0u; i < T; i++) {
      let q = part[t * WG + i * F + f];
      s = ksum_add(s, q.x);
      c += q.y;
    }
    v = s.x + (s.y + c);
  }
  workgroupBarrier(); // part is reused by the next pass
  return v;
}

fn rnd(v: f32) -> f32 { return select(v, round_bf16(v), P.round == 1u); }

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  // Invocation lid = t * F + f: neighbouring invocations take neighbouring FEATURES at the same slice t,
  // so the x values a subgroup loads are the same few addresses (broadcast), while each feature's
  // weights stay contiguous across the slices of the subgroup. (With t fastest, each lane of a subgroup
  // read x 256 bytes apart, and the L1 transactions for x bounded the kernel on an H200.)
  let F = WG / T;
  let f = lid % F;
  let t = lid / F;
  let n = linear_workgroup(wid, nwg) * F + f;
  let nc = min(n, P.N - 1u); // features past N compute a valid row and are not stored
  for (var r0 = 0u; r0 < P.M; r0 += ROWS) {
    let rows = min(ROWS, P.M - r0);
    let v = pass_rows(0u, f, t, lid, nc, r0, rows);
    if (t < rows && n < P.N) { y[(r0 + t) * P.y_stride + P.n_offset + n] = rnd(v); }
  }
}

// gate_up: the MLP's gate and up projections of the same x and GeGLU in one dispatch (GPUs, where a
// dispatch costs more than this arithmetic): y[m, n] = r(r(gelu_tanh(g)) * u) with g, u the two
// matmul outputs exactly as `main` computes them (and rounds them) and the GeGLU of elementwise.wgsl.
@compute @workgroup_size(WG)
fn gate_up(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
  let F = WG / T;
  let f = lid % F;
  let t = lid / F;
  let n = linear_workgroup(wid, nwg) * F + f;
  let nc = min(n, P.N - 1u);
  for (var r0 = 0u; r0 < P.M; r0 += ROWS) {
    let rows = min(ROWS, P.M - r0);
    let g = rnd(pass_rows(0u, f, t, lid, nc, r0, rows));
    let u = rnd(pass_rows(1u, f, t, lid, nc, r0, rows));
    if (t < rows && n < P.N) { y[(r0 + t) * P.y_stride + P.n_offset + n] = rnd(rnd(gelu_tanh(g)) * u); }
  }
}
