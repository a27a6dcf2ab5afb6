//#include "common.wgsl"
// RMSNorm over rows of length D: v = x * (mean(x^2) + eps)^-1/2 * w   (w used as is; weightless: w = 1).
// mode 0: out = v.  mode 1 (residual): out = (out + v) * post_scale  (post_scale = layer_scalar or 1).
// One invocation per row, sequential sums: row-invariant.
override WG: u32 = 64u;

struct Params {
  rows: u32, D: u32, in_stride: u32, out_stride: u32,
  eps: f32, has_weight: u32, mode: u32, round: u32,
  post_scale: f32, _p0: u32, _p1: u32, _p2: u32,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<u32>; // bf16 pairs (ignored when has_weight == 0)
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

fn r(v: f32) -> f32 { return select(v, round_bf16(v), P.round == 1u); }

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let row = linear_workgroup(wid, nwg) * WG + lid;
  if (row >= P.rows) { return; }
  let xb = row * P.in_stride;
  let ob = row * P.out_stride;
  var ss = vec2<f32>(0.0);
  for (var i = 0u; i < P.D; i++) { let v = x[xb + i]; ss = ksum_add(ss, v * v); }
  let inv = rsqrt_ref(ksum_value(ss) / f32(P.D) + P.eps);
  for (var i = 0u; i < P.D; i++) {
    var v = x[xb + i] * inv;
    if (P.has_weight == 1u) { v = v * bf16_to_f32(u16_at(w[i >> 1u], i)); }
    v = r(v); // one rounding, as MLX's fused rms_norm
    if (P.mode == 1u) {
      let s = r(out[ob + i] + v);
      out[ob + i] = r(s * P.post_scale);
    } else {
      out[ob + i] = v;
    }
  }
}
