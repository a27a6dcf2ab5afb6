//#include "common.wgsl"
//#include "affine_layout.wgsl"
// h[m, c] = E[ids[m], c] * scale for the rows of one part of the (quantized or dense) table.
// Rows outside this part are left alone; every part is dispatched in turn.
// Relaxed-math exactness: one stream. One product per element; the row count only sizes the dispatch.
override BITS: u32 = 4u;
override WG: u32 = 64u;
override DTYPE: u32 = 0u; // dense entry: 0 bf16, 1 f16, 2 f32

struct Params { M: u32, H: u32, row_start: u32, rows: u32, group_size: u32, scale: f32, round: u32, _pad: u32 }

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read_write> h: array<f32>;
@group(0) @binding(4) var<storage, read> scales: array<u32>;
@group(0) @binding(5) var<storage, read> biases: array<u32>;

fn finish(m: u32, col: u32, v: f32) {
  // bf16 mode: the table row is bf16 (MLX dequantizes to the model dtype), then times a bf16 scalar.
  let e = select(v, round_bf16(v), P.round == 1u);
  let s = e * P.scale;
  h[m * P.H + col] = select(s, round_bf16(s), P.round == 1u);
}

@compute @workgroup_size(WG)
fn affine(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
  let idx = linear_workgroup(wid, nwg) * WG + lid;
  let col = idx % P.H;
  let m = idx / P.H;
  if (m >= P.M) { return; }
  let id = ids[m];
  if (id < P.row_start || id >= P.row_start + P.rows) { return; }
  let r = id - P.row_start;
  let per_word = 32u / BITS;
  let word = w[w32_index(r, col / per_word, P.rows, P.H / per_word)];
  let q = (word >> ((col % per_word) * BITS)) & ((1u << BITS) - 1u);
  let gi = group_index(r, col / P.group_size, P.rows, P.H / P.group_size);
  let s = bf16_to_f32(u16_at(scales[gi >> 1u], gi));
  let b = bf16_to_f32(u16_at(biases[gi >> 1u], gi));
  finish(m, col, s * f32(q) + b);
}

@compute @workgroup_size(WG)
fn dense(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lid: u32) {
  let idx = linear_workgroup(wid, nwg) * WG + lid;
  let col = idx % P.H;
  let m = idx / P.H;
  if (m >= P.M) { return; }
  let id = ids[m];
  if (id < P.row_start || id >= P.row_start + P.rows) { return; }
  let i = (id - P.row_start) * P.H + col;
  var v: f32;
  if (DTYPE == 2u) { v = bitcast<f32>(w[i]); }
  else if (DTYPE == 1u) { v = unpack2x16float(u16_at(w[i >> 1u], i)).x; }
  else { v = bf16_to_f32(u16_at(w[i >> 1u], i)); }
  finish(m, col, v);
}
