enable f16;
// Self-test of shader-f16: out[i] = f32(f16(a[i]) * f16(2.0)): exact for values representable in f16.
// Relaxed-math exactness: not on the exact path (the adapter self-test's probe kernel).
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= arrayLength(&out)) { return; }
  out[i] = f32(f16(a[i]) * 2.0h);
}
