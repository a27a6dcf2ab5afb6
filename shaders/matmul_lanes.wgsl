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
// CPU twin: src/reference/quantized-matmul.ts (float64); test: test/gpu/kernels-matmul.test.ts.
// Relaxed-math exactness: one stream. Decode steps and verify blocks take `lanes`, one loop over the rows m < P.M (a run-time
// value) around the same body; `tile` serves prefill forwards only, whose rows no chain step is compared with.
//#include "matmul_affine_io.wgsl"
//#include "matmul_affine_dot.wgsl"
// (group_size is a multiple of 32 and x_stride of 4 here.)
@group(0) @binding(6) var<storage, read> xs: array<f32>;     // [M, groups] from matmul.wgsl affine_xsum
@group(0) @binding(7) var<storage, read> x4: array<vec4<f32>>;
@group(0) @binding(8) var<storage, read> w4: array<vec4<u32>>;

// Centred codes without a subtraction: flipping the top bit of every code (w ^ 0x88888888 for 4-bit,
// ^ 0x80808080 for 8-bit; load_words) turns code q into the two's-complement pattern of q - 2^(BITS-1),
// which an arithmetic shift of the word, moved so the code sits in the top bits, sign-extends.
fn flip_codes(v: vec4<u32>) -> vec4<u32> { return v ^ vec4<u32>(select(0x80808080u, 0x88888888u, BITS == 4u)); }
// 4-bit: weights 0-3 and 4-7 of one code-flipped packed word (LSB first), centred.
fn nib_lo(sw: u32) -> vec4<f32> { return vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(sw) << vec4<u32>(28u, 24u, 20u, 16u)) >> vec4<u32>(28u)); }
fn nib_hi(sw: u32) -> vec4<f32> { return vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(sw) << vec4<u32>(12u, 8u, 4u, 0u)) >> vec4<u32>(28u)); }
// 8-bit: the four weights of one code-flipped word, centred.
fn bytes4(sw: u32) -> vec4<f32> { return vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(sw) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u)); }

// The packed words of chunk c of feature n's weight row (affine_layout.wgsl), codes flipped:
// 4-bit: one vec4<u32> (v; u repeats it), 8-bit: two.
struct Words { v: vec4<u32>, u: vec4<u32> }
fn load_words(n: u32, c: u32) -> Words {
  let k16s = (P.K / 32u) * (BITS / 4u);
  if (BITS == 4u) {
    let v = flip_codes(w4[w16_index(n, c, P.N, k16s)]);
    return Words(v, v);
  }
  return Words(flip_codes(w4[w16_index(n, 2u * c, P.N, k16s)]), flip_codes(w4[w16_index(n, 2u * c + 1u, P.N, k16s)]));
}
// Weights 8i .. 8i+7 of a chunk (i = 0..3) as two vec4: the pair that meets x vec4s 2i and 2i+1.
fn unpack_pair(w: Words, i: u32) -> mat2x4<f32> {
  if (BITS == 4u) { return mat2x4<f32>(nib_lo(w.v[i]), nib_hi(w.v[i])); }
  let h = select(w.u, w.v, i < 2u);
  let j = 2u * (i & 1u);
  return mat2x4<f32>(bytes4(h[j]), bytes4(h[j + 1u]));
}
// The 32 weights of chunk c as eight vec4, in x's order.
fn unpack_chunk(n: u32, c: u32) -> V8 {
  let w = load_words(n, c);
  let p0 = unpack_pair(w, 0u);
  let p1 = unpack_pair(w, 1u);
  let p2 = unpack_pair(w, 2u);
  let p3 = unpack_pair(w, 3u);
  return V8(p0[0], p0[1], p1[0], p1[1], p2[0], p2[1], p3[0], p3[1]);
}
// The body of the entry points. lane: this invocation's index in its subgroup (0 when x is loaded
// per invocation). Control flow is uniform (no early return), as subgroup broadcasts require.
fn lanes_body(wid: vec3<u32>, nwg: vec3<u32>, lid: u32, lane: u32) {
  let n = vec4<u32>(linear_workgroup(wid, nwg) * 4u * WG + lid) + vec4<u32>(0u, WG, 2u * WG, 3u * WG);
  let nc = min(n, vec4<u32>(P.N - 1u)); // features past N compute a valid row and are not stored
  let chunks_per_group = P.group_size / 32u;
  let groups = P.K / P.group_size;
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
        q0 += chunk_dot(unpack_chunk(nc.x, ci), X);
        q1 += chunk_dot(unpack_chunk(nc.y, ci), X);
        q2 += chunk_dot(unpack_chunk(nc.z, ci), X);
        q3 += chunk_dot(unpack_chunk(nc.w, ci), X);
      }
      let gi = vec4<u32>(group_index(nc.x, g, P.N, groups), group_index(nc.y, g, P.N, groups), group_index(nc.z, g, P.N, groups), group_index(nc.w, g, P.N, groups));
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
// One invocation computes FOUR features n + f WG (f = 0..3) for a block of 8 rows m0 .. m0+7 (a
// workgroup covers 4 WG features of one row block, so its rows, hence its x values, are uniform).
// Each chunk's weights are loaded once; per 8-weight pair (unpack_pair) they meet the 8 rows' x.
// Why this shape: on CPU adapters every value a lane needs from another lane or from memory costs
// several instructions and a kernel spills as soon as its live values outgrow the registers; here a
// row's x is fetched once per chunk (x_hold) and handed out per pair (x_pair), and the accumulators are
// one vec4 per row (component f = feature f). Rows past M read row M - 1 and are not stored.
// A row's arithmetic: per pair, dot(w_lo, x_lo) + dot(w_hi, x_hi) added to the row's group sum, pairs
// and chunks in order; then scale * qx and bias * sx into the compensated total, as in lanes. It is the
// same in every slot of the block and for every M (the kernel tests check this byte for byte), though
// prefill does not need to equal decode bit for bit: both arms of every comparison prefill alike.
fn pair_dots(w0: mat2x4<f32>, w1: mat2x4<f32>, w2: mat2x4<f32>, w3: mat2x4<f32>, x: mat2x4<f32>) -> vec4<f32> {
  return vec4<f32>(dot(w0[0], x[0]) + dot(w0[1], x[1]), dot(w1[0], x[0]) + dot(w1[1], x[1]),
                   dot(w2[0], x[0]) + dot(w2[1], x[1]), dot(w3[0], x[0]) + dot(w3[1], x[1]));
}

// Compensated totals of the four features for one row.
struct Tot4 { s: vec4<f32>, c: vec4<f32> }
fn tot_add(t: Tot4, scale: vec4<f32>, bias: vec4<f32>, q: vec4<f32>, sx: f32) -> Tot4 {
  var s = t.s; var c = t.c;
  ksum4_add(&s, &c, scale * q);
  ksum4_add(&s, &c, bias * sx);
  return Tot4(s, c);
}
fn tile_store(n: vec4<u32>, m: u32, t: Tot4) {
  if (m >= P.M) { return; }
  let v = t.s + t.c;
  for (var f = 0u; f < 4u; f++) {
    if (n[f] < P.N) { y[m * P.y_stride + P.n_offset + n[f]] = select(v[f], round_bf16(v[f]), P.round == 1u); }
  }
}

fn tile_body(wid: vec3<u32>, nwg: vec3<u32>, lid: u32, lane: u32) {
  let b = linear_workgroup(wid, nwg);
  let tiles = (P.N + 4u * WG - 1u) / (4u * WG);
  let n = vec4<u32>((b % tiles) * 4u * WG + lid) + vec4<u32>(0u, WG, 2u * WG, 3u * WG);
  let nc = min(n, vec4<u32>(P.N - 1u)); // features past N compute a valid row and are not stored
  let m0 = (b / tiles) * 8u;
  let last = P.M - 1u;
  let xstep = P.x_stride / 4u;
  // x rows of the block (vec4 index of their start)
  let x0 = min(m0, last) * xstep;      let x1 = min(m0 + 1u, last) * xstep;
  let x2 = min(m0 + 2u, last) * xstep; let x3 = min(m0 + 3u, last) * xstep;
  let x4_ = min(m0 + 4u, last) * xstep; let x5 = min(m0 + 5u, last) * xstep;
  let x6 = min(m0 + 6u, last) * xstep; let x7 = min(m0 + 7u, last) * xstep;
  let chunks_per_group = P.group_size / 32u;
  let groups = P.K / P.group_size;
  let zero = Tot4(vec4<f32>(0.0), vec4<f32>(0.0));
  var t0 = zero; var t1 = zero; var t2 = zero; var t3 = zero; var t4 = zero; var t5 = zero; var t6 = zero; var t7 = zero;
  for (var g = 0u; g < groups; g++) {
    var a0 = vec4<f32>(0.0); var a1 = a0; var a2 = a0; var a3 = a0; var a4 = a0; var a5 = a0; var a6 = a0; var a7 = a0;
    for (var j = 0u; j < chunks_per_group; j++) {
      let ci = g * chunks_per_group + j;
      let w0 = load_words(nc.x, ci); let w1 = load_words(nc.y, ci);
      let w2 = load_words(nc.z, ci); let w3 = load_words(nc.w, ci);
      let o = 8u * ci;
      let h0 = x_hold(x0 + o, lane); let h1 = x_hold(x1 + o, lane); let h2 = x_hold(x2 + o, lane); let h3 = x_hold(x3 + o, lane);
      let h4 = x_hold(x4_ + o, lane); let h5 = x_hold(x5 + o, lane); let h6 = x_hold(x6 + o, lane); let h7 = x_hold(x7 + o, lane);
      for (var i = 0u; i < 4u; i++) {
        let p0 = unpack_pair(w0, i); let p1 = unpack_pair(w1, i); let p2 = unpack_pair(w2, i); let p3 = unpack_pair(w3, i);
        a0 += pair_dots(p0, p1, p2, p3, x_pair(x0 + o, h0, i));
        a1 += pair_dots(p0, p1, p2, p3, x_pair(x1 + o, h1, i));
        a2 += pair_dots(p0, p1, p2, p3, x_pair(x2 + o, h2, i));
        a3 += pair_dots(p0, p1, p2, p3, x_pair(x3 + o, h3, i));
        a4 += pair_dots(p0, p1, p2, p3, x_pair(x4_ + o, h4, i));
        a5 += pair_dots(p0, p1, p2, p3, x_pair(x5 + o, h5, i));
        a6 += pair_dots(p0, p1, p2, p3, x_pair(x6 + o, h6, i));
        a7 += pair_dots(p0, p1, p2, p3, x_pair(x7 + o, h7, i));
      }
    }
    let gi = vec4<u32>(group_index(nc.x, g, P.N, groups), group_index(nc.y, g, P.N, groups), group_index(nc.z, g, P.N, groups), group_index(nc.w, g, P.N, groups));
    let scale = vec4<f32>(scale_at(gi.x), scale_at(gi.y), scale_at(gi.z), scale_at(gi.w));
    let bias = vec4<f32>(bias_at(gi.x), bias_at(gi.y), bias_at(gi.z), bias_at(gi.w)) + scale * half_code();
    t0 = tot_add(t0, scale, bias, a0, xs[min(m0, last) * groups + g]);
    t1 = tot_add(t1, scale, bias, a1, xs[min(m0 + 1u, last) * groups + g]);
    t2 = tot_add(t2, scale, bias, a2, xs[min(m0 + 2u, last) * groups + g]);
    t3 = tot_add(t3, scale, bias, a3, xs[min(m0 + 3u, last) * groups + g]);
    t4 = tot_add(t4, scale, bias, a4, xs[min(m0 + 4u, last) * groups + g]);
    t5 = tot_add(t5, scale, bias, a5, xs[min(m0 + 5u, last) * groups + g]);
    t6 = tot_add(t6, scale, bias, a6, xs[min(m0 + 6u, last) * groups + g]);
    t7 = tot_add(t7, scale, bias, a7, xs[min(m0 + 7u, last) * groups + g]);
  }
  tile_store(n, m0, t0); tile_store(n, m0 + 1u, t1); tile_store(n, m0 + 2u, t2); tile_store(n, m0 + 3u, t3);
  tile_store(n, m0 + 4u, t4); tile_store(n, m0 + 5u, t5); tile_store(n, m0 + 6u, t6); tile_store(n, m0 + 7u, t7);
}
