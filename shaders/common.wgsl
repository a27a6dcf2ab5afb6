// Shared helpers, spliced into other kernels by `//#include "common.wgsl"` (src/gpu/shaders.ts).

// A bf16 value is the top 16 bits of an f32.
fn bf16_to_f32(bits: u32) -> f32 {
  return bitcast<f32>(bits << 16u);
}

// Round an f32 to the nearest bf16 (ties to even), returned as f32. NaN stays NaN.
fn round_bf16(x: f32) -> f32 {
  let u = bitcast<u32>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) { return x; }
  let r = u + 0x7fffu + ((u >> 16u) & 1u);
  return bitcast<f32>(r & 0xffff0000u);
}

// Element i of a packed array of u16 (bf16/f16 bit patterns) stored as u32 words, little endian.
fn u16_at(words_val: u32, i: u32) -> u32 {
  return (words_val >> ((i & 1u) * 16u)) & 0xffffu;
}

// Linear workgroup index for dispatches folded into 2-D (more than 65535 workgroups).
fn linear_workgroup(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
  return wid.x + wid.y * nwg.x;
}
