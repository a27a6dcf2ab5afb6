//#include "common.wgsl"
// Self-test kernel: out[i] = a[i] * b[i] + c, over a dispatch that may be folded into 2-D.
// Relaxed-math exactness: not on the exact path (the adapter self-test's probe kernel).
override WG: u32 = 64u;

struct Params { n: u32, c: f32 }

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_workgroup(wid, nwg) * WG + lid;
  if (i >= params.n) { return; }
  out[i] = fma(a[i], b[i], params.c);
}
