//#include "common.wgsl"
// Element-wise ops. Each element's arithmetic is independent of the dispatch size.
// Relaxed-math exactness: one stream. One fixed expression per element; the row count only sizes the dispatch.
override WG: u32 = 64u;

struct Params { n: u32, round: u32, cap: f32, _pad: u32 }

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read_write> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;

fn r(v: f32) -> f32 { return select(v, round_bf16(v), P.round == 1u); }

// GeGLU: a = gelu_tanh(a) * b   (a holds gate(x), b holds up(x)).
@compute @workgroup_size(WG)
fn geglu(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lid: u32) {
  let i = linear_workgroup(wid, nwg) * WG + lid;
  if (i >= P.n) { return; }
  a[i] = r(r(gelu_tanh(a[i])) * b[i]);
}

// Final logit softcap in place: a = cap * tanh(a / cap), computed in f32 then rounded.
@compute @workgroup_size(WG)
fn softcap(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
  let i = linear_workgroup(wid, nwg) * WG + lid;
  if (i >= P.n) { return; }
  a[i] = r(P.cap * tanh_ref(a[i] / P.cap));
}
