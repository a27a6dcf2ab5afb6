//#include "common.wgsl"
// y[m, n_offset + n] = sum_k x[m, k] * W[n, k] for one row-part of a weight matrix.
//
// Exactness: one invocation computes one output element with a sequential reduction over k in a
// fixed order (group by group, element by element). The arithmetic of a row therefore depends only
// on that row's x and the weights, never on how many rows are dispatched (M) or where the row sits.
// CPU twin: src/reference/quantized-matmul.ts (float64); test: test/gpu/kernels-matmul.test.ts.
// Relaxed-math exactness: one stream. One invocation per output (affine) or per group sum (affine_xsum), the same loop for
// every row.
//#include "matmul_affine_io.wgsl"

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<u32>;

fn store(m: u32, n: u32, acc: f32) {
  y[m * P.y_stride + P.n_offset + n] = select(acc, round_bf16(acc), P.round == 1u);
}

// Affine-quantized weights (MLX): W[n, k] = scale[n, g] * q + bias[n, g], q packed LSB first.
// Per group: scale * sum(q * x) + bias * sum(x), as MLX's quantized kernels do.
@compute @workgroup_size(WG)
fn affine(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
  let idx = linear_workgroup(wid, nwg) * WG + lid;
  let n = idx % P.N;
  let m = idx / P.N;
  if (m >= P.M) { return; }
  let per_word = 32u / BITS;
  let mask = (1u << BITS) - 1u;
  let words_per_row = P.K / per_word;
  let groups = P.K / P.group_size;
  let words_per_group = P.group_size / per_word;
  let xrow = m * P.x_stride;
  var acc = vec2<f32>(0.0);
  for (var g = 0u; g < groups; g++) {
    var qx = vec2<f32>(0.0);
    var sx = vec2<f32>(0.0);
    for (var wi = 0u; wi < words_per_group; wi++) {
      let word = w[w32_index(n, g * words_per_group + wi, P.N, words_per_row)];
      let k0 = g * P.group_size + wi * per_word;
      for (var e = 0u; e < per_word; e++) {
        let xv = x[xrow + k0 + e];
        qx = ksum_add(qx, f32((word >> (e * BITS)) & mask) * xv);
        sx = ksum_add(sx, xv);
      }
    }
    let gi = group_index(n, g, P.N, groups);
    acc = ksum_add(acc, scale_at(gi) * ksum_value(qx));
    acc = ksum_add(acc, bias_at(gi) * ksum_value(sx));
  }
  store(m, n, ksum_value(acc));
}

// ---- affine_xsum: per-group sums of x for matmul_lanes.wgsl (affine_lanes, affine_tile) --------
// xs[m, g] = the compensated sum of x[m, k] over group g (what `affine` calls sx), computed once per
// (row, group) instead of once per output feature; written to binding 3.
const XB: u32 = 16u;
@compute @workgroup_size(WG)
fn affine_xsum(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
  let idx = linear_workgroup(wid, nwg) * WG + lid;
  let groups = P.K / P.group_size;
  let g = idx % groups;
  let m = idx / groups;
  if (m >= P.M) { return; }
  let k0 = m * P.x_stride + g * P.group_size;
  // XB values are loaded ahead of their steps of the sum (the same steps in the same order): XB loads in
  // flight instead of one per step. A decode step has one invocation per group, too few to hide memory
  // latency by occupancy: on an H200 this dispatch took ~50 us with one load per step (2026-12-02).
  var sx = vec2<f32>(0.0);
  var xv: array<f32, XB>;
  var e = 0u;
  for (; e + XB <= P.group_size; e += XB) {
    for (var u = 0u; u < XB; u++) { xv[u] = x[k0 + e + u]; }
    for (var u = 0u; u < XB; u++) { sx = ksum_add(sx, xv[u]); }
  }
  for (; e < P.group_size; e++) { sx = ksum_add(sx, x[k0 + e]); }
  y[m * groups + g] = ksum_value(sx);
}
