enable subgroups;
// affine_lanes with x shared through subgroups (subgroup size >= 8): invocation `lane` loads the
// (lane % 8)-th vec4 of the chunk and the eight values are broadcast. On software adapters every
// load is a per-invocation scalar loop, so this removes most of x's cost; the values are the same.
// Relaxed-math exactness: one stream. matmul_lanes.wgsl's body (see there).
//#include "matmul_lanes.wgsl"

fn x_chunk(b: u32, lane: u32) -> V8 {
  let v = x4[b + (lane & 7u)];
  return V8(subgroupBroadcast(v, 0u), subgroupBroadcast(v, 1u), subgroupBroadcast(v, 2u), subgroupBroadcast(v, 3u),
            subgroupBroadcast(v, 4u), subgroupBroadcast(v, 5u), subgroupBroadcast(v, 6u), subgroupBroadcast(v, 7u));
}

// tile: lane l holds vec4 (l % 8) of a row's chunk; pair i is vec4s 2i and 2i+1 (subgroupShuffle:
// i is not a constant expression, as subgroupBroadcast would need).
fn x_hold(b: u32, lane: u32) -> vec4<f32> { return x4[b + (lane & 7u)]; }
fn x_pair(b: u32, held: vec4<f32>, i: u32) -> mat2x4<f32> {
  return mat2x4<f32>(subgroupShuffle(held, 2u * i), subgroupShuffle(held, 2u * i + 1u));
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32, @builtin(subgroup_invocation_id) lane: u32) {
  lanes_body(wid, nwg, lid, lane);
}

@compute @workgroup_size(WG)
fn tile(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32, @builtin(subgroup_invocation_id) lane: u32) {
  tile_body(wid, nwg, lid, lane);
}
