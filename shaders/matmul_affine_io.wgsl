//#include "affine_layout.wgsl"
// The parameters and bindings every affine (MLX-quantized) matmul kernel shares: matmul.wgsl
// (affine, affine_xsum) and matmul_lanes.wgsl (lanes, tile). ops.matmul fills Params
// the same way for all of them.
// Relaxed-math exactness: no arithmetic (parameters and bindings); `_zero` is the opaque zero matmul_coop.wgsl's
// pins read.
override BITS: u32 = 4u;
override WG: u32 = 64u;

struct Params {
  M: u32,          // rows of x
  N: u32,          // output features in this part
  K: u32,          // input features
  group_size: u32, // affine quantization group size
  n_offset: u32,   // first output feature of this part (tensors split across bindings)
  x_stride: u32,   // elements between rows of x
  y_stride: u32,   // elements between rows of y
  round: u32,      // 1: round the output to bf16 (bf16 activation mode)
  _zero: u32,      // always 0 (a `_` field: written as 0 by Recorder.params): matmul_coop.wgsl's pin()
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read> scales: array<u32>; // bf16 pairs
@group(0) @binding(5) var<storage, read> biases: array<u32>; // bf16 pairs

// Group i's scale / bias. Two functions, not one with a select(): select() evaluates both operands,
// and on software adapters every load is a per-invocation loop.
fn scale_at(i: u32) -> f32 { return bf16_to_f32(u16_at(scales[i >> 1u], i)); }
fn bias_at(i: u32) -> f32 { return bf16_to_f32(u16_at(biases[i >> 1u], i)); }
