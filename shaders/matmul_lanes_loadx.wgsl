// affine_lanes with x loaded by every invocation (adapters without subgroups of at least 8).
// Relaxed-math exactness: one stream. matmul_lanes.wgsl's body (see there).
//#include "matmul_lanes.wgsl"

fn x_chunk(b: u32, lane: u32) -> V8 {
  return V8(x4[b], x4[b + 1u], x4[b + 2u], x4[b + 3u], x4[b + 4u], x4[b + 5u], x4[b + 6u], x4[b + 7u]);
}

// tile: pair i of a row's chunk is x vec4s 2i and 2i+1, read directly (nothing held).
fn x_hold(b: u32, lane: u32) -> vec4<f32> { return vec4<f32>(0.0); }
fn x_pair(b: u32, held: vec4<f32>, i: u32) -> mat2x4<f32> { return mat2x4<f32>(x4[b + 2u * i], x4[b + 2u * i + 1u]); }

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  lanes_body(wid, nwg, lid, 0u);
}

@compute @workgroup_size(WG)
fn tile(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  tile_body(wid, nwg, lid, 0u);
}
