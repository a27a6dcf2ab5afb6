//#include "common.wgsl"
// Split-K, the inexact matmul of the parity-lab policies matmul-m-split and prefill-chunk-mismatch
// (MLX's split-K kernels, whose split count depends on the row count). ops.matmul runs it as:
//   for each K range r = 0 .. S-1 (contiguous, whole quantization groups):
//     mask_x:   x_r = x with every column outside range r set to 0
//     the EXACT kernel this matmul would otherwise run (lanes, tile, coop, affine or dense main; same
//     pipeline, same constants) on x_r, into `part`
//     add_part: y = part (r = 0) or y + part (r > 0), plain f32, in range order; bf16 rounding last
// Why a mask instead of a kernel of its own: the exact kernels already define the arithmetic over
// the columns a range keeps, and a zeroed column is an exact no-op in all of them (its products are
// +-0, its group's x sum is 0, and adding +-0 to a compensated sum leaves it unchanged). So each
// partial is the exact kernel's own reduction restricted to its range, and the ONLY change from the
// exact policy is the named mechanism: S partial sums rounded and added in f32. With S = 1 the mask
// keeps every column and add_part copies, so the result is the exact kernel's, byte for byte
// (test/gpu/policy-twins.test.ts checks this on every adapter and kernel class).
// Relaxed-math exactness: not on the exact path (the matmul-m-split and prefill-chunk-mismatch policies only).
override WG: u32 = 64u;

struct Params {
  M: u32,
  K: u32,        // mask_x: columns of x that the matmul reads
  x_stride: u32, // mask_x: elements between rows of x (and of x_r)
  lo: u32,       // mask_x: first column kept
  hi: u32,       // mask_x: one past the last column kept
  N: u32,        // add_part: output features (part is [M, N])
  y_stride: u32, // add_part: elements between rows of y
  flags: u32,    // add_part: 1 = first range (y = part), 2 = last range, 4 = round the result to bf16
}

@group(0) @binding(0) var<uniform> P: Params;
// x and x_r as raw bits: a kept column is copied, never passed through float arithmetic.
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> xr: array<u32>;
@group(0) @binding(3) var<storage, read> part: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(WG)
fn mask_x(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
  let idx = linear_workgroup(wid, nwg) * WG + lid;
  let k = idx % P.K;
  let m = idx / P.K;
  if (m >= P.M) { return; }
  let at = m * P.x_stride + k;
  // Dropped columns become +0.0 (bits 0).
  if (k >= P.lo && k < P.hi) { xr[at] = x[at]; } else { xr[at] = 0u; }
}

@compute @workgroup_size(WG)
fn add_part(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
  let idx = linear_workgroup(wid, nwg) * WG + lid;
  let n = idx % P.N;
  let m = idx / P.N;
  if (m >= P.M) { return; }
  let at = m * P.y_stride + n;
  // The first range starts the sum (not 0 + part: that would turn a -0.0 into +0.0).
  var v = part[m * P.N + n];
  if ((P.flags & 1u) == 0u) { v = y[at] + v; }
  if ((P.flags & 6u) == 6u) { v = round_bf16(v); }
  y[at] = v;
}
