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

// ---- rows_wg: the GPU form (ops.rmsnorm picks it on hardware adapters, src/gpu/kernel-class.ts) ----
// One workgroup per row: invocation t sums the squares of elements t, t + WG, ... (Neumaier), the
// partial sums are merged by a fixed binary tree in workgroup memory (two-sum of the running sums,
// compensations added), and every invocation scales its own elements. The order of every addition
// is a function of D and WG only: row-invariant. Why: the one-invocation-per-row `main` walks 3840
// elements through dependent loads one at a time, 0.6 ms per call on an H200 (15 calls per 2 layers).
var<workgroup> part: array<vec2<f32>, WG>;

fn merge(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
  let s = ksum_add(vec2<f32>(a.x, 0.0), b.x); // two-sum of the running sums
  return vec2<f32>(s.x, s.y + (a.y + b.y));
}

@compute @workgroup_size(WG)
fn rows_wg(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
  let row = linear_workgroup(wid, nwg); // uniform: the whole workgroup returns or none of it
  if (row >= P.rows) { return; }
  let xb = row * P.in_stride;
  let ob = row * P.out_stride;
  var ss = vec2<f32>(0.0);
  for (var i = lid; i < P.D; i += WG) { let v = x[xb + i]; ss = ksum_add(ss, v * v); }
  part[lid] = ss;
  for (var half = WG / 2u; half > 0u; half /= 2u) {
    workgroupBarrier();
    if (lid < half) { part[lid] = merge(part[lid], part[lid + half]); }
  }
  workgroupBarrier();
  let inv = rsqrt_ref(ksum_value(part[0]) / f32(P.D) + P.eps);
  for (var i = lid; i < P.D; i += WG) {
    var v = x[xb + i] * inv;
    if (P.has_weight == 1u) { v = v * bf16_to_f32(u16_at(w[i >> 1u], i)); }
    v = r(v);
    if (P.mode == 1u) {
      let s = r(out[ob + i] + v);
      out[ob + i] = r(s * P.post_scale);
    } else {
      out[ob + i] = v;
    }
  }
}
