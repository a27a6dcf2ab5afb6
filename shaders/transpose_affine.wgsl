//#include "common.wgsl"
// An affine linear's buffers from MLX's layout into the k-major one (affine_layout.wgsl, WT = 1), once, on
// upload (src/gpu/weight-layout.ts): dst[k * rows + n] = src[n * cols + k] for a [rows, cols] matrix of
// units, a unit being a 16-byte word of packed codes (`words`) or a bf16 scale or bias (`halves`, two to
// a 32-bit word of the buffers). A copy: no value changes.
// Relaxed-math exactness: no arithmetic (a copy on upload).
struct Params { rows: u32, cols: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> src16: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> dst16: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> src32: array<u32>;
@group(0) @binding(4) var<storage, read_write> dst32: array<u32>;

const WG: u32 = 256u;

@compute @workgroup_size(WG)
fn words(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lid: u32) {
  let i = linear_workgroup(wid, nwg) * WG + lid;
  if (i >= P.rows * P.cols) { return; }
  let k = i / P.rows;
  let n = i - k * P.rows;
  dst16[i] = src16[n * P.cols + k];
}

// The bf16 entry e of the k-major order, read from MLX's.
fn half_at(e: u32) -> u32 {
  let k = e / P.rows;
  let n = e - k * P.rows;
  let s = n * P.cols + k;
  return u16_at(src32[s >> 1u], s);
}

@compute @workgroup_size(WG)
fn halves(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
  let j = linear_workgroup(wid, nwg) * WG + lid;
  let total = P.rows * P.cols;
  if (2u * j >= total) { return; }
  var hi = 0u;
  if (2u * j + 1u < total) { hi = half_at(2u * j + 1u); }
  dst32[j] = half_at(2u * j) | (hi << 16u);
}
