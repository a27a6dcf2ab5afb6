//#include "common.wgsl"
// y[m, n_offset + n] = sum_k x[m, k] * W[n, k] for one row-part of a weight matrix.
//
// Exactness: one invocation computes one output element with a sequential reduction over k in a
// fixed order (group by group, element by element). The arithmetic of a row therefore depends only
// on that row's x and the weights, never on how many rows are dispatched (M) or where the row sits.
override BITS: u32 = 4u;
override WG: u32 = 64u;
// affine_split only (inexact policies): number of contiguous K ranges summed separately.
override SPLIT: u32 = 2u;

struct Params {
  M: u32,          // rows of x
  N: u32,          // output features in this part
  K: u32,          // input features
  group_size: u32, // affine quantization group size
  n_offset: u32,   // first output feature of this part (tensors split across bindings)
  x_stride: u32,   // elements between rows of x
  y_stride: u32,   // elements between rows of y
  round: u32,      // 1: round the output to bf16 (bf16 activation mode)
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read> scales: array<u32>; // bf16 pairs
@group(0) @binding(5) var<storage, read> biases: array<u32>; // bf16 pairs

fn store(m: u32, n: u32, acc: f32) {
  y[m * P.y_stride + P.n_offset + n] = select(acc, round_bf16(acc), P.round == 1u);
}

fn bf16_elem(arr_index: u32, is_bias: bool) -> f32 {
  let word = select(scales[arr_index >> 1u], biases[arr_index >> 1u], is_bias);
  return bf16_to_f32(u16_at(word, arr_index));
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
      let word = w[n * words_per_row + g * words_per_group + wi];
      let k0 = g * P.group_size + wi * per_word;
      for (var e = 0u; e < per_word; e++) {
        let xv = x[xrow + k0 + e];
        qx = ksum_add(qx, f32((word >> (e * BITS)) & mask) * xv);
        sx = ksum_add(sx, xv);
      }
    }
    let gi = n * groups + g;
    acc = ksum_add(acc, bf16_elem(gi, false) * ksum_value(qx));
    acc = ksum_add(acc, bf16_elem(gi, true) * ksum_value(sx));
  }
  store(m, n, ksum_value(acc));
}

// Inexact variant for the parity lab (policy matmul-m-split, M-dependent prefill): the groups are
// cut into SPLIT contiguous ranges, each summed in plain f32, then the partials are added in order,
// the way a split-K kernel reduces. Same math, different rounding: never used by the exact policy.
@compute @workgroup_size(WG)
fn affine_split(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
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
  let per_split = (groups + SPLIT - 1u) / SPLIT;
  var total = 0.0;
  for (var sp = 0u; sp < SPLIT; sp++) {
    var part = 0.0;
    for (var g = sp * per_split; g < min(groups, (sp + 1u) * per_split); g++) {
      var qx = 0.0;
      var sx = 0.0;
      for (var wi = 0u; wi < words_per_group; wi++) {
        let word = w[n * words_per_row + g * words_per_group + wi];
        let k0 = g * P.group_size + wi * per_word;
        for (var e = 0u; e < per_word; e++) {
          let xv = x[xrow + k0 + e];
          qx += f32((word >> (e * BITS)) & mask) * xv;
          sx += xv;
        }
      }
      let gi = n * groups + g;
      part += bf16_elem(gi, false) * qx + bf16_elem(gi, true) * sx;
    }
    total += part;
  }
  store(m, n, total);
}

// ---- affine_rows: the exact kernel reading each weight once for up to ROWS rows --------------
// Two entry points, dispatched in this order by ops.matmul (the same two pipelines for every M):
//   affine_xsum: xs[m, g] = the compensated sum of x[m, k] over group g (what `affine` calls sx),
//     computed once per (row, group) instead of once per output feature; written to binding 3.
//   affine_rows: one invocation computes output feature n for the ROWS consecutive rows m0 ..
//     m0+ROWS-1 of one row block. A workgroup covers WG features of one row block, so the rows (and
//     every x address) are uniform across it. Each weight word, scale and bias is fetched from memory
//     once for all ROWS rows (the group's words are re-read from cache for each set of 4 rows).
//     Trip counts are constant: all ROWS accumulators are always computed; rows >= M read x and xs
//     as 0 and are not stored.
// A row's arithmetic is exactly `affine`'s sequence (per group: compensated sum of q*x over k in
// order, then scale * qx + bias * sx added to a compensated total), carried out in vec4 lanes (one
// lane per row of a set of 4), so it depends neither on M nor on where the row sits in its block.
// x is read through a vec4 view (binding 7): x_stride and K must be multiples of 4 (ops.matmul uses
// `affine` otherwise, a choice that depends on the linear and its strides, never on M).
// ROWS is 4 or 8; an engine uses one value for every M (another ROWS is another pipeline).
override ROWS: u32 = 8u;

@group(0) @binding(6) var<storage, read> xs: array<f32>; // [M, groups] from affine_xsum
@group(0) @binding(7) var<storage, read> x4: array<vec4<f32>>; // x again, as vec4 (x_stride % 4 == 0)

@compute @workgroup_size(WG)
fn affine_xsum(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
  let idx = linear_workgroup(wid, nwg) * WG + lid;
  let groups = P.K / P.group_size;
  let g = idx % groups;
  let m = idx / groups;
  if (m >= P.M) { return; }
  let k0 = m * P.x_stride + g * P.group_size;
  var sx = vec2<f32>(0.0);
  for (var e = 0u; e < P.group_size; e++) { sx = ksum_add(sx, x[k0 + e]); }
  y[m * groups + g] = ksum_value(sx);
}

// Neumaier step for four independent sums at once (lane-wise ksum_add).
fn ksum4_add(s: ptr<function, vec4<f32>>, c: ptr<function, vec4<f32>>, v: vec4<f32>) {
  let t = *s + v;
  *c = *c + select((v - t) + *s, (*s - t) + v, abs(*s) >= abs(v));
  *s = t;
}

// Compensated sum of q * x over one group for four rows (x4 row offsets xr in vec4 units; rows
// not live read 0). x is read as vec4 along k (4 consecutive inputs of one row per load), then
// transposed to one vec4 lane per row. The group's few weight words are re-read for each set of four
// rows (from cache after the first).
fn group_qx4(wbase: u32, k0: u32, xr: vec4<u32>, live: vec4<bool>) -> vec4<f32> {
  let per_word = 32u / BITS;
  let mask = (1u << BITS) - 1u;
  let zero = vec4<f32>(0.0);
  var s = zero;
  var c = zero;
  for (var wi = 0u; wi < P.group_size / per_word; wi++) {
    let word = w[wbase + wi];
    for (var j = 0u; j < per_word / 4u; j++) {
      let k4 = (k0 + wi * per_word) / 4u + j;
      let a = select(zero, x4[xr.x + k4], live.x);
      let b = select(zero, x4[xr.y + k4], live.y);
      let c4 = select(zero, x4[xr.z + k4], live.z);
      let d = select(zero, x4[xr.w + k4], live.w);
      for (var e4 = 0u; e4 < 4u; e4++) {
        let e = j * 4u + e4;
        let q = f32((word >> (e * BITS)) & mask);
        ksum4_add(&s, &c, q * vec4<f32>(a[e4], b[e4], c4[e4], d[e4]));
      }
    }
  }
  return s + c;
}

@compute @workgroup_size(WG)
fn affine_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
  // Workgroup b covers features tile * WG .. tile * WG + WG-1 of row block `block`: the rows, hence
  // every x address below, are uniform across the workgroup (broadcast loads).
  let b = linear_workgroup(wid, nwg);
  let tiles = (P.N + WG - 1u) / WG;
  let n = (b % tiles) * WG + lid;
  let m0 = (b / tiles) * ROWS;
  if (m0 >= P.M || n >= P.N) { return; }
  let words_per_row = P.K / (32u / BITS);
  let groups = P.K / P.group_size;
  let words_per_group = P.group_size / (32u / BITS);
  let zero = vec4<f32>(0.0);
  var acc: array<vec4<f32>, 2>;
  var accc: array<vec4<f32>, 2>;
  for (var g = 0u; g < groups; g++) {
    let gi = n * groups + g;
    let scale = bf16_elem(gi, false);
    let bias = bf16_elem(gi, true);
    // Rows 4h .. 4h+3 of the block; constant trip count ROWS / 4.
    for (var h = 0u; h < ROWS / 4u; h++) {
      let m = vec4<u32>(m0 + 4u * h) + vec4<u32>(0u, 1u, 2u, 3u);
      let live = m < vec4<u32>(P.M);
      let r = min(m, vec4<u32>(P.M - 1u)); // rows past M read a valid row, masked to 0
      let qx = group_qx4(n * words_per_row + g * words_per_group, g * P.group_size, r * (P.x_stride / 4u), live);
      let sx = select(zero, vec4<f32>(xs[r.x * groups + g], xs[r.y * groups + g], xs[r.z * groups + g], xs[r.w * groups + g]), live);
      var a = acc[h];
      var ac = accc[h];
      ksum4_add(&a, &ac, scale * qx);
      ksum4_add(&a, &ac, bias * sx);
      acc[h] = a;
      accc[h] = ac;
    }
  }
  for (var h = 0u; h < ROWS / 4u; h++) {
    let v = acc[h] + accc[h];
    for (var j = 0u; j < 4u; j++) {
      let m = m0 + 4u * h + j;
      if (m < P.M) { store(m, n, v[j]); }
    }
  }
}
