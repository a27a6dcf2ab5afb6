//#include "common.wgsl"
// y[m, n_offset + n] = sum_k x[m, k] * W[n, k] with W stored dense as bf16, f16 (u16 pairs) or f32.
// One invocation per output element, sequential reduction over k: row-invariant (see matmul.wgsl).
// Relaxed-math exactness: one stream. One invocation per output element, the same sequential loop for every row.
override WG: u32 = 64u;
override DTYPE: u32 = 0u; // 0 bf16, 1 f16, 2 f32

struct Params { M: u32, N: u32, K: u32, _unused: u32, n_offset: u32, x_stride: u32, y_stride: u32, round: u32 }

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

fn weight(i: u32) -> f32 {
  if (DTYPE == 2u) { return bitcast<f32>(w[i]); }
  let bits = u16_at(w[i >> 1u], i);
  if (DTYPE == 1u) { return unpack2x16float(bits).x; }
  return bf16_to_f32(bits);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let idx = linear_workgroup(wid, nwg) * WG + lid;
  let n = idx % P.N;
  let m = idx / P.N;
  if (m >= P.M) { return; }
  var s = vec2<f32>(0.0);
  for (var k = 0u; k < P.K; k++) {
    s = ksum_add(s, x[m * P.x_stride + k] * weight(n * P.K + k));
  }
  let acc = ksum_value(s);
  y[m * P.y_stride + P.n_offset + n] = select(acc, round_bf16(acc), P.round == 1u);
}
