//#include "common.wgsl"
// Rotate-half RoPE in place on rows of `heads` heads of size d: element i pairs with i + d/2.
// Only the first `rot_pairs` pairs rotate (proportional RoPE zeroes the other frequencies, which is
// the identity). cos/sin come from a table computed on the CPU in float64 per absolute position.
// Relaxed-math exactness: one stream. One fixed expression per element; the row count only sizes the dispatch.
override WG: u32 = 64u;

struct Params { M: u32, heads: u32, d: u32, pos0: u32, rot_pairs: u32, table_half: u32, round: u32, _pad: u32 }

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> cos_t: array<f32>; // [position][table_half]
@group(0) @binding(3) var<storage, read> sin_t: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let idx = linear_workgroup(wid, nwg) * WG + lid;
  let i = idx % P.rot_pairs;
  let mh = idx / P.rot_pairs;
  if (mh >= P.M * P.heads) { return; }
  let m = mh / P.heads;
  let half = P.d / 2u;
  let base = mh * P.d;
  let t = (P.pos0 + m) * P.table_half + i;
  let c = cos_t[t];
  let s = sin_t[t];
  let r = rope_pair(x[base + i], x[base + i + half], c, s, P.round == 1u);
  x[base + i] = r.x;
  x[base + i + half] = r.y;
}
