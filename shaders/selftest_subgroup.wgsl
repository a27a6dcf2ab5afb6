enable subgroups;
// Self-test of subgroups: every invocation writes the sum of its subgroup's inputs and the subgroup size.
// Relaxed-math exactness: not on the exact path (the adapter self-test's probe kernel).
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read_write> sizes: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(subgroup_size) sg_size: u32) {
  let i = gid.x;
  let s = subgroupAdd(a[i]);
  out[i] = s;
  sizes[i] = sg_size;
}
