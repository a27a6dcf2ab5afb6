//#include "common.wgsl"
//#include "affine_layout.wgsl"
// MLX's quantized matvec kernels, reduction order for reduction order: what a Mac running MLX computes for
// y[m, n] = sum_k x[m, k] W[n, k] with affine weights (W = scale q + bias per group), so that the
// parity lab can predict which verify rows differ from decode there (the per-chip policies mlx-m1, ...,
// mlx-m5 and their +fma twins; src/model/mlx-dispatch.ts says which kernel MLX picks for which linear and M).
// Each entry point follows one kernel of mlx/backend/metal/kernels/quantized.h (ml-explore/mlx at
// 846d17622). CPU twin, operation for operation in float32: src/reference/mlx-orders.ts; the two are
// compared byte for byte in test/gpu/mlx-policies.test.ts.
//
// One invocation computes one output (m, n) and plays every SIMD lane of MLX's kernel in turn, keeping
// each lane's partial sum, then adds the partials in the order of MLX's cross-lane reduction. Why not
// real subgroups: the order must not depend on the adapter's subgroup size (lavapipe 8, SwiftShader 4,
// most GPUs 32, Apple 32), and a diagnostic policy can afford the serial work.
//
// Order is enforced, not hoped for: every product and sum goes through mul() / add(), whose result is
// XORed with P._zero (always 0, unknown to the compiler). A WGSL compiler may otherwise reassociate
// float adds and fuse a product into an add (lavapipe's did: r + (s a + t b) became fma(t, b, r + s a)),
// which would make the order this file spells out a suggestion.
//
// What is modelled and what is assumed (no Apple documentation fixes these):
// - MLX compiles its kernels with -fno-fast-math, which in clang leaves -ffp-contract=on: within one
//   expression `a * b + c` may become one fma (clang's front end forms llvm.fmuladd, which the back end
//   may fuse); across statements nothing fuses. FMA = 0 reads every * and + as rounded on its own; FMA = 1
//   reads each such expression of the kernels as fused (muladd() below, used where the kernel's source has
//   one: qdot's products and its `scale * accum + sum * bias`, qmv_wide's `acc += x * w`);
// - simd_sum (qmv, qmv_fast) and quad_sum (qmv_quad) add the lanes as the shuffle-down ladder that
//   qmv_wide spells out (offsets n/2, ..., 2, 1): lane 0 ends with ((p0 + p16) + (p8 + p24)) + ...;
// - in bf16 activations (P.round = 1) load_vector's `x[i] + x[i+1] + x[i+2] + x[i+3]` adds bfloat
//   values in bfloat (each add rounded to bf16, MSL 3.1 native bfloat) before adding to the f32 sum.
// Codes with 2, 4 or 8 bits (power-of-two packs, as every Gemma 4 MLX checkpoint has); ops refuses others.
// Relaxed-math exactness: not on the exact path. These are the MLX policies' emulations, run only under those
// policies; each rounded operation of MLX's order is pinned (pin(), mul()) so that the compiler keeps it.
override BITS: u32 = 4u;
override WG: u32 = 64u;
// 1: MLX's a * b + c expressions fused (policies mlx-...+fma, MlxMachine.fma), 0: rounded twice.
override FMA: u32 = 0u;

// matmul_affine_io.wgsl's fields (ops fills them alike) and _zero, the opaque 0 of mul() and add().
struct Params {
  M: u32,          // rows of x
  N: u32,          // output features in this part
  K: u32,          // input features
  group_size: u32, // affine quantization group size
  n_offset: u32,   // first output feature of this part
  x_stride: u32,   // elements between rows of x
  y_stride: u32,   // elements between rows of y
  round: u32,      // 1: bf16 activations (bfloat adds in load_vector, outputs rounded to bf16)
  _zero: u32,      // always 0 (a `_` field: written as 0 by Recorder.params)
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read> scales: array<u32>; // bf16 pairs
@group(0) @binding(5) var<storage, read> biases: array<u32>; // bf16 pairs

fn scale_at(i: u32) -> f32 { return bf16_to_f32(u16_at(scales[i >> 1u], i)); }
fn bias_at(i: u32) -> f32 { return bf16_to_f32(u16_at(biases[i >> 1u], i)); }

// One rounded f32 operation whose result the compiler cannot fold into a neighbour.
fn pin(v: f32) -> f32 { return bitcast<f32>(bitcast<u32>(v) ^ P._zero); }
fn mul(a: f32, b: f32) -> f32 { return pin(a * b); }
fn add(a: f32, b: f32) -> f32 { return pin(a + b); }
fn sub(a: f32, b: f32) -> f32 { return pin(a - b); }

// ---- a * b + c as MLX's compile may leave it: fused (FMA = 1) or two roundings ---------------------
// The fused value is built here rather than taken from WGSL's fma(), whose accuracy WGSL only inherits
// from e1 * e2 + e3 (an implementation may round twice). From error-free transforms on pinned operations,
// after Boldo and Melquiond ("Emulation of a FMA and correctly rounded sums: proved algorithms using
// rounding to odd", IEEE Trans. Computers 57(4), 2008): a b = p + e exactly (Dekker's product with
// Veltkamp's split), c + p = t + t' exactly (2Sum), v = t' + e rounded to odd, and t + v rounded to nearest
// is a b + c rounded once. Exact as long as nothing underflows (|a b| above about 2^-100) or overflows
// (|a|, |b| below 2^114): activations, scales and codes are far inside. CPU twin: fmaF32 in
// src/reference/mlx-orders.ts (exact by another route), compared in test/gpu/mlx-policies.test.ts.
fn two_sum(a: f32, b: f32) -> vec2<f32> {
  let s = add(a, b);
  let bb = sub(s, a);
  return vec2<f32>(s, add(sub(a, sub(s, bb)), sub(b, bb)));
}
fn split(a: f32) -> vec2<f32> {
  let g = mul(4097.0, a); // 2^12 + 1: two halves of 12 significant bits
  let hi = sub(g, sub(g, a));
  return vec2<f32>(hi, sub(a, hi));
}
fn fma_rn(a: f32, b: f32, c: f32) -> f32 {
  let p = mul(a, b);
  let sa = split(a);
  let sb = split(b);
  let e = add(add(add(sub(mul(sa.x, sb.x), p), mul(sa.x, sb.y)), mul(sa.y, sb.x)), mul(sa.y, sb.y));
  let t = two_sum(c, p);
  let v = two_sum(t.y, e);
  var odd = v.x;
  let vb = bitcast<u32>(v.x);
  if (v.y != 0.0 && (vb & 1u) == 0u) {
    // round to odd: the neighbour of v.x on the side of the remainder v.y
    if (v.x == 0.0) { odd = v.y; } else { odd = bitcast<f32>(select(vb - 1u, vb + 1u, (v.y > 0.0) == (v.x > 0.0))); }
  }
  return add(t.x, odd);
}
fn muladd(a: f32, b: f32, c: f32) -> f32 {
  if (FMA == 1u) { return fma_rn(a, b, c); }
  return add(mul(a, b), c);
}

// qmv family: SIMD lanes per output and values per lane and block (mlx-dispatch.ts mlxKernel).
override LANES: u32 = 32u;
override VPT: u32 = 8u;
// qmv_wide: lanes reducing K per output (k_lanes: 8 for affine) and values per dequantized sub-chunk.
const KL = 8u;
const SUB = 8u;

// Code of input k of output row n, as stored (0 .. 2^BITS - 1).
fn code(n: u32, k: u32) -> u32 {
  let bit = k * BITS;
  let words_per_row = P.K * BITS / 32u;
  return (w[w32_index(n, bit / 32u, P.N, words_per_row)] >> (bit % 32u)) & ((1u << BITS) - 1u);
}

// A T-typed add of load_vector: f32, or bfloat in bf16 activations (see the header).
fn t_add(a: f32, b: f32) -> f32 {
  let v = add(a, b);
  return select(v, round_bf16(v), P.round == 1u);
}

fn store(m: u32, n: u32, v: f32) {
  y[m * P.y_stride + P.n_offset + n] = select(v, round_bf16(v), P.round == 1u);
}

// ---- qmv, qmv_fast, qmv_quad -------------------------------------------------------------------
// quantized.h qmv_impl / qmv_fast_impl / qmv_quad_impl with load_vector(_safe) and qdot(_safe): lane l
// of a block of LANES * VPT inputs takes VPT consecutive ones starting at l * VPT (all in one group);
// per block it adds `scale * accum + sum * bias` to its partial, where sum is the x sum of load_vector
// and accum qdot's sum of products: for 2 and 4 bits per four inputs ((x0 c0 + x1' c1) + x2' c2) + x3' c3,
// the codes masked but not shifted (c_j = q_j << BITS j) and x pre-divided (x_j' = x_j / 2^(BITS j)),
// as MLX reads a 16- or 8-bit pack; for 8 bits one product at a time. Blocks run in order; at the end
// of K a lane takes what is left (qmv's safe tail: fewer values, or none). qmv and qmv_fast differ only
// in VPT (qmv_fast reads two packs per lane), qmv_quad in LANES = 4 and VPT = K / 4 (one block).
fn lane_block(m: u32, n: u32, k0: u32, count: u32) -> f32 {
  let xr = m * P.x_stride;
  let gi = group_index(n, k0 / P.group_size, P.N, P.K / P.group_size);
  let scale = scale_at(gi);
  let bias = bias_at(gi);
  var sum = 0.0;
  var accum = 0.0;
  if (BITS == 8u) {
    for (var i = 0u; i < count; i++) { sum = add(sum, x[xr + k0 + i]); }
    // accum += x * w: accum = x w + accum
    for (var i = 0u; i < count; i++) { accum = muladd(x[xr + k0 + i], f32(code(n, k0 + i)), accum); }
  } else {
    for (var i = 0u; i < count; i += 4u) {
      let k = k0 + i;
      let x0 = x[xr + k]; let x1 = x[xr + k + 1u]; let x2 = x[xr + k + 2u]; let x3 = x[xr + k + 3u];
      sum = add(sum, t_add(t_add(t_add(x0, x1), x2), x3));
      // code j of the pack masked in place (q_j << BITS j), x_j divided by 2^(BITS j): exact rescalings
      let c0 = f32(code(n, k));
      let x1d = pin(x1 / f32(1u << BITS));
      let x2d = pin(x2 / f32(1u << (2u * BITS)));
      let x3d = pin(x3 / f32(1u << (3u * BITS)));
      let c1 = f32(code(n, k + 1u) << BITS);
      let c2 = f32(code(n, k + 2u) << (2u * BITS));
      let c3 = f32(code(n, k + 3u) << (3u * BITS));
      // ((x0 c0 + x1' c1) + x2' c2) + x3' c3: contracted, fma(x3', c3, fma(x2', c2, fma(x0, c0, x1' c1)))
      accum = add(accum, muladd(x3d, c3, muladd(x2d, c2, muladd(x0, c0, mul(x1d, c1)))));
    }
  }
  return muladd(scale, accum, mul(sum, bias));
}

// The shuffle-down ladder over `count` partials (a power of two): p[l] += p[l + h] for h = count/2 .. 1.
fn ladder(p: ptr<function, array<f32, 32>>, count: u32) {
  for (var h = count / 2u; h >= 1u; h /= 2u) {
    for (var l = 0u; l < h; l++) { (*p)[l] = add((*p)[l], (*p)[l + h]); }
  }
}

@compute @workgroup_size(WG)
fn qmv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
       @builtin(local_invocation_index) lid: u32) {
  let idx = linear_workgroup(wid, nwg) * WG + lid;
  let n = idx % P.N;
  let m = idx / P.N;
  if (m >= P.M) { return; }
  let block = LANES * VPT;
  var part: array<f32, 32>;
  for (var l = 0u; l < LANES; l++) {
    var r = 0.0;
    for (var kb = 0u; kb < P.K; kb += block) {
      let k0 = kb + l * VPT;
      if (k0 < P.K) { r = add(r, lane_block(m, n, k0, min(VPT, P.K - k0))); }
    }
    part[l] = r;
  }
  ladder(&part, LANES);
  store(m, n, part[0]);
}

// ---- qmv_wide ----------------------------------------------------------------------------------
// quantized.h qmv_wide_impl (affine, k_lanes = 8) with dequantize: lane l of the KL lanes of an output
// takes groups l, l + KL, l + 2 KL, ...; each group in sub-chunks of SUB inputs, each weight dequantized
// to scale q + bias in f32, then acc = x0 w0 + x1 w1 + ... + x7 w7 from 0 in order, and the lane's
// partial += acc. The KL partials are added by the kernel's shuffle-down ladder (offsets 4, 2, 1).
// Another row of the same threadgroup (vecs_per_tg) never enters a row's sums, so M does not either.
@compute @workgroup_size(WG)
fn qmv_wide(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
  let idx = linear_workgroup(wid, nwg) * WG + lid;
  let n = idx % P.N;
  let m = idx / P.N;
  if (m >= P.M) { return; }
  let xr = m * P.x_stride;
  let groups = P.K / P.group_size;
  var part: array<f32, 32>;
  for (var l = 0u; l < KL; l++) {
    var r = 0.0;
    for (var g = l; g < groups; g += KL) {
      let scale = scale_at(group_index(n, g, P.N, groups));
      let bias = bias_at(group_index(n, g, P.N, groups));
      for (var sc = 0u; sc < P.group_size / SUB; sc++) {
        let k0 = g * P.group_size + sc * SUB;
        var acc = 0.0;
        for (var i = 0u; i < SUB; i++) {
          // dequantize's scale * q + bias: a bf16 scale (8 significant bits) times a code of at most 8 bits
          // is exact in f32, so the fused and the unfused expression agree
          let wq = add(mul(scale, f32(code(n, k0 + i))), bias);
          acc = muladd(x[xr + k0 + i], wq, acc);
        }
        r = add(r, acc);
      }
    }
    part[l] = r;
  }
  ladder(&part, KL);
  store(m, n, part[0]);
}
