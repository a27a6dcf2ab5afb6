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
// W[n, :] and K: per chunk of 32 weights, the products q * x summed as a fixed tree into a vec4
// (chunk_dot; component i holds the weights with k % 4 == i); the group's chunks added in order;
// the four components added as (c0 + c1) + (c2 + c3); then scale * qx and bias * sx (sx = the
// group's compensated x sum from affine_xsum) added to a Neumaier-compensated total over groups
// (q centred, bias adjusted: see nib_lo). Nothing depends on M, on where row m sits, or on which of
// the four features n is: every row runs the very same code (the loop over m), so even where a compiler
// fuses a product into an add (WGSL allows it) it does so alike for every row. The kernel tests check
// this byte for byte on lavapipe and SwiftShader (M = 1..8 and 13 vs each row alone). Reading each
// weight from memory once per row (not once per block of rows) is what this costs on compute-bound
// adapters; on GPUs the rows of a verify block re-read the same weights from cache.
//#include "matmul_affine_io.wgsl"
// (group_size is a multiple of 32 and x_stride of 4 here.)
@group(0) @binding(6) var<storage, read> xs: array<f32>;     // [M, groups] from matmul.wgsl affine_xsum
@group(0) @binding(7) var<storage, read> x4: array<vec4<f32>>;
@group(0) @binding(8) var<storage, read> w4: array<vec4<u32>>;

// 32 consecutive values as eight vec4: a chunk of one row of x (x_chunk, defined by the including
// entry-point file) or one chunk of one feature's weights (unpack_chunk), in the same order.
struct V8 { a0: vec4<f32>, a1: vec4<f32>, a2: vec4<f32>, a3: vec4<f32>, a4: vec4<f32>, a5: vec4<f32>, a6: vec4<f32>, a7: vec4<f32> }

// Codes are used CENTRED, q - 2^(BITS-1) (exact small integers), with the group's bias adjusted to
// bias + 2^(BITS-1) * scale, the same real weights. Why: MLX's bias is about -2^(BITS-1) * scale,
// so scale * sum(q x) and bias * sum(x) are two large terms that cancel, and every rounding inside
// sum(q x) is amplified by that cancellation; with centred codes the partial sums stay small. (The
// adjusted bias is usually exact: Sterbenz, |bias| within a factor 2 of 2^(BITS-1) * scale.)
const HALF4 = vec4<f32>(8.0);
const HALF8 = vec4<f32>(128.0);
fn half_code() -> f32 { return f32(1u << (BITS - 1u)); }
// 4-bit: weights 0-3 and 4-7 of one packed word (LSB first), centred.
fn nib_lo(wd: u32) -> vec4<f32> { return vec4<f32>((vec4<u32>(wd) >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(15u)) - HALF4; }
fn nib_hi(wd: u32) -> vec4<f32> { return vec4<f32>((vec4<u32>(wd) >> vec4<u32>(16u, 20u, 24u, 28u)) & vec4<u32>(15u)) - HALF4; }
// 8-bit: the four weights of one word, centred.
fn bytes4(wd: u32) -> vec4<f32> { return vec4<f32>((vec4<u32>(wd) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(255u)) - HALF8; }

// Chunk c of the weight row starting at vec4<u32> index `row` (4-bit: one vec4<u32>, 8-bit: two).
fn unpack_chunk(row: u32, c: u32) -> V8 {
  if (BITS == 4u) {
    let v = w4[row + c];
    return V8(nib_lo(v.x), nib_hi(v.x), nib_lo(v.y), nib_hi(v.y), nib_lo(v.z), nib_hi(v.z), nib_lo(v.w), nib_hi(v.w));
  }
  let v = w4[row + 2u * c];
  let u = w4[row + 2u * c + 1u];
  return V8(bytes4(v.x), bytes4(v.y), bytes4(v.z), bytes4(v.w), bytes4(u.x), bytes4(u.y), bytes4(u.z), bytes4(u.w));
}
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
        q0 += chunk_dot(unpack_chunk(row.x, ci), X);
        q1 += chunk_dot(unpack_chunk(row.y, ci), X);
        q2 += chunk_dot(unpack_chunk(row.z, ci), X);
        q3 += chunk_dot(unpack_chunk(row.w, ci), X);
      }
      let gi = nc * groups + vec4<u32>(g);
      let scale = vec4<f32>(scale_at(gi.x), scale_at(gi.y), scale_at(gi.z), scale_at(gi.w));
      let bias = vec4<f32>(bias_at(gi.x), bias_at(gi.y), bias_at(gi.z), bias_at(gi.w)) + scale * half_code();
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

// ---- affine_tile: the prefill matmul --------------------------------------------------------
// One invocation computes TWO features n, n + WG for a block of 8 rows m0 .. m0+7 (a workgroup covers
// 2 WG features of one row block, so its rows, hence its x chunks, are uniform). Each chunk of
// weights is loaded and unpacked once and used for the 8 rows; each chunk of x for the two features. Rows past M read row M - 1 and are
// not stored. A row's arithmetic is the same in every slot of the block and for every M (the same
// sequence as affine_lanes': chunk_dot trees, chunks in order, (c0 + c1) + (c2 + c3), compensated
// total over groups), though prefill does not need to equal decode bit for bit: both
// arms of every comparison prefill alike.
// Per-group accumulators of one feature for the 8 rows of a block.
struct A8 { r0: vec4<f32>, r1: vec4<f32>, r2: vec4<f32>, r3: vec4<f32>, r4: vec4<f32>, r5: vec4<f32>, r6: vec4<f32>, r7: vec4<f32> }

// Compensated totals of one feature for rows 0-3 (s.., c..: one component per row) and rows 4-7.
struct Tot { sa: vec4<f32>, ca: vec4<f32>, sb: vec4<f32>, cb: vec4<f32> }

fn tile_group_end(t: Tot, a: A8, gi: u32, sxa: vec4<f32>, sxb: vec4<f32>) -> Tot {
  let scale = scale_at(gi);
  let bias = bias_at(gi) + scale * half_code();
  var sa = t.sa; var ca = t.ca; var sb = t.sb; var cb = t.cb;
  ksum4_add(&sa, &ca, scale * vec4<f32>(hsum(a.r0), hsum(a.r1), hsum(a.r2), hsum(a.r3)));
  ksum4_add(&sa, &ca, bias * sxa);
  ksum4_add(&sb, &cb, scale * vec4<f32>(hsum(a.r4), hsum(a.r5), hsum(a.r6), hsum(a.r7)));
  ksum4_add(&sb, &cb, bias * sxb);
  return Tot(sa, ca, sb, cb);
}

fn tile_store(n: u32, m0: u32, t: Tot) {
  if (n >= P.N) { return; }
  let va = t.sa + t.ca;
  let vb = t.sb + t.cb;
  for (var i = 0u; i < 4u; i++) {
    if (m0 + i < P.M) { y[(m0 + i) * P.y_stride + P.n_offset + n] = select(va[i], round_bf16(va[i]), P.round == 1u); }
    if (m0 + 4u + i < P.M) { y[(m0 + 4u + i) * P.y_stride + P.n_offset + n] = select(vb[i], round_bf16(vb[i]), P.round == 1u); }
  }
}

fn tile_body(wid: vec3<u32>, nwg: vec3<u32>, lid: u32, lane: u32) {
  let b = linear_workgroup(wid, nwg);
  let tiles = (P.N + 2u * WG - 1u) / (2u * WG);
  let n0 = (b % tiles) * 2u * WG + lid; // features n0 and n0 + WG
  let n1 = n0 + WG;
  let c0 = min(n0, P.N - 1u);
  let c1 = min(n1, P.N - 1u);
  let m0 = (b / tiles) * 8u;
  let last = vec4<u32>(P.M - 1u);
  let ra = min(vec4<u32>(m0) + vec4<u32>(0u, 1u, 2u, 3u), last);
  let rb = min(vec4<u32>(m0) + vec4<u32>(4u, 5u, 6u, 7u), last);
  let xa = ra * (P.x_stride / 4u);
  let xb = rb * (P.x_stride / 4u);
  let chunks_per_group = P.group_size / 32u;
  let groups = P.K / P.group_size;
  let v4_per_row = (P.K / 32u) * (BITS / 4u);
  let row0 = c0 * v4_per_row;
  let row1 = c1 * v4_per_row;
  let zero = vec4<f32>(0.0);
  var t0 = Tot(zero, zero, zero, zero);
  var t1 = t0;
  for (var g = 0u; g < groups; g++) {
    var a = A8(zero, zero, zero, zero, zero, zero, zero, zero); // feature n0
    var e = a;                                                  // feature n1
    for (var j = 0u; j < chunks_per_group; j++) {
      let ci = g * chunks_per_group + j;
      let W0 = unpack_chunk(row0, ci);
      let W1 = unpack_chunk(row1, ci);
      var X = x_chunk(xa.x + 8u * ci, lane); a.r0 += chunk_dot(W0, X); e.r0 += chunk_dot(W1, X);
      X = x_chunk(xa.y + 8u * ci, lane); a.r1 += chunk_dot(W0, X); e.r1 += chunk_dot(W1, X);
      X = x_chunk(xa.z + 8u * ci, lane); a.r2 += chunk_dot(W0, X); e.r2 += chunk_dot(W1, X);
      X = x_chunk(xa.w + 8u * ci, lane); a.r3 += chunk_dot(W0, X); e.r3 += chunk_dot(W1, X);
      X = x_chunk(xb.x + 8u * ci, lane); a.r4 += chunk_dot(W0, X); e.r4 += chunk_dot(W1, X);
      X = x_chunk(xb.y + 8u * ci, lane); a.r5 += chunk_dot(W0, X); e.r5 += chunk_dot(W1, X);
      X = x_chunk(xb.z + 8u * ci, lane); a.r6 += chunk_dot(W0, X); e.r6 += chunk_dot(W1, X);
      X = x_chunk(xb.w + 8u * ci, lane); a.r7 += chunk_dot(W0, X); e.r7 += chunk_dot(W1, X);
    }
    let sxa = vec4<f32>(xs[ra.x * groups + g], xs[ra.y * groups + g], xs[ra.z * groups + g], xs[ra.w * groups + g]);
    let sxb = vec4<f32>(xs[rb.x * groups + g], xs[rb.y * groups + g], xs[rb.z * groups + g], xs[rb.w * groups + g]);
    t0 = tile_group_end(t0, a, c0 * groups + g, sxa, sxb);
    t1 = tile_group_end(t1, e, c1 * groups + g, sxa, sxb);
  }
  tile_store(n0, m0, t0);
  tile_store(n1, m0, t1);
}
