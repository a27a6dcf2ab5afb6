//#include "common.wgsl"
// affine_coop: the exact quantized matvec for GPUs (ops.matmul picks it on hardware adapters for
// decode steps and verify blocks; software adapters keep matmul_lanes.wgsl, see src/gpu/kernel-class.ts).
// y[m, n] = sum_k x[m, k] * W[n, k] for affine 4-bit and 8-bit weights with group_size 32 or 64.
//
// Why this shape: on a GPU a matvec is bound by memory bandwidth, so every weight must be read once,
// by many lanes at a time, in wide coalesced loads. A workgroup of WG invocations covers F = WG / T
// output features; the T invocations of one feature split its quantization groups between them
// (slice t takes groups t, t + T, t + 2T, ...). A group's weights are loaded and unpacked ONCE into
// registers and are unpacked for each row of the block (up to ROWS per pass): a verify block of K rows
// reads the weights once, not K times.
//
// Exactness by construction: the arithmetic of output (m, n) is a fixed sequence that depends only on
// x[m, :], W[n, :], K, group_size and T (a property of the linear, never of M):
//   1. per group g: q = the fixed product tree of matmul_affine_dot.wgsl over its chunks (added in
//      order), then the Neumaier steps scale * hsum(q) and bias' * sx (sx = the group's compensated x
//      sum from matmul.wgsl affine_xsum) into invocation t's partial (s, c), groups in increasing order;
//   2. the T partials of (m, n) are added by ONE invocation in the fixed order t = 0 .. T-1 (a
//      Neumaier sum of the s parts, the c parts summed in the same order and added last).
// The loop over rows is a run-time loop (the same instructions for every row), its per-row partials
// live in workgroup memory indexed by (row, invocation), and no reduction order is left to the
// driver (no subgroup or atomic reductions). Rows past ROWS take another pass over the weights with
// the same code. Weights are unpacked without an integer-to-float conversion (a quarter- or
// eighth-rate instruction on GPUs): the code's bits are placed in the mantissa of 2^23 and
// 2^23 + 2^(BITS-1) is subtracted, which gives q - 2^(BITS-1) exactly, the same centred values the
// lanes kernel unpacks.
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
// Rows of x one pass over the weights serves.
const ROWS: u32 = 8u;

// Partial (s, c) of row m (of the current pass) for invocation lid: part[m * WG + lid].
var<workgroup> part: array<vec2<f32>, ROWS * WG>;

const MAGIC: u32 = 0x4B000000u; // the bits of 2^23
fn centred(bits: vec4<u32>) -> vec4<f32> {
  return bitcast<vec4<f32>>(bits | vec4<u32>(MAGIC)) - vec4<f32>(8388608.0 + half_code());
}
// Weights 8i .. 8i+7 of a chunk from its packed words (4-bit: word i of v; 8-bit: words 2i, 2i+1 of v|u).
fn unpack4(w: u32) -> mat2x4<f32> {
  let lo = (vec4<u32>(w) >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(0xFu);
  let hi = (vec4<u32>(w) >> vec4<u32>(16u, 20u, 24u, 28u)) & vec4<u32>(0xFu);
  return mat2x4<f32>(centred(lo), centred(hi));
}
fn unpack8(w: u32) -> vec4<f32> {
  return centred((vec4<u32>(w) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xFFu));
}
// One packed 16-byte word of matrix `which` (0: w4, 1: w4u; a uniform branch).
fn word(which: u32, i: u32) -> vec4<u32> {
  if (which == 1u) { return w4u[i]; }
  return w4[i];
}
// The packed words of chunk c of the weight row starting at vec4<u32> index `row` (4-bit: one
// 16-byte word, repeated in u; 8-bit: two).
struct Packed { v: vec4<u32>, u: vec4<u32> }
fn load_chunk(which: u32, row: u32, c: u32) -> Packed {
  if (BITS == 4u) {
    let v = word(which, row + c);
    return Packed(v, v);
  }
  return Packed(word(which, row + 2u * c), word(which, row + 2u * c + 1u));
}
// Its 32 weights, centred, in x's order.
fn unpack_chunk_words(p: Packed) -> V8 {
  if (BITS == 4u) {
    let p0 = unpack4(p.v.x); let p1 = unpack4(p.v.y); let p2 = unpack4(p.v.z); let p3 = unpack4(p.v.w);
    return V8(p0[0], p0[1], p1[0], p1[1], p2[0], p2[1], p3[0], p3[1]);
  }
  return V8(unpack8(p.v.x), unpack8(p.v.y), unpack8(p.v.z), unpack8(p.v.w), unpack8(p.u.x), unpack8(p.u.y), unpack8(p.u.z), unpack8(p.u.w));
}
fn scale_of(which: u32, i: u32) -> f32 {
  if (which == 1u) { return bf16_to_f32(u16_at(scales_u[i >> 1u], i)); }
  return scale_at(i);
}
fn bias_of(which: u32, i: u32) -> f32 {
  if (which == 1u) { return bf16_to_f32(u16_at(biases_u[i >> 1u], i)); }
  return bias_at(i);
}
fn x_chunk(b: u32) -> V8 {
  return V8(x4[b], x4[b + 1u], x4[b + 2u], x4[b + 3u], x4[b + 4u], x4[b + 5u], x4[b + 6u], x4[b + 7u]);
}

// One pass of feature n's matrix `which` over rows r0 .. r0+rows-1: each invocation's partials into
// `part`, then invocation t < rows returns row t's total (the other invocations return 0).
fn pass_rows(which: u32, f: u32, t: u32, lid: u32, nc: u32, r0: u32, rows: u32) -> f32 {
  let F = WG / T;
  let groups = P.K / P.group_size;
  let chunks = P.group_size / 32u; // 1 or 2
  let row = nc * ((P.K / 32u) * (BITS / 4u));
  let xrow = P.x_stride / 4u;
  for (var m = 0u; m < rows; m++) { part[m * WG + lid] = vec2<f32>(0.0); }
  for (var g = t; g < groups; g += T) {
    let c0 = g * chunks;
    let p0 = load_chunk(which, row, c0);
    var p1 = p0;
    if (chunks == 2u) { p1 = load_chunk(which, row, c0 + 1u); }
    // The packed words stay in registers and are unpacked again for each row: holding the 64 unpacked
    // weights of a group cost registers, hence workgroups in flight, and measured no faster on an H200
    // (M = 1 and 8 alike; bench --coop-threads runs were within noise, the LM head faster this way).
    let gi = nc * groups + g;
    let scale = scale_of(which, gi);
    let bias = bias_of(which, gi) + scale * half_code();
    for (var m = 0u; m < rows; m++) {
      let xb = (r0 + m) * xrow + 8u * c0;
      var q = chunk_dot(unpack_chunk_words(p0), x_chunk(xb));
      if (chunks == 2u) { q += chunk_dot(unpack_chunk_words(p1), x_chunk(xb + 8u)); }
      var acc = part[m * WG + lid];
      acc = ksum_add(acc, scale * hsum(q));
      acc = ksum_add(acc, bias * xs[(r0 + m) * groups + g]);
      part[m * WG + lid] = acc;
    }
  }
  workgroupBarrier();
  var v = 0.0;
  // Invocation t of feature f totals row t of the pass over the T partials, in order.
  if (t < rows) {
    var s = vec2<f32>(0.0);
    var c = 0.0;
    for (var i = 0u; i < T; i++) {
      let p = part[t * WG + i * F + f];
      s = ksum_add(s, p.x);
      c += p.y;
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
