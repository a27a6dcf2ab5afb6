// affine_lanes with x loaded by every invocation (adapters without subgroups of at least 8).
//#include "matmul_lanes.wgsl"

fn x_chunk(b: u32, lane: u32) -> V8 {
  return V8(x4[b], x4[b + 1u], x4[b + 2u], x4[b + 3u], x4[b + 4u], x4[b + 5u], x4[b + 6u], x4[b + 7u]);
}

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
